"""Key_Shared subscriptions: every message key goes to one consumer at a time.

Routing. A message's sticky key is its ordering key, else its partition key,
else ``NONE_KEY`` (:func:`.message_peek.sticky_key`); a batch is routed by its
outer metadata's key, which is right when producers batch by key (the
official client's ``BatchingType.KeyBased``). The key's slot is
``murmur3_32(key, seed 0) mod 65536``, Pulsar's default hash and range size,
so the same keys land in the same ranges as on Pulsar. Slots map to consumers
by a selector chosen by the subscription's first consumer:

- AUTO_SPLIT (:class:`AutoSplitSelector`): the first consumer owns 0..65535;
  each newcomer takes the upper half of the largest range; a leaving
  consumer's ranges go to the owner of the range right after each (or before,
  for the last).
- STICKY (:class:`StickySelector`): each consumer brings its own ranges in
  KeySharedMeta.hashRanges (inclusive); an overlap with another consumer's
  ranges is refused with ConsumerAssignError. Slots nobody covers are held
  until a consumer covering them subscribes.

A consumer with a different mode than the subscription's is refused with
ConsumerAssignError.

Ordering (unless the consumer set ``allowOutOfOrderDelivery``): a key's
messages are delivered in log order, and a slot is never delivered to a
consumer while *another* consumer still holds unacknowledged messages of that
slot (the slot is "draining" from its previous owner). This is the rule of
Pulsar 4's PIP-379 and replaces the older "recently joined consumers" rule: it
needs no join positions, is safe for every reassignment (joins, leaves,
sticky ranges), and cannot deadlock, because the previous owner either acks
its messages or loses them to redelivery when it leaves. Within one dispatch
round, once an entry of a slot is held back (no permits, draining), every
later entry of that slot is held too, and held entries are replayed in
position order before anything newer is read.

Limits: held entries are remembered by position and re-read from storage on
the next round; while more than ``replay_limit`` entries are held no new
entries are read, so one consumer that stops acknowledging eventually stalls
the subscription (as in Pulsar).
"""
from __future__ import annotations

import bisect

from magnetar.protocol import ServerError, pb
from magnetar.storage import Entry, Position

from .consumer import Consumer
from .dispatcher import SharedDispatcher
from magnetar.broker.errors import BrokerError
from magnetar.broker.entries.message_peek import sticky_key

from .views import SubscriptionView

RANGE_SIZE = 65536
AUTO_SPLIT = pb.AUTO_SPLIT
STICKY = pb.STICKY


class ConsumerAssignError(BrokerError):
    code = ServerError.ConsumerAssignError


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data`` (unsigned)."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & mask
    n = len(data)
    tail = n - (n & 3)
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    if n & 3:
        k = int.from_bytes(data[tail:], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h


def slot_of(key: bytes) -> int:
    """The hash slot (0..65535) of a sticky key."""
    return murmur3_32(key) % RANGE_SIZE


class AutoSplitSelector:
    """Contiguous ranges covering every slot; see the module docstring."""

    def __init__(self) -> None:
        #: (last slot of the range, owner), sorted by last slot; the ranges tile 0..65535.
        self._ranges: list[tuple[int, Consumer]] = []

    def add(self, consumer: Consumer, meta: pb.KeySharedMeta | None = None) -> None:
        if not self._ranges:
            self._ranges = [(RANGE_SIZE - 1, consumer)]
            return
        best, best_len = 0, -1
        start = 0
        for i, (end, _) in enumerate(self._ranges):
            if end - start + 1 > best_len:
                best, best_len = i, end - start + 1
            start = end + 1
        if best_len < 2:
            raise ConsumerAssignError("no hash range left to split for another consumer")
        end, owner = self._ranges[best]
        first = self._ranges[best - 1][0] + 1 if best else 0
        middle = first + best_len // 2 - 1
        self._ranges[best : best + 1] = [(middle, owner), (end, consumer)]

    def remove(self, consumer: Consumer) -> None:
        ranges = self._ranges
        if all(c is consumer for _, c in ranges):
            self._ranges = []
            return
        out: list[tuple[int, Consumer]] = []
        for i, (end, owner) in enumerate(ranges):
            if owner is consumer:
                # Hand the range to the next range's owner (or the previous one at the end).
                heir = next((c for _, c in ranges[i + 1 :] if c is not consumer), None)
                if heir is None:
                    heir = next(c for _, c in reversed(out))
                owner = heir
            if out and out[-1][1] is owner:
                out[-1] = (end, owner)  # merge neighbours of one owner
            else:
                out.append((end, owner))
        self._ranges = out

    def select(self, slot: int) -> Consumer | None:
        i = bisect.bisect_left(self._ranges, slot, key=lambda r: r[0])
        return self._ranges[i][1] if i < len(self._ranges) else None

    def ranges(self) -> list[tuple[int, int, str]]:
        out, start = [], 0
        for end, owner in self._ranges:
            out.append((start, end, owner.name))
            start = end + 1
        return out


class StickySelector:
    """Ranges chosen by the consumers themselves; see the module docstring."""

    def __init__(self) -> None:
        #: (first slot, last slot, owner), sorted and disjoint.
        self._ranges: list[tuple[int, int, Consumer]] = []

    def add(self, consumer: Consumer, meta: pb.KeySharedMeta | None = None) -> None:
        wanted = [(r.start, r.end) for r in meta.hashRanges] if meta is not None else []
        if not wanted:
            raise ConsumerAssignError("a sticky Key_Shared consumer must give hash ranges")
        for start, end in wanted:
            if not (0 <= start <= end < RANGE_SIZE):
                raise ConsumerAssignError(f"hash range [{start}, {end}] is not within [0, {RANGE_SIZE - 1}]")
        merged = sorted([(s, e, consumer) for s, e in wanted] + self._ranges, key=lambda r: r[0])
        for (s1, e1, c1), (s2, e2, c2) in zip(merged, merged[1:]):
            if s2 <= e1:
                who = "itself" if c1 is c2 else (c2.name if c1 is consumer else c1.name)
                raise ConsumerAssignError(
                    f"hash range [{s2}, {e2}] overlaps [{s1}, {e1}] of consumer {who}")
        self._ranges = merged

    def remove(self, consumer: Consumer) -> None:
        self._ranges = [r for r in self._ranges if r[2] is not consumer]

    def select(self, slot: int) -> Consumer | None:
        i = bisect.bisect_right(self._ranges, slot, key=lambda r: r[0]) - 1
        if i >= 0 and self._ranges[i][1] >= slot:
            return self._ranges[i][2]
        return None

    def ranges(self) -> list[tuple[int, int, str]]:
        return [(s, e, c.name) for s, e, c in self._ranges]


class KeySharedDispatcher(SharedDispatcher):
    """Shared dispatch with per-key routing and the draining rule (module docstring)."""

    def __init__(self, subscription: SubscriptionView, max_read_batch: int, mode: int) -> None:
        super().__init__(subscription, max_read_batch)
        self.mode = mode
        self.selector = StickySelector() if mode == STICKY else AutoSplitSelector()
        self.replay_limit = max(1000, 10 * max_read_batch)
        #: Delivered, unacknowledged entries: position -> (slot, consumer).
        self._slot_of: dict[Position, tuple[int, Consumer]] = {}
        #: slot -> {consumer: unacknowledged entries of that slot}.
        self._holders: dict[int, dict[Consumer, int]] = {}

    @staticmethod
    def mode_of(consumer: Consumer) -> int:
        meta = consumer.key_shared_meta
        return meta.keySharedMode if meta is not None else AUTO_SPLIT

    def add_consumer(self, consumer: Consumer) -> None:
        """Raises ConsumerAssignError (nothing changed) for a wrong mode or bad ranges."""
        mode = self.mode_of(consumer)
        if mode != self.mode:
            raise ConsumerAssignError(
                f"subscription {self.subscription.name} uses Key_Shared mode {pb.KeySharedMode.Name(self.mode)}, "
                f"not {pb.KeySharedMode.Name(mode)}")
        self.selector.add(consumer, consumer.key_shared_meta)
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        self.selector.remove(consumer)
        super().remove_consumer(consumer)

    # -- bookkeeping of what each consumer holds ---------------------------
    def _hold(self, pos: Position, slot: int, consumer: Consumer) -> None:
        self._slot_of[pos] = (slot, consumer)
        holders = self._holders.setdefault(slot, {})
        holders[consumer] = holders.get(consumer, 0) + 1

    def _release(self, pos: Position) -> bool:
        found = self._slot_of.pop(pos, None)
        if found is None:
            return False
        slot, consumer = found
        holders = self._holders.get(slot)
        if holders is not None:
            left = holders.get(consumer, 0) - 1
            if left > 0:
                holders[consumer] = left
            else:
                holders.pop(consumer, None)
                if not holders:
                    del self._holders[slot]
        return True

    def _draining_elsewhere(self, slot: int, target: Consumer) -> bool:
        holders = self._holders.get(slot)
        return bool(holders) and any(c is not target for c in holders)

    def acked(self, positions: list[Position]) -> None:
        released = False
        for pos in positions:
            released |= self._release(pos)
        super().acked(positions)
        if released and self.replay:
            self.schedule()

    def acked_cumulative(self, upto: Position) -> None:
        for pos in [p for p in self._slot_of if p <= upto]:
            self._release(pos)
        super().acked_cumulative(upto)
        self.schedule()

    def _to_replay(self, consumer: Consumer, positions: list[Position]) -> None:
        for pos in positions:
            if pos in consumer.pending:
                self._release(pos)
        super()._to_replay(consumer, positions)

    def reset(self) -> None:
        super().reset()
        self._slot_of.clear()
        self._holders.clear()

    # -- dispatch ----------------------------------------------------------
    def _allow_out_of_order(self, consumer: Consumer) -> bool:
        meta = consumer.key_shared_meta
        return meta is not None and meta.allowOutOfOrderDelivery

    async def dispatch_round(self) -> bool:
        if not self._next_consumer_available():
            return False
        allowed = self._rate_allows(max(self.replay_limit, self.max_read_batch))
        if not allowed:
            return False
        # Every held entry is examined each round (in position order) before
        # anything newer, or a newer entry of a key could overtake an older one.
        limit = min(self.replay_limit, allowed)
        entries, moved = await self._read_replay(limit)
        if not self.replay and len(entries) < limit:
            budget = min(self.max_read_batch, max(1, self._total_permits()), allowed - len(entries))
            fresh, read = await self._read_new(budget)
            entries.extend(fresh)
            moved |= read
        sent = False
        blocked: set[int] = set()
        for entry in entries:
            if self._route(entry, blocked):
                sent = True
        return sent or moved

    def _route(self, entry: Entry, blocked: set[int]) -> bool:
        """Send ``entry`` to its key's consumer, or hold it for replay; True if sent."""
        slot = slot_of(sticky_key(entry.data))
        consumer = self.selector.select(slot)
        if (consumer is None or slot in blocked or not consumer.can_receive()
                or (self._draining_elsewhere(slot, consumer) and not self._allow_out_of_order(consumer))):
            self.replay.add(entry.position)
            blocked.add(slot)
            return False
        self._send(consumer, [entry])
        self._hold(entry.position, slot, consumer)
        return True

    def key_ranges(self) -> list[tuple[int, int, str]]:
        """(first slot, last slot, consumer name) per range, for stats."""
        return self.selector.ranges()
