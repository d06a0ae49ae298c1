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
from typing import Any, Callable, Protocol

from magnetar.protocol import pb
from magnetar.protocol.frames import PayloadBlock, checksummed_block
from magnetar.protocol.fast_send import EXPECTED_OFFSET_BIT, SendCommandView
from magnetar.storage import CursorFencedError, Entry, ManagedLedger, ManagedLedgerFencedError, Position, StorageError

from magnetar.broker.config import BrokerConfig
from magnetar.broker.entries.entry_format import build_entry, entry_info
from magnetar.broker.interval_rates import IntervalRates
from magnetar.broker.errors import (
    BrokerError,
    ConsumerBusy,
    ExpectedOffsetMismatch,
    NotAllowed,
    PersistenceError,
    ProducerFenced,
    ServiceNotReady,
    TopicTerminated,
)
from magnetar.broker.namespaces.policies import BacklogQuota
from magnetar.broker.policies import backlog_quota
from magnetar.broker.subscriptions.consumer import Consumer
from magnetar.broker.subscriptions.subscription import SubType, Subscription
from magnetar.broker.subscriptions.throttle import UNLIMITED, DispatchRates
from magnetar.broker.topic_name import TopicName
from magnetar.broker.topics.moving import MovingTopic
from magnetar.metadata import MetadataStore

from .admission import EXCLUSIVE_IN_TRANSIT, TOPIC_EPOCH, TRANSIT_RESERVATION_S, ProducerAdmission
from .dedup import Deduplicator, Duplicate
from .followers import Followers
from .producer import AccessMode, PendingSend, Producer
from . import marker_log, positions
from .replicators import REPLICATOR_CURSOR_PREFIX, MarkerHandler, ReplicatorView, is_replicator_cursor
from .stats import RateMeter, topic_internal_stats, topic_stats

log = logging.getLogger(__name__)

#: Managed ledger property set by terminate(): the position of the last entry.
TERMINATED_AT = "terminated_at"
SHARED = int(AccessMode.Shared)  # a plain int: the enum wrapper is slow on the hot path


class TransferHold(Exception):
    """A send that arrived while the topic is moving: held, not answered."""


def _as_future(topic: "Topic", producer: Producer, send: pb.CommandSend, block: PayloadBlock) -> asyncio.Future:
    """Publish with a future of the outcome (PendingSend -> asyncio.Future)."""
    result = asyncio.get_running_loop().create_future()

    def settled(pending: PendingSend) -> None:
        if result.done():
            return
        if pending.error is not None:
            result.set_exception(pending.error)
        else:
            result.set_result(pending.result())

    pending = PendingSend(send.sequence_id, send.highest_sequence_id)
    pending.follow(settled)
    topic.publish_into(producer, send, block, pending, int(time.time() * 1000))
    return result


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

    def notify_producer_closed(self, producer: Producer) -> None:
        """Tell the producer's client the broker closed it (it reconnects)."""

    def fail_topic(self, topic: "Topic", exc: BaseException) -> None:
        """Storage failed under ``topic``: unload it so it is rebuilt from disk."""


class Topic(ProducerAdmission):
    def __init__(self, service: TopicHost, name: TopicName, ledger: ManagedLedger) -> None:
        self.service = service
        self.config: BrokerConfig = service.config
        self.name = name
        self.ledger = ledger
        #: Published entries handed to storage and not yet told of, in append
        #: order: their pending sends, each carrying its dedup token, first
        #: offset, messages and marker hook (``PendingSend.token`` ...: no
        #: tuple per entry). Storage tells appends in the order they were made, exactly
        #: once each (``storage/waiters.py``), so one bound method serves as
        #: every entry's callback and takes the head: no closure per entry,
        #: and one call for the entries of one group commit.
        self._appending: deque = deque()
        self._on_appended = self._entries_stored
        self.producers: dict[str, Producer] = {}
        #: Subscriptions and replicators: the topic hears of new entries only
        #: while it has one (:meth:`_followers_changed`, ``followers.py``).
        self.subscriptions: dict[str, Subscription] = Followers(self._followers_changed)
        self.next_offset = 0
        # The last stored entry's ledger id, entry id and the offset after it
        # (:attr:`stored_tail`); ledger -1: none known. Three ints, not a
        # tuple: set once per stored run (a tuple each time was one more
        # object per topic per commit for the collector), read once per move.
        self._tail_ledger = self._tail_entry = self._tail_offset = -1
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
        #: The exclusive producer this topic waits for after a move (see
        #: EXCLUSIVE_IN_TRANSIT), and the timer that gives up waiting.
        self.reserved_for: str | None = None
        self._reservation_timer: asyncio.TimerHandle | None = None
        #: Set by terminate(): the last entry the topic will ever have.
        self.terminated_at: Position | None = None
        #: The namespace's backlog quotas (kept current by the service).
        self.backlog_quotas: tuple[BacklogQuota, ...] = ()
        #: Topic-level limits (its own policy, else its namespace's per-topic one; None: none).
        self.max_producers: int | None = None
        self.max_consumers: int | None = None
        #: The publish rate in force (policies/publish_rate.py), None: not limited.
        self.publish_limiter = None
        #: The dispatch rates in force (TopicView.dispatch_rates; policies/dispatch_rate.py).
        self.dispatch_rates: DispatchRates = UNLIMITED
        #: The exceeded backlog quota that blocks producers now (set by backlog_quota.check).
        self.quota_block: BacklogQuota | None = None
        self.msg_in = 0
        self.bytes_in = 0
        #: Data messages published, markers from other clusters not counted:
        #: PIP-33 snapshots follow new data only, else every region's markers
        #: would start the others' next snapshot, forever.
        self.data_msg_in = 0
        #: Dispatched to consumers, every subscription (counted by dispatchers).
        #: See TopicView.dispatch_hold_until (set by the service on a moved topic).
        self.dispatch_hold_until = 0.0
        self.msg_out = 0
        self.bytes_out = 0
        self.rates = RateMeter()
        #: Rates of (msg_in, bytes_in, msg_out, bytes_out) over the last stats
        #: interval (sampled by stats_sampling.py; admin stats report these).
        self.interval_rates = IntervalRates(4)
        #: Geo-replication: one replicator per remote cluster (set from above).
        self.replicators: dict[str, ReplicatorView] = Followers(self._followers_changed)
        #: Replicated subscriptions' markers (PIP-33), set from above.
        self.marker_handler: MarkerHandler | None = None
        #: The topic may hold markers: dispatchers skip them (a metadata peek per entry).
        self.filter_markers = False
        self._unlisten: Callable[[], None] | None = None  # listening to the ledger's new entries
        self._unlisten_fence = ledger.add_fence_listener(self._on_ledger_fenced)

    # -- loading -------------------------------------------------------------
    @classmethod
    async def load(cls, service: TopicHost, name: TopicName, ledger: ManagedLedger,
                   moving: MovingTopic | None = None, *, dedup_enabled: bool) -> "Topic":
        """The topic on ``ledger`` (open). ``moving``: what the source of a
        bundle move said of it (``topics/moving.py``): its next offset is
        taken from there when ``ledger``'s last entry is the one it names,
        instead of reading that entry (on object storage, a GET).
        ``dedup_enabled``: its deduplication policy, from the policies the
        caller read for the load (read once per load, not again here)."""
        topic = cls(service, name, ledger)
        topic.topic_epoch = int(ledger.properties.get(TOPIC_EPOCH, "0"))
        if TERMINATED_AT in ledger.properties:
            topic.terminated_at = Position.parse(ledger.properties[TERMINATED_AT])
        holder = ledger.properties.get(EXCLUSIVE_IN_TRANSIT)
        if holder:
            # The topic moved here while an exclusive producer held it. Its
            # clients are sent here all at once: a WaitForExclusive producer
            # that was queued behind the holder (its creation failed over
            # with the move) can arrive first and would be granted a new
            # epoch, fencing the holder, which did not let go. Keep the slot
            # for the holder until it is back or has had time to come back.
            topic.reserved_for = holder
            topic._reservation_timer = asyncio.get_running_loop().call_later(
                TRANSIT_RESERVATION_S, topic._end_reservation)
        last = ledger.last_confirmed
        if last is not None and moving is not None and moving.last == (last.ledger_id, last.entry_id):
            topic.next_offset = moving.next_offset
            topic.stored_tail = (last.ledger_id, last.entry_id, topic.next_offset)
        elif last is not None:
            entries = await ledger.read_entries(last, 1)
            if entries:
                topic.next_offset = entry_info(entries[0].data).last_offset + 1
                topic.stored_tail = (last.ledger_id, last.entry_id, topic.next_offset)
        for cursor_name, cursor in ledger.cursors.items():
            if not is_replicator_cursor(cursor_name):
                topic.subscriptions[cursor_name] = Subscription(topic, cursor_name, cursor, durable=True)
        topic.dedup.enabled = dedup_enabled
        await topic.dedup.recover(ledger)
        return topic

    @property
    def stored_entries(self) -> int:
        """Entries the topic's ledger holds (what a schema check calls data)."""
        return self.ledger.entry_count

    # -- producers -----------------------------------------------------------
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

    # -- the ordered append path ----------------------------------------------
    def publish(self, producer: Producer, send: pb.CommandSend, block: PayloadBlock) -> asyncio.Future:
        """:meth:`publish_into` with a future of :class:`PublishResult` (failed
        with a :class:`BrokerError` when refused): for code that awaits."""
        return _as_future(self, producer, send, block)

    def publish_into(self, producer: Producer, send: pb.CommandSend, block: PayloadBlock,
                     pending: PendingSend, received_ms: int) -> None:
        """Check every single-writer rule, then append; ``pending`` is settled
        with where the entry landed, or failed (refused: nothing was appended;
        or storage failed). Never awaits; may settle ``pending`` before it returns.
        ``received_ms`` (wall clock, ms) is when the broker read the SEND: the
        entry's publish time, read once per received chunk rather than per entry.
        """
        n = send.num_messages
        if n < 1:
            n = 1
        try:
            # _check_access's rules, read once: it runs (and raises or passes) only
            # when one of them may refuse; this runs once per entry.
            if self.closed or self.terminated_at is not None or self.quota_block is not None \
                    or producer.fenced or self.producers.get(producer.name) is not producer \
                    or (producer.access_mode != SHARED and producer.epoch != self.topic_epoch):
                self._check_access(producer)
            token = self.dedup.check(producer, send, block)
            # A fast decoder's view says by a bit whether the field was sent (no HasField call).
            if (send.present & EXPECTED_OFFSET_BIT if send.__class__ is SendCommandView
                    else send.HasField("expected_offset")):
                self._check_expected_offset(producer, send)
        except TransferHold:
            # Moving to another broker (PIP-307): neither receipt nor error;
            # the client resends to the new owner once told where it is.
            return
        except Duplicate as dup:
            # A retry of an appended entry: answer with the original outcome.
            if dup.result is None:
                pending.stored(-1, -1, -1, n)
            else:
                pending.settle_like(dup.result)
            return
        except BrokerError as exc:
            pending.failed(exc)
            return
        first = self.next_offset
        # A block the decoder checked starts at its checksum: it is what is stored.
        data = build_entry(block.raw if block.checked >= 0 else block.checksummed, received_ms, first, n)
        self.next_offset = first + n
        self.msg_in += n
        self.bytes_in += len(data)
        producer.msg_in += n
        producer.bytes_in += len(data)
        self.dedup.record(token, pending, received_ms)
        if producer.replicator:
            # A remote's replicator may carry markers (PIP-33) before this
            # broker's reconcile has looked up the topic's replication and
            # set the handler: consumers must skip them from the first one.
            self.filter_markers = True
            marker = marker_log.replicated_marker(self, block) if self.marker_handler is not None else None
        else:
            marker = None
        if marker is None:
            self.data_msg_in += n
        pending.first_offset = first
        pending.num_messages = n
        pending.token = token
        pending.marker = marker
        self._appending.append(pending)
        try:
            self.ledger.append_then(data, self._on_appended)
        except StorageError as exc:  # refused at once (closing, fenced, failed): never told
            self._appending.pop()
            self._on_store_failed(pending, exc)
        except BaseException:
            self._appending.pop()
            raise

    def _entries_stored(self, ledger_id: int, first_entry_id: int, count: int,
                        error: BaseException | None) -> None:
        """Storage's answer for the ``count`` oldest published entries it has
        not answered for (a run of one group commit: ``waiters``' contract)."""
        appending = self._appending
        if error is not None:
            for _ in range(count):
                self._on_store_failed(appending.popleft(), error)
            return
        if count == 1:  # the usual run at many written topics: one entry per topic per commit
            pending = appending.popleft()
            token, pending.token = pending.token, None  # the retry window may keep the send: not its token
            self.dedup.on_durable(token, ledger_id, first_entry_id)
            first = pending.first_offset
            n = pending.num_messages
            pending.stored(ledger_id, first_entry_id, first, n)
            marker = pending.marker
            if marker is not None:
                pending.marker = None
                marker(ledger_id, first_entry_id)
            self._tail_ledger, self._tail_entry, self._tail_offset = ledger_id, first_entry_id, first + n
            return
        done = [appending.popleft() for _ in range(count)]
        self.dedup.on_durable_run([pending.token for pending in done], ledger_id, first_entry_id + count - 1)
        entry_id = first_entry_id
        for pending in done:
            pending.token = None
            pending.stored(ledger_id, entry_id, pending.first_offset, pending.num_messages)
            marker = pending.marker
            if marker is not None:
                pending.marker = None
                marker(ledger_id, entry_id)
            entry_id += 1
        if done:
            last = done[-1]
            self._tail_ledger, self._tail_entry = ledger_id, entry_id - 1
            self._tail_offset = last.first_offset + last.num_messages

    @property
    def stored_tail(self) -> tuple[int, int, int] | None:
        """The last stored entry's ledger id, entry id and the offset after it
        (what a move tells the destination: :meth:`moving`); None: none known."""
        if self._tail_ledger < 0:
            return None
        return self._tail_ledger, self._tail_entry, self._tail_offset

    @stored_tail.setter
    def stored_tail(self, tail: tuple[int, int, int] | None) -> None:
        self._tail_ledger, self._tail_entry, self._tail_offset = (-1, -1, -1) if tail is None else tail

    def moving(self) -> MovingTopic:
        """This topic as a move's source names it to the destination (after
        :meth:`release`: nothing is stored after its tail)."""
        tail = self.stored_tail
        if tail is None:
            return MovingTopic(str(self.name))
        return MovingTopic(str(self.name), (tail[0], tail[1]), tail[2])

    def _on_ledger_fenced(self) -> None:
        """Another broker opened the managed ledger (this one was paused or cut
        off past its session), or a cursor's record changed elsewhere (a write
        of ours whose answer etcd lost had landed): nothing, or that
        subscription's acknowledgements, can be stored here any more, and a
        subscriber with nothing to send would never notice. Let the topic
        go; its clients look it up again, and its next load reads what is stored."""
        if not self.closed:
            reason = self.ledger.let_go_reason
            self.service.fail_topic(self, reason if isinstance(reason, CursorFencedError)
                                    else ManagedLedgerFencedError(f"{self.name} was opened by another broker"))

    def _on_store_failed(self, pending: PendingSend, error: BaseException) -> None:
        pending.failed(PersistenceError(f"cannot store entry: {error}"))
        # Offsets and sequence state assumed this entry landed: reload the
        # topic from storage rather than continue on a wrong picture.
        self.service.fail_topic(self, error)

    def append_marker(self, metadata: bytes, payload: bytes) -> asyncio.Future:
        """Append a marker entry written by the broker itself (no producer,
        no deduplication); a future of its Position. It takes one offset."""
        if self.closed:
            raise ServiceNotReady(f"topic {self.name} is closed")
        self._check_not_terminated()
        first = self.next_offset
        self.next_offset = first + 1
        return marker_log.append(self, build_entry(checksummed_block(metadata, payload),
                                                   int(time.time() * 1000), first, 1))

    def replicated_subscription_moved(self, name: str, snapshot) -> None:
        if self.marker_handler is not None:
            self.marker_handler.subscription_moved(name, snapshot)

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
        # publish_into tests these same conditions inline (once per entry)
        # and calls this only when one holds: a rule added here goes there too.
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

    def _followers_changed(self) -> None:
        """Listen to the ledger's new entries while someone follows the
        topic, not otherwise. A follower added is in its map before it can
        wait at the tail, and the listener is registered in that same call,
        so it hears of every entry stored after it (earlier ones it reads
        from its cursor)."""
        wanted = bool(self.subscriptions) or bool(self.replicators)
        if wanted and self._unlisten is None and not self.closed:
            self._unlisten = self.ledger.add_listener(self._on_new_entries)
        elif not wanted and self._unlisten is not None:
            self._stop_listening()

    def _stop_listening(self) -> None:
        unlisten, self._unlisten = self._unlisten, None
        if unlisten is not None:
            unlisten()

    def _on_new_entries(self) -> None:
        for sub in self.subscriptions.values():
            sub.on_new_entries()
        for replicator in self.replicators.values():
            replicator.on_new_entries()

    def _stop_replicators(self) -> None:
        for replicator in self.replicators.values():
            replicator.stop()
        self.replicators.clear()
        handler, self.marker_handler = self.marker_handler, None
        if handler is not None:
            handler.stop()

    # -- subscriptions -------------------------------------------------------
    def end_position(self) -> Position:
        return positions.end_position(self.ledger)

    def start_position(self) -> Position:
        return positions.start_position(self.ledger)

    def mark_delete_for_start(self, mid: pb.MessageIdData) -> Position:
        return positions.mark_delete_for_start(self.ledger, mid)

    async def subscribe(
        self,
        name: str,
        sub_type: int,
        consumer: Consumer,
        *,
        durable: bool = True,
        initial_position: int = pb.CommandSubscribe.Latest,
        start_message_id: pb.MessageIdData | None = None,
        replicated: bool = False,
    ) -> Subscription:
        self._check_open()
        if is_replicator_cursor(name):
            raise NotAllowed(f"subscription names starting with {REPLICATOR_CURSOR_PREFIX!r} are "
                             f"reserved for geo-replication; choose another name")
        if self.max_consumers and \
                sum(len(s.consumers) for s in self.subscriptions.values()) >= self.max_consumers:
            raise ConsumerBusy(f"Topic reached max consumers limit ({self.max_consumers}) on {self.name}")
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
        if replicated and durable:
            await sub.set_replicated(True)  # follows its consumers to other clusters (PIP-33)
        return sub

    async def replicated_subscription(self, name: str) -> Subscription:
        """The durable subscription ``name``, created (with no consumer) if
        needed, marked replicated: another cluster's update (PIP-33) moves it."""
        self._check_open()
        sub = self.subscriptions.get(name)
        if sub is None:
            if is_replicator_cursor(name):
                raise NotAllowed(f"{name!r} is a replicator's cursor, not a subscription")
            cursor = await self.ledger.open_cursor(name, "earliest")
            sub = self.subscriptions.get(name)
            if sub is None:
                sub = Subscription(self, name, cursor, durable=True)
                self.subscriptions[name] = sub
        await sub.set_replicated(True)
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
        return positions.next_write_position(self.ledger)

    async def read_compacted(self, dispatcher: Any, consumer: Consumer, want: int) -> list[Entry] | None:
        """Entries of the compacted view for a read_compacted consumer (None: read the ledger)."""
        return await self.service.compactor.read(dispatcher, consumer, want)

    async def find_position_by_time(self, publish_time_ms: int) -> Position:
        return await positions.find_position_by_time(self.ledger, publish_time_ms)

    async def position_of_offset(self, offset: int) -> Position:
        """See :func:`.positions.position_of_offset`."""
        return await positions.position_of_offset(self.ledger, self.next_offset, offset)

    def read_position_for(self, mid: pb.MessageIdData) -> Position:
        return positions.read_position_for(self.ledger, mid)

    async def last_message_id(self) -> pb.MessageIdData:
        return await positions.last_message_id(self.ledger, self.filter_markers)

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
            await asyncio.gather(*(p.reported() for p in self.producers.values()))
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
        dispatching, and close the managed ledger (appends in flight complete),
        while clients stay connected: sends arriving now get neither receipt
        nor error. Acknowledgements still count until the cursors close (the
        service closes them right after this, so that the destination, which
        opens the topic before the hand-over, reads them with every ack taken
        so far; one that comes later is a redelivery there). Storage errors
        while closing propagate."""
        if self.closed:
            return
        self.closed = True
        self.transferring = True
        self._stop_listening()
        self._unlisten_fence()
        self._stop_replicators()
        for _, fut in self.waiting:
            if not fut.done():
                fut.set_exception(ServiceNotReady("topic moving to another broker"))
        self.waiting.clear()
        for sub in list(self.subscriptions.values()):
            self._held_consumers.extend(sub.detach_for_transfer())
        holder = self.exclusive_producer.name if self.exclusive_producer is not None else self.reserved_for
        self._clear_reservation()
        if holder is not None or EXCLUSIVE_IN_TRANSIT in self.ledger.properties:
            try:
                # The new owner keeps the exclusive slot for the holder (see load()).
                await self.ledger.set_properties({EXCLUSIVE_IN_TRANSIT: holder})
            except Exception as exc:  # the move goes on; the holder may then meet a waiter first
                log.warning("%s: cannot record the exclusive producer in transit: %s", self.name, exc)
        await self.ledger.close(keep_cursors=True)
        # After the close: the appends it finished are in the snapshot, so
        # the destination has nothing to replay (no read of the log).
        await self.dedup.close()

    async def hand_over(self, assigned: tuple[str, str] | None) -> None:
        """Last phase: close the cursors (if :meth:`release`'s caller has not
        already), then tell every client of the released topic to
        reconnect, at once to ``assigned`` (the new owner's plain and TLS
        service URLs; the client picks the one it speaks), or after a lookup. A cursor that cannot persist costs redeliveries, not the
        hand-over: it is logged."""
        try:
            await self.ledger.close_cursors()
        except Exception as exc:
            log.warning("%s: closing cursors before the hand-over: %s", self.name, exc)
        for producer in list(self.producers.values()):
            self.producers.pop(producer.name, None)
            producer.disconnect(assigned)
        for consumer in self._held_consumers:
            consumer.disconnect(assigned)
        self._held_consumers.clear()

    async def close(self) -> None:
        """Disconnect producers and consumers (they reconnect and reload the topic)."""
        if self.closed:
            return
        self.closed = True
        self._clear_reservation()
        self._stop_listening()
        self._unlisten_fence()
        self._stop_replicators()
        attached = set(self.producers)  # still writers of this topic for the final snapshot
        for producer in list(self.producers.values()):
            self.producers.pop(producer.name, None)
            self.service.notify_producer_closed(producer)
        for _, fut in self.waiting:
            if not fut.done():
                fut.set_exception(ServiceNotReady("topic unloaded"))
        self.waiting.clear()
        for sub in list(self.subscriptions.values()):
            sub.close()
        await self.dedup.close(attached)

    # -- stats -----------------------------------------------------------------
    def stats(self) -> dict:
        return topic_stats(self)

    @property
    def pending_appends(self) -> int:
        """Entries handed to storage and not yet stored."""
        return len(self._appending)

    def internal_stats(self) -> dict:
        return topic_internal_stats(self)
