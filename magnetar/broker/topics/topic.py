"""A persistent topic: its managed ledger, producers, subscriptions, and the
single ordered append path.

The ordered append path (:meth:`Topic.publish`) is the one place where every
single-writer rule is checked, synchronously and in arrival order, before the
entry is handed to storage:

1. access: the producer is attached, not fenced, (exclusive modes) holds
   the current topic epoch, and the topic is not over a backlog quota whose
   policy refuses sends (:mod:`.backlog_quota`);
2. idempotence / deduplication (see :mod:`.dedup`);
3. conditional publish: the send's expected offset equals the upcoming offset,
   and it was planned in the producer's current offset epoch (a refusal starts
   a new epoch, so sends pipelined behind a refused one are refused too).

Because no ``await`` separates the checks from ``ManagedLedger.append`` (which
assigns positions in call order), no rule can race another. A refusal never
has a partial effect: offsets and sequence state only move for appended entries.

Offsets are dense per topic: the first message of the topic has offset 0, an
entry of N messages takes N offsets. The upcoming offset is recovered at load
from the last entry's broker entry metadata.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, Protocol

from magnetar.protocol import pb
from magnetar.protocol.frames import PayloadBlock
from magnetar.storage import Entry, ManagedLedger, Position

from magnetar.broker.config import BrokerConfig
from magnetar.broker.entries.entry_format import build_entry, entry_info
from magnetar.broker.errors import (
    BrokerError,
    ExpectedOffsetMismatch,
    PersistenceError,
    ProducerBusy,
    ProducerFenced,
    ServiceNotReady,
    TopicTerminated,
)
from magnetar.broker.namespaces.policies import BacklogQuota
from magnetar.broker.policies import backlog_quota
from magnetar.broker.subscriptions.consumer import Consumer
from magnetar.broker.subscriptions.subscription import SubType, Subscription
from magnetar.broker.topic_name import TopicName
from magnetar.metadata import MetadataStore

from .dedup import Deduplicator, Duplicate
from .producer import AccessMode, Producer, PublishResult

log = logging.getLogger(__name__)

TOPIC_EPOCH = "topic_epoch"
#: Managed ledger property set by terminate(): the position of the last entry.
TERMINATED_AT = "terminated_at"
UINT64_MAX = (1 << 64) - 1
SHARED = int(AccessMode.Shared)  # a plain int: the enum wrapper is slow on the hot path
INT64_MAX = (1 << 63) - 1


class TransferHold(Exception):
    """A send that arrived while the topic is moving: held, not answered."""


def _chain(source: asyncio.Future, target: asyncio.Future) -> None:
    """Complete ``target`` like ``source`` (now or when it completes)."""

    def copy(src: asyncio.Future) -> None:
        if target.done():
            return
        if src.cancelled():
            target.cancel()
        elif src.exception() is not None:
            target.set_exception(src.exception())
        else:
            target.set_result(src.result())

    if source.done():
        copy(source)
    else:
        source.add_done_callback(copy)


def _before(pos: Position) -> Position:
    return Position(pos.ledger_id, pos.entry_id - 1)


class CompactedReads(Protocol):
    async def read(self, dispatcher: Any, consumer: Consumer, want: int) -> list[Entry] | None: ...


class TopicHost(Protocol):
    """What a topic needs of the broker that serves it (``server.service.BrokerService``).

    Failure modes the host must absorb: ``fail_topic`` is called from a
    storage callback and must not raise; it unloads the topic later.
    """

    config: BrokerConfig
    store: MetadataStore
    #: The compacted views (``topics.compaction.Compactor``).
    compactor: CompactedReads

    async def deduplication_enabled(self, name: TopicName) -> bool: ...

    def notify_producer_closed(self, producer: Producer) -> None:
        """Tell the producer's client the broker closed it (it reconnects)."""

    def fail_topic(self, topic: "Topic", exc: BaseException) -> None:
        """Storage failed under ``topic``: unload it so it is rebuilt from disk."""


class Topic:
    def __init__(self, service: TopicHost, name: TopicName, ledger: ManagedLedger) -> None:
        self.service = service
        self.config: BrokerConfig = service.config
        self.name = name
        self.ledger = ledger
        self.producers: dict[str, Producer] = {}
        self.subscriptions: dict[str, Subscription] = {}
        self.next_offset = 0
        self.topic_epoch = 0
        self.exclusive_producer: Producer | None = None
        #: WaitForExclusive producers in arrival order, with the future that promotes them.
        self.waiting: deque[tuple[Producer, asyncio.Future]] = deque()
        self._admission = asyncio.Lock()
        self.dedup = Deduplicator(
            service.store, ledger.name, enabled=service.config.deduplication_enabled,
            snapshot_interval=service.config.dedup_snapshot_interval_entries,
            pid_expiry_ms=int(service.config.pid_expiry_s * 1000),
            name_expiry_ms=int(service.config.dedup_producer_inactivity_s * 1000),
        )
        self.dedup.attached_names = lambda: set(self.producers)
        self.closed = False
        #: Set by release(): moving to another broker; sends are held, not refused.
        self.transferring = False
        self._held_consumers: list[Consumer] = []
        #: Set by terminate(): the last entry the topic will ever have.
        self.terminated_at: Position | None = None
        #: The namespace's backlog quotas (kept current by the service).
        self.backlog_quotas: tuple[BacklogQuota, ...] = ()
        #: The exceeded backlog quota that blocks producers now (set by backlog_quota.check).
        self.quota_block: BacklogQuota | None = None
        self.msg_in = 0
        self.bytes_in = 0
        self._unlisten = ledger.add_listener(self._on_new_entries)

    # -- loading -------------------------------------------------------------
    @classmethod
    async def load(cls, service: TopicHost, name: TopicName, ledger: ManagedLedger) -> "Topic":
        topic = cls(service, name, ledger)
        topic.topic_epoch = int(ledger.properties.get(TOPIC_EPOCH, "0"))
        if TERMINATED_AT in ledger.properties:
            topic.terminated_at = Position.parse(ledger.properties[TERMINATED_AT])
        last = ledger.last_confirmed
        if last is not None:
            entries = await ledger.read_entries(last, 1)
            if entries:
                topic.next_offset = entry_info(entries[0].data).last_offset + 1
        for cursor_name, cursor in ledger.cursors.items():
            topic.subscriptions[cursor_name] = Subscription(topic, cursor_name, cursor, durable=True)
        topic.dedup.enabled = await service.deduplication_enabled(name)
        await topic.dedup.recover(ledger)
        return topic

    # -- producers -----------------------------------------------------------
    async def add_producer(self, producer: Producer, requested_epoch: int | None) -> asyncio.Future | None:
        """Admit ``producer`` under its access mode.

        Returns None when the producer is ready now, or a future that completes
        when a WaitForExclusive producer is promoted (it fails with
        ProducerFenced if a fencing producer evicts it while waiting).
        Raises ProducerBusy / ProducerFenced when refused, BacklogQuotaHold /
        BacklogQuotaRefusal while the backlog is over a quota that blocks
        producers (measured now). The topic epoch is persisted before this
        returns for every exclusive admission.
        """
        async with self._admission:
            self._check_open()
            self._check_not_terminated()
            blocking = await backlog_quota.check(self)
            if blocking is not None:
                raise backlog_quota.refusal(self, blocking)
            if producer.name in self.producers:
                raise ProducerBusy(f"producer with name '{producer.name}' is already connected to {self.name}")
            mode = producer.access_mode
            if mode == AccessMode.Shared:
                if self.exclusive_producer is not None:
                    raise ProducerBusy(f"topic {self.name} has an exclusive producer ({self.exclusive_producer.name})")
                if self.waiting:
                    raise ProducerBusy(f"topic {self.name} has producers waiting for exclusive access")
                self._attach(producer)
                return None
            self._check_epoch(requested_epoch)
            if mode == AccessMode.ExclusiveWithFencing:
                self._fence_all(f"fenced by exclusive producer {producer.name}")
            elif self.producers or self.exclusive_producer is not None:
                if mode == AccessMode.Exclusive:
                    # Pulsar answers an Exclusive producer that cannot have the
                    # topic with ProducerFenced (ProducerBusy is for Shared).
                    raise ProducerFenced(
                        f"topic {self.name} has {len(self.producers)} producer(s); exclusive access refused"
                    )
                waiter = asyncio.get_running_loop().create_future()
                self.waiting.append((producer, waiter))
                producer.requested_epoch = requested_epoch  # type: ignore[attr-defined]
                return waiter
            elif self.waiting and mode == AccessMode.Exclusive:
                raise ProducerFenced(f"topic {self.name} has producers waiting for exclusive access")
            await self._take_exclusive(producer, requested_epoch)
            return None

    def last_sequence_id(self, producer_name: str, deduplicate: bool = False) -> int:
        """The last sequence id stored for ``producer_name`` (-1: none known, or
        deduplication neither on for the topic nor asked for by the producer)."""
        return self.dedup.last_sequence_id(producer_name, deduplicate)

    async def check_backlog_quota(self) -> BacklogQuota | None:
        """:func:`.backlog_quota.check`, serialized with producer admission."""
        async with self._admission:
            return await backlog_quota.check(self)

    def _check_open(self) -> None:
        if self.closed:
            raise ServiceNotReady(f"topic {self.name} is being unloaded; retry")

    def _check_epoch(self, requested: int | None) -> None:
        if requested is not None and requested < self.topic_epoch:
            raise ProducerFenced(
                f"topic epoch has moved on: current {self.topic_epoch}, producer's {requested}"
            )

    async def _take_exclusive(self, producer: Producer, requested: int | None) -> None:
        # A producer reconnecting with the current epoch keeps it; anyone else
        # starts a new epoch, persisted before the client hears of it.
        epoch = requested if requested is not None and requested >= self.topic_epoch else self.topic_epoch + 1
        self.exclusive_producer = producer  # reserve the slot before the await
        try:
            if epoch != self.topic_epoch:
                await self.ledger.set_properties({TOPIC_EPOCH: str(epoch)})
        except Exception:
            self.exclusive_producer = None
            raise
        self.topic_epoch = epoch
        producer.epoch = epoch
        self._attach(producer)

    def _attach(self, producer: Producer) -> None:
        producer.connected_since = time.time()
        self.producers[producer.name] = producer

    def _fence_all(self, reason: str) -> None:
        for other in list(self.producers.values()):
            other.fenced = True
            self.producers.pop(other.name, None)
            self.service.notify_producer_closed(other)
        self.exclusive_producer = None
        while self.waiting:
            waiter, fut = self.waiting.popleft()
            waiter.fenced = True
            if not fut.done():
                fut.set_exception(ProducerFenced(reason))

    def close_producer(self, producer: Producer) -> None:
        """Detach ``producer`` and tell its client (CLOSE_PRODUCER): it reconnects."""
        self.remove_producer(producer)
        self.service.notify_producer_closed(producer)

    def remove_producer(self, producer: Producer) -> None:
        """Detach (close or lost connection); frees exclusive access for the next waiter."""
        producer.fenced = True
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
        for i, (waiter, fut) in enumerate(self.waiting):
            if waiter is producer:
                del self.waiting[i]
                if not fut.done():
                    fut.cancel()
                break
        if self.exclusive_producer is producer:
            self.exclusive_producer = None
        if not self.producers and self.waiting:
            asyncio.get_running_loop().create_task(self._promote_next())

    async def _promote_next(self) -> None:
        async with self._admission:
            while self.waiting and not self.producers and self.exclusive_producer is None:
                producer, fut = self.waiting.popleft()
                if fut.done():
                    continue
                try:
                    await self._take_exclusive(producer, getattr(producer, "requested_epoch", None))
                except BrokerError as exc:
                    fut.set_exception(exc)
                    continue
                except Exception as exc:
                    fut.set_exception(PersistenceError(f"cannot persist topic epoch: {exc}"))
                    continue
                fut.set_result(None)
                return

    # -- the ordered append path ----------------------------------------------
    def publish(self, producer: Producer, send: pb.CommandSend, block: PayloadBlock) -> asyncio.Future:
        """Check every single-writer rule, then append. Never awaits.

        Returns a future of :class:`PublishResult`, or already failed with a
        :class:`BrokerError` (refused: nothing was appended).
        """
        loop = asyncio.get_running_loop()
        result = loop.create_future()
        n = max(1, send.num_messages)
        try:
            self._check_access(producer)
            token = self.dedup.check(producer, send, block)
            if send.HasField("expected_offset"):
                self._check_expected_offset(producer, send)
        except TransferHold:
            # Moving to another broker (PIP-307): neither receipt nor error;
            # the client resends to the new owner once told where it is.
            return result
        except Duplicate as dup:
            # A retry of an appended entry: answer with the original outcome.
            if dup.result is None:
                result.set_result(PublishResult(-1, -1, -1, n))
            else:
                _chain(dup.result, result)
            return result
        except BrokerError as exc:
            result.set_exception(exc)
            return result
        first = self.next_offset
        data = build_entry(block.checksummed, int(time.time() * 1000), first, n)
        self.next_offset = first + n
        self.msg_in += n
        self.bytes_in += len(data)
        producer.msg_in += n
        producer.bytes_in += len(data)
        appended = self.ledger.append(data)
        self.dedup.record(token, result)
        appended.add_done_callback(lambda f: self._on_appended(f, result, first, n, token))
        return result

    def _check_expected_offset(self, producer: Producer, send: pb.CommandSend) -> None:
        if send.offset_epoch != producer.offset_epoch:
            raise ExpectedOffsetMismatch(
                f"send planned in offset epoch {send.offset_epoch}; a refusal started epoch "
                f"{producer.offset_epoch}", self.next_offset, producer.offset_epoch,
            )
        if send.expected_offset != self.next_offset:
            producer.offset_epoch += 1
            raise ExpectedOffsetMismatch(
                f"expected offset {send.expected_offset}, upcoming offset is {self.next_offset}",
                self.next_offset, producer.offset_epoch,
            )

    def _check_access(self, producer: Producer) -> None:
        if self.closed:
            if self.transferring:
                raise TransferHold()
            raise ServiceNotReady(f"topic {self.name} is being unloaded; retry")
        if self.terminated_at is not None:  # inlined: this runs once per publish
            self._check_not_terminated()
        if producer.fenced or self.producers.get(producer.name) is not producer:
            raise ProducerFenced(f"producer {producer.name} no longer has access to {self.name}")
        if producer.access_mode != SHARED and producer.epoch != self.topic_epoch:
            raise ProducerFenced(
                f"producer {producer.name} holds epoch {producer.epoch}, the topic is at {self.topic_epoch}"
            )
        if self.quota_block is not None and self.quota_block.policy == backlog_quota.REFUSE:
            raise backlog_quota.refusal(self, self.quota_block)

    def _on_appended(self, appended: asyncio.Future, result: asyncio.Future, first: int, n: int,
                     token: tuple | None) -> None:
        if result.done():
            return
        exc = appended.exception()
        if exc is not None:
            result.set_exception(PersistenceError(f"cannot store entry: {exc}"))
            # Offsets and sequence state assumed this entry landed: reload the
            # topic from storage rather than continue on a wrong picture.
            self.service.fail_topic(self, exc)
            return
        pos: Position = appended.result()
        self.dedup.on_durable(token, pos)
        result.set_result(PublishResult(pos.ledger_id, pos.entry_id, first, n))

    def _on_new_entries(self) -> None:
        for sub in self.subscriptions.values():
            sub.on_new_entries()

    # -- subscriptions -------------------------------------------------------
    def end_position(self) -> Position:
        """A mark-delete position that has every stored entry behind it."""
        last = self.ledger.last_confirmed
        if last is not None:
            return last
        return _before(self.ledger.next_position(Position(0, -1)))

    def start_position(self) -> Position:
        """A mark-delete position that has every stored entry ahead of it."""
        first = self.ledger.first_position()
        return _before(first) if first is not None else self.end_position()

    def mark_delete_for_start(self, mid: pb.MessageIdData) -> Position:
        """Where a reader's cursor starts for a start message id.

        The entry holding the start message is delivered again: the client
        filters what precedes it (batch indexes, exclusive starts).
        """
        ledger_id, entry_id = mid.ledgerId, mid.entryId
        if ledger_id == UINT64_MAX or entry_id == UINT64_MAX:
            return self.start_position()
        if ledger_id >= INT64_MAX or entry_id >= INT64_MAX:
            return self.end_position()
        return Position(ledger_id, entry_id - 1)

    async def subscribe(
        self,
        name: str,
        sub_type: int,
        consumer: Consumer,
        *,
        durable: bool = True,
        initial_position: int = pb.CommandSubscribe.Latest,
        start_message_id: pb.MessageIdData | None = None,
    ) -> Subscription:
        self._check_open()
        sub = self.subscriptions.get(name)
        if sub is None:
            if durable:
                initial = "earliest" if initial_position == pb.CommandSubscribe.Earliest else "latest"
                cursor = await self.ledger.open_cursor(name, initial)
            else:
                if start_message_id is not None:
                    mark = self.mark_delete_for_start(start_message_id)
                elif initial_position == pb.CommandSubscribe.Earliest:
                    mark = self.start_position()
                else:
                    mark = self.end_position()
                cursor = self.ledger.new_non_durable_cursor(mark)
            sub = self.subscriptions.get(name)  # another subscribe may have won the await
            if sub is None:
                sub = Subscription(self, name, cursor, durable=durable)
                self.subscriptions[name] = sub
        consumer.subscription = sub
        sub.add_consumer(consumer, sub_type)
        return sub

    def remove_consumer(self, consumer: Consumer) -> None:
        sub = consumer.subscription
        sub.remove_consumer(consumer)
        if not sub.durable and not sub.consumers:
            sub.close()
            if self.subscriptions.get(sub.name) is sub:
                del self.subscriptions[sub.name]

    async def unsubscribe(self, name: str) -> None:
        sub = self.subscriptions.pop(name, None)
        if sub is None:
            return
        sub.close()
        if sub.durable:
            await self.ledger.delete_cursor(name)

    def next_write_position(self) -> Position:
        """The position the next appended entry will get."""
        return self.ledger.next_position(self.end_position())

    async def read_compacted(self, dispatcher: Any, consumer: Consumer, want: int) -> list[Entry] | None:
        """Entries of the compacted view for a read_compacted consumer (None: read the ledger)."""
        return await self.service.compactor.read(dispatcher, consumer, want)

    async def find_position_by_time(self, publish_time_ms: int) -> Position:
        """The first entry published at or after the time (or the next write position)."""
        pos = await self.ledger.find_first(lambda e: entry_info(e.data).publish_time >= publish_time_ms)
        return pos if pos is not None else self.next_write_position()

    async def position_of_offset(self, offset: int) -> Position:
        """The entry to read first for the message at topic offset ``offset``.

        That is the entry holding it (the first whose last offset is at or
        after ``offset``), so messages of the same batch with lower offsets
        are read too: the client skips them. An offset older than the first
        retained entry gives that entry (the reader sees the gap); one not
        yet written (at or past ``next_offset``, any size) gives the next
        write position, so the reader waits for it. An offset whose entry is
        still on its way to disk gives the first unconfirmed entry, which is
        at or before it. Costs about log2(stored entries) entry reads.

        Raises what the storage raises for a failed read.
        """
        if offset >= self.next_offset:
            return self.next_write_position()
        pos = await self.ledger.find_first(lambda e: entry_info(e.data).last_offset >= offset)
        return pos if pos is not None else self.next_write_position()

    def read_position_for(self, mid: pb.MessageIdData) -> Position:
        """The first entry to read when seeking to ``mid``."""
        if mid.ledgerId == UINT64_MAX or mid.entryId == UINT64_MAX:
            first = self.ledger.first_position()
            return first if first is not None else self.next_write_position()
        if mid.ledgerId >= INT64_MAX or mid.entryId >= INT64_MAX:
            return self.next_write_position()
        return Position(mid.ledgerId, mid.entryId)

    async def last_message_id(self) -> pb.MessageIdData:
        last = self.ledger.last_confirmed
        if last is None:
            end = self.end_position()
            return pb.MessageIdData(ledgerId=end.ledger_id, entryId=end.entry_id & UINT64_MAX)
        mid = pb.MessageIdData(ledgerId=last.ledger_id, entryId=last.entry_id)
        entries: list[Entry] = await self.ledger.read_entries(last, 1)
        if entries:
            n = entry_info(entries[0].data).num_messages
            if n > 1:
                mid.batch_index = n - 1
        return mid

    # -- lifecycle -------------------------------------------------------------
    def _check_not_terminated(self) -> None:
        if self.terminated_at is not None:
            raise TopicTerminated(f"topic {self.name} was terminated at {self.terminated_at}")

    async def terminate(self) -> Position:
        """Refuse every later publish, for good; returns the last entry's position.

        Sends already accepted still complete (their receipts go out first);
        then the position is persisted as a managed ledger property and the
        producers are disconnected (reconnecting, they get TopicTerminated).
        Idempotent. If the property cannot be written the topic is not
        terminated and the storage error propagates.
        """
        if self.terminated_at is not None:
            return self.terminated_at
        self._check_open()
        self.terminated_at = Position(-1, -1)  # refuse publishes from now on
        try:
            pending = [fut for p in self.producers.values() for _, _, fut in p._pending if not fut.done()]
            await asyncio.gather(*pending, return_exceptions=True)
            last = self.end_position()
            await self.ledger.set_properties({TERMINATED_AT: str(last)})
        except BaseException:
            self.terminated_at = None
            raise
        self.terminated_at = last
        while self.waiting:
            _, fut = self.waiting.popleft()
            if not fut.done():
                fut.set_exception(TopicTerminated(f"topic {self.name} was terminated"))
        for producer in list(self.producers.values()):
            self.close_producer(producer)
        log.info("terminated topic %s at %s", self.name, last)
        return last

    async def release(self) -> None:
        """First phase of a move without lookups (PIP-307): stop appending and
        dispatching, and close the managed ledger (appends in flight complete,
        cursors are persisted), while clients stay connected: sends arriving
        now get neither receipt nor error. :meth:`hand_over` tells them where
        the topic went. Storage errors while closing propagate."""
        if self.closed:
            return
        self.closed = True
        self.transferring = True
        self._unlisten()
        for _, fut in self.waiting:
            if not fut.done():
                fut.set_exception(ServiceNotReady("topic moving to another broker"))
        self.waiting.clear()
        for sub in list(self.subscriptions.values()):
            self._held_consumers.extend(sub.detach_for_transfer())
        await self.dedup.close()
        await self.ledger.close()

    def hand_over(self, url: str | None) -> None:
        """Last phase: tell every client of the released topic to reconnect,
        to ``url`` at once (the new owner's service URL), or after a lookup."""
        for producer in list(self.producers.values()):
            self.producers.pop(producer.name, None)
            producer.disconnect(url)
        for consumer in self._held_consumers:
            consumer.disconnect(url)
        self._held_consumers.clear()

    async def close(self) -> None:
        """Disconnect producers and consumers (they reconnect and reload the topic)."""
        if self.closed:
            return
        self.closed = True
        self._unlisten()
        for producer in list(self.producers.values()):
            self.producers.pop(producer.name, None)
            self.service.notify_producer_closed(producer)
        for _, fut in self.waiting:
            if not fut.done():
                fut.set_exception(ServiceNotReady("topic unloaded"))
        self.waiting.clear()
        for sub in list(self.subscriptions.values()):
            sub.close()
        await self.dedup.close()

    # -- stats -----------------------------------------------------------------
    def stats(self) -> dict:
        limits = {quota.kind: quota.limit for quota in self.backlog_quotas}
        return {
            "msgInCounter": self.msg_in,
            "bytesInCounter": self.bytes_in,
            "storageSize": self.ledger.total_size,
            # Pulsar's names; -1: no limit. The size is backlog_quota's measure.
            "backlogSize": backlog_quota.backlog_size(self),
            "backlogQuotaLimitSize": limits.get(backlog_quota.SIZE, -1),
            "backlogQuotaLimitTime": limits.get(backlog_quota.AGE, -1),
            "producersBlockedByBacklogQuota": self.quota_block.kind if self.quota_block is not None else None,
            "publishers": [
                {
                    "producerId": p.producer_id,
                    "producerName": p.name,
                    "accessMode": AccessMode.Name(p.access_mode),
                    "msgInCounter": p.msg_in,
                    "bytesInCounter": p.bytes_in,
                    "address": p.address,
                    "connectedSince": p.connected_since,
                }
                for p in self.producers.values()
            ],
            "waitingPublishers": len(self.waiting),
            "subscriptions": {
                name: {
                    "type": SubType.Name(sub.type) if sub.type is not None else None,
                    "msgBacklog": sub.backlog(),
                    "isDurable": sub.durable,
                    "consumers": [
                        {
                            "consumerName": c.name,
                            "availablePermits": c.permits,
                            "unackedMessages": c.unacked_messages(),
                            "msgOutCounter": c.msg_out,
                            "bytesOutCounter": c.bytes_out,
                            "address": c.address,
                        }
                        for c in sub.consumers
                    ],
                }
                for name, sub in self.subscriptions.items()
            },
            "topicEpoch": self.topic_epoch,
            "deduplicationEnabled": self.dedup.enabled,
        }

    def internal_stats(self) -> dict:
        ml = self.ledger
        return {
            "entriesAddedCounter": ml.entry_count,
            "numberOfEntries": ml.entry_count,
            "totalSize": ml.total_size,
            "lastConfirmedEntry": str(ml.last_confirmed) if ml.last_confirmed else None,
            "nextOffset": self.next_offset,
            "topicEpoch": self.topic_epoch,
            # Pulsar's field names (ledgerId, entries, size), plus our state and times.
            "ledgers": [{"ledgerId": info.ledger_id, "entries": info.entries, "size": info.size,
                         "offloaded": False, "state": info.state, "created": info.created, "closed": info.closed}
                        for info in ml.ledgers],
            "cursors": {
                name: {
                    "markDeletePosition": str(sub.cursor.mark_delete_position),
                    "readPosition": str(sub.cursor.read_position),
                    "individuallyDeletedMessages": str(
                        [(str(a), str(b)) for a, b in sub.cursor.individually_deleted_ranges()]
                    ),
                    "durable": sub.durable,
                }
                for name, sub in self.subscriptions.items()
            },
            "properties": dict(ml.properties),
            "state": "Terminated" if self.terminated_at is not None else "LedgerOpened",
            "idempotentProducerIds": len(self.dedup.pids),
        }
