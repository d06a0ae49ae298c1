"""Dispatchers: move entries from a subscription's cursor to its consumers.

Two kinds, as in Pulsar:

- :class:`SingleActiveDispatcher` (Exclusive, Failover): one consumer receives
  everything in order; redelivery rewinds the cursor.
- :class:`SharedDispatcher` (Shared): entries go round-robin to consumers that
  have permits, highest priority first (the lowest ``priority_level``; a
  lower level gets entries only while every higher one has no permits); each
  entry is owned by one consumer until acked; a consumer's unacked entries
  are redelivered (replayed before new entries) when it closes, nacks or
  times out. Entries with a future ``deliver_at_time`` wait in a
  :class:`~.delayed.DelayedIndex` and are replayed when due.
- :class:`~.key_shared.KeySharedDispatcher` (Key_Shared) extends Shared with
  routing by message key.

A dispatcher runs one read at a time (``_run``) and is woken by
:meth:`schedule` whenever something changed: new entries, permits, consumers,
redeliveries, a write buffer that drained. A round that fails (a read the
object store refused, a cursor write etcd refused) is tried again after
:data:`RETRY_AFTER_S`: nothing else may wake it (the consumers wait for
messages, the topic may be idle). A cursor whose record changed elsewhere
(CursorFencedError) is not tried again: the cursor's managed ledger tells
the topic, which unloads at once (whichever write met it: an ack, a
round's), and its next load reads the cursor as stored. Each read is cut to what the
subscription's dispatch throttle allows (:mod:`.throttle`); when it allows
nothing, the dispatcher wakes itself once it will.
"""
from __future__ import annotations

import abc
import asyncio
import logging
import time

from magnetar.metadata import MetadataError
from magnetar.storage import CursorFencedError, Entry, Position, StorageError

from .consumer import Consumer
from .delayed import DelayedIndex, now_ms
from magnetar.broker.entries.entry_format import entry_info
from magnetar.broker.entries.markers import is_marker
from magnetar.broker.entries.message_peek import deliver_at, producer_metadata

from .views import SubscriptionView

log = logging.getLogger(__name__)

#: Seconds before a failed dispatch round is tried again (unless something
#: wakes the dispatcher sooner).
RETRY_AFTER_S = 1.0


class Dispatcher(abc.ABC):
    def __init__(self, subscription: SubscriptionView, max_read_batch: int) -> None:
        self.subscription = subscription
        self.cursor = subscription.cursor
        self.consumers: list[Consumer] = []
        self.max_read_batch = max_read_batch
        self.redelivery_counts: dict[Position, int] = {}
        self._task: asyncio.Task | None = None
        self._again = False
        self._rate_timer: asyncio.TimerHandle | None = None
        self.closed = False

    # -- consumers ---------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.schedule()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self.schedule()

    # -- waking ------------------------------------------------------------
    def schedule(self) -> None:
        """Run a dispatch round soon (coalesced)."""
        if self.closed:
            return
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            hold = self.subscription.topic.dispatch_hold_until - asyncio.get_running_loop().time()
            if hold > 0:
                # The topic just moved here: consumers still hold acks they
                # grouped before the move (the official client sends them every
                # 100 ms); dispatching first would send those messages again.
                await asyncio.sleep(hold)
            while not self.closed:
                self._again = False
                progressed = await self.dispatch_round()
                if not progressed and not self._again:
                    return
        except CursorFencedError as exc:
            # The cursor's record changed under it (another broker, or a write
            # of ours whose answer etcd lost landed after all): trying again
            # would fail for good. The cursor's managed ledger has already
            # told the topic to let go (ManagedLedger.add_fence_listener).
            log.info("dispatcher of %s stops: %s", self.subscription.name, exc)
        except (StorageError, MetadataError, OSError) as exc:  # the store out of reach: expected under faults
            log.warning("dispatcher of %s: %s; trying again in %.0f s", self.subscription.name, exc, RETRY_AFTER_S)
            self._retry_later()
        except Exception:  # a dispatcher must never die silently
            log.exception("dispatcher of %s failed", self.subscription.name)
            self._retry_later()

    def _retry_later(self) -> None:
        if not self.closed:
            asyncio.get_running_loop().call_later(RETRY_AFTER_S, self.schedule)

    @abc.abstractmethod
    async def dispatch_round(self) -> bool:
        """Deliver what the consumers can take now; True if anything moved."""

    # -- dispatch rate -----------------------------------------------------
    def _throttle(self):
        return self.subscription.topic.dispatch_rates.throttle(self.subscription.name)

    def _rate_allows(self, wanted: int) -> int:
        """``wanted`` cut to what the dispatch rate allows now. At 0 nothing
        may be read, and a round is scheduled for when something may."""
        throttle = self._throttle()
        allowed = throttle.allowance(wanted)
        if allowed <= 0 and self._rate_timer is None:
            self._rate_timer = asyncio.get_running_loop().call_later(throttle.retry_after(), self._rate_refilled)
        return allowed

    def _rate_refilled(self) -> None:
        self._rate_timer = None
        self.schedule()

    def rates_changed(self) -> None:
        """The topic's dispatch rates were changed: try again now."""
        if self._rate_timer is not None:
            self._rate_timer.cancel()
        self._rate_refilled()

    # -- helpers -----------------------------------------------------------
    def _without_markers(self, entries: list[Entry]) -> list[Entry]:
        """``entries`` minus markers, which are acknowledged here and never
        reach a consumer (a client would take them for messages); snapshot
        markers go to the subscription on the way. Only topics that can hold
        markers (replicated ones) pay for the metadata peek."""
        if not entries or not self.subscription.topic.filter_markers:
            return entries
        kept: list[Entry] = []
        markers: list[Position] = []
        for entry in entries:
            metadata = producer_metadata(entry.data)
            if metadata is not None and is_marker(metadata):
                markers.append(entry.position)
                self.subscription.on_marker(entry.position, metadata, entry.data)
            else:
                kept.append(entry)
        if markers:
            self.subscription.acknowledge_markers(markers)
        return kept

    def _send(self, consumer: Consumer, entries: list[Entry]) -> None:
        counts = []
        msgs = nbytes = 0
        for entry in entries:
            n = entry_info(entry.data).num_messages
            consumer.permits -= n
            consumer.pending[entry.position] = n
            msgs += n
            nbytes += len(entry.data)
            counts.append(self.redelivery_counts.get(entry.position, 0))
        consumer.msg_out += msgs
        consumer.bytes_out += nbytes
        subscription = self.subscription
        subscription.msg_out += msgs
        subscription.bytes_out += nbytes
        consumer.last_consumed_ms = subscription.last_consumed_ms = int(time.time() * 1000)
        subscription.topic.msg_out += msgs
        subscription.topic.bytes_out += nbytes
        self._throttle().charge(msgs, nbytes)
        consumer.sink.deliver(consumer, entries, counts)

    def acked(self, positions: list[Position]) -> None:
        total = 0
        for consumer in self.consumers:
            pending = consumer.pending
            n = 0
            for pos in positions:
                n += pending.pop(pos, 0)
            if n:
                _count_acks(consumer, n)
                total += n
        self.subscription.acked += total
        for pos in positions:
            self.redelivery_counts.pop(pos, None)

    def acked_cumulative(self, upto: Position) -> None:
        total = 0
        for consumer in self.consumers:
            n = 0
            for pos in [p for p in consumer.pending if p <= upto]:
                n += consumer.pending.pop(pos)
            if n:
                _count_acks(consumer, n)
                total += n
        self.subscription.acked += total
        for pos in [p for p in self.redelivery_counts if p <= upto]:
            del self.redelivery_counts[pos]

    @abc.abstractmethod
    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """Hand ``positions`` (None: all of the consumer's unacked entries) out again."""

    def acks_applied(self) -> None:
        """Called once acknowledgements reached the cursor (its mark-delete may have moved)."""

    def reset(self) -> None:
        """Forget deliveries after a cursor reset (seek)."""
        for consumer in self.consumers:
            consumer.pending.clear()
        self.redelivery_counts.clear()

    def close(self) -> None:
        self.closed = True
        if self._task is not None:
            self._task.cancel()
        if self._rate_timer is not None:
            self._rate_timer.cancel()


class SingleActiveDispatcher(Dispatcher):
    """Exclusive and Failover: the active consumer is the first by (priority, name, arrival)."""

    def __init__(self, subscription: SubscriptionView, max_read_batch: int) -> None:
        super().__init__(subscription, max_read_batch)
        self.active: Consumer | None = None

    def _pick_active(self) -> None:
        ordered = sorted(self.consumers, key=lambda c: (c.priority_level, c.name))
        new = ordered[0] if ordered else None
        if new is not self.active:
            old = self.active
            self.active = new
            # Whatever the old consumer had not acked goes to the new one, in order.
            self.cursor.rewind()
            for consumer in self.consumers:
                for pos in consumer.pending:
                    self.redelivery_counts[pos] = self.redelivery_counts.get(pos, 0) + 1
                consumer.pending.clear()
            if old is not None and old in self.consumers:
                old.active_change(False)
            if new is not None:
                new.active_change(True)
                for other in self.consumers:
                    if other is not new:
                        other.active_change(False)

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self._pick_active()
        self.schedule()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        if consumer is self.active:
            for pos in consumer.pending:
                self.redelivery_counts[pos] = self.redelivery_counts.get(pos, 0) + 1
            consumer.pending.clear()
            self.active = None
        self._pick_active()
        self.schedule()

    async def dispatch_round(self) -> bool:
        consumer = self.active
        if consumer is None or not consumer.can_receive() or not self.cursor.has_more_entries():
            return False
        want = self._rate_allows(min(self.max_read_batch, max(1, consumer.permits)))
        if not want:
            return False
        if consumer.read_compacted:
            # Up to the compaction horizon the compacted view stands in for the topic.
            compacted = await self.subscription.topic.read_compacted(self, consumer, want)
            if compacted is not None:
                if consumer is not self.active or consumer.closed:
                    self.cursor.rewind()
                elif compacted:
                    self._send(consumer, compacted)
                return True
        read = await self.cursor.read_entries(want)
        if not read:
            return False
        entries = self._without_markers(read)
        if not entries:
            return True  # only markers: read on
        if consumer is not self.active or consumer.closed:
            # The active consumer changed while we read; the new one starts over.
            self.cursor.rewind()
            return True
        self._send(consumer, entries)
        return True

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        if consumer is not self.active:
            return
        # Order matters for exclusive consumers: replay everything unacked.
        for pos in consumer.pending:
            self.redelivery_counts[pos] = self.redelivery_counts.get(pos, 0) + 1
        consumer.pending.clear()
        self.cursor.rewind()
        self.schedule()


class SharedDispatcher(Dispatcher):
    """Shared: round-robin by entry over the highest-priority consumers with
    permits; replays (redeliveries, due delayed entries) first."""

    def __init__(self, subscription: SubscriptionView, max_read_batch: int) -> None:
        super().__init__(subscription, max_read_batch)
        self.replay: set[Position] = set()
        self._next = 0
        self.delayed = DelayedIndex(self._on_delayed_due)

    def remove_consumer(self, consumer: Consumer) -> None:
        self._to_replay(consumer, list(consumer.pending))
        super().remove_consumer(consumer)

    def _to_replay(self, consumer: Consumer, positions: list[Position]) -> None:
        for pos in positions:
            if consumer.pending.pop(pos, None) is not None:
                self.replay.add(pos)
                self.redelivery_counts[pos] = self.redelivery_counts.get(pos, 0) + 1

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        self._to_replay(consumer, list(consumer.pending) if positions is None else positions)
        self.schedule()

    def _on_delayed_due(self, positions: list[Position]) -> None:
        self.replay.update(positions)
        self.schedule()

    def reset(self) -> None:
        super().reset()
        self.replay.clear()
        self.delayed.clear()

    def close(self) -> None:
        super().close()
        self.delayed.close()

    def _next_consumer(self) -> Consumer | None:
        """The next consumer by round robin among those of the best priority that can receive."""
        consumers = self.consumers
        n = len(consumers)
        best = None
        for c in consumers:
            if (best is None or c.priority_level < best) and c.can_receive():
                best = c.priority_level
        if best is None:
            return None
        for i in range(n):
            idx = (self._next + i) % n
            consumer = consumers[idx]
            if consumer.priority_level == best and consumer.can_receive():
                self._next = (idx + 1) % n
                return consumer
        return None  # pragma: no cover (best was found above)

    def _total_permits(self) -> int:
        return sum(c.permits for c in self.consumers if c.can_receive())

    def _hold_delayed(self, entries: list[Entry]) -> list[Entry]:
        """Keep back freshly read entries whose delivery time is in the future."""
        out = []
        now = None
        for entry in entries:
            at = deliver_at(entry.data)
            if at is not None:
                now = now_ms() if now is None else now
                if at > now:
                    self.delayed.add(entry.position, at)
                    continue
            out.append(entry)
        return out

    async def _read_replay(self, limit: int) -> tuple[list[Entry], bool]:
        """Up to ``limit`` replay entries in position order (acked or trimmed ones
        are dropped). Returns the entries and whether any was dropped."""
        entries: list[Entry] = []
        moved = False
        ml = self.subscription.ledger
        for pos in sorted(self.replay)[:limit]:
            if self.cursor.is_deleted(pos) or pos <= self.cursor.mark_delete_position:
                self.replay.discard(pos)
                self.redelivery_counts.pop(pos, None)
                moved = True
                continue
            got = await ml.read_entries(pos, 1)
            if got and got[0].position == pos:
                if pos in self.replay:  # not reset meanwhile
                    self.replay.discard(pos)
                    entries.append(got[0])
            else:  # trimmed: nothing left to deliver
                self.replay.discard(pos)
                moved = True
        return entries, moved

    async def _read_new(self, budget: int) -> tuple[list[Entry], bool]:
        """New entries from the cursor, delayed ones held back; and whether any was read."""
        if not self.cursor.has_more_entries():
            return [], False
        fresh = await self.cursor.read_entries(budget)
        return self._hold_delayed(self._without_markers(fresh)), bool(fresh)

    async def _read_round(self, budget: int) -> tuple[list[Entry], bool]:
        """Replays if there are any (they go first), else new entries."""
        if self.replay:
            return await self._read_replay(budget)
        return await self._read_new(budget)

    async def dispatch_round(self) -> bool:
        if self._next_consumer_available() is False:
            return False
        budget = self._rate_allows(min(self.max_read_batch, max(1, self._total_permits())))
        if not budget:
            return False
        entries, moved = await self._read_round(budget)
        if not entries:
            return moved
        for entry in entries:
            consumer = self._next_consumer()
            if consumer is None:
                # Nobody can take it now: keep it for the next round.
                self.replay.add(entry.position)
                continue
            self._send(consumer, [entry])
        return True

    def _next_consumer_available(self) -> bool:
        return any(c.can_receive() for c in self.consumers)


def _count_acks(consumer: Consumer, n: int) -> None:
    """``n`` messages the consumer had received are acknowledged (its stats)."""
    consumer.acked += n
    consumer.last_acked_ms = int(time.time() * 1000)
