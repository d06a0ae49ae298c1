"""Delayed delivery: entries held back until their ``deliver_at_time``.

Contract: a Shared or Key_Shared dispatcher that reads an entry whose
producer metadata carries ``deliver_at_time`` later than now puts its
position here instead of dispatching it; when the time comes the position is
handed back (``on_due``) and the dispatcher replays it like a redelivery.
Exclusive and Failover subscriptions deliver at once, as Pulsar does (one
consumer must see the log in order).

The index holds positions only, in memory. It needs no persistence of its
own: the delivery time is in the stored entry, and a delayed entry is never
acknowledged before it is delivered, so after a restart (or a topic reload)
the cursor reads every unacknowledged entry again from its mark-delete
position and each delayed one lands here again. The cost of that is a
re-read of the backlog on load, which a broker does anyway.

Times are the producer's wall clock against the broker's (milliseconds since
the epoch); a clock skew between them shifts delivery by that much.
"""
from __future__ import annotations

import asyncio
import heapq
import time
from typing import Callable

from magnetar.storage import Position


def now_ms() -> int:
    return int(time.time() * 1000)


class DelayedIndex:
    """Positions by delivery time, with one timer armed for the earliest.

    ``on_due(positions)`` runs on the event loop when positions become due,
    in delivery-time order. ``close()`` cancels the timer; nothing is called after it.
    """

    def __init__(self, on_due: Callable[[list[Position]], None]) -> None:
        self._on_due = on_due
        self._heap: list[tuple[int, Position]] = []
        self._members: set[Position] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._closed = False

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, pos: Position) -> bool:
        return pos in self._members

    def add(self, pos: Position, deliver_at_ms: int) -> None:
        """Hold ``pos`` until ``deliver_at_ms`` (adding a held position again is a no-op)."""
        if self._closed or pos in self._members:
            return
        self._members.add(pos)
        heapq.heappush(self._heap, (deliver_at_ms, pos))
        if self._timer_at is None or deliver_at_ms < self._timer_at:
            self._arm()

    def pop_due(self, now: int | None = None) -> list[Position]:
        """Remove and return the positions whose time has come."""
        now = now_ms() if now is None else now
        out = []
        while self._heap and self._heap[0][0] <= now:
            _, pos = heapq.heappop(self._heap)
            if pos in self._members:
                self._members.discard(pos)
                out.append(pos)
        return out

    def discard(self, pos: Position) -> None:
        """Forget ``pos`` (acknowledged meanwhile); its heap slot is dropped lazily."""
        self._members.discard(pos)

    def clear(self) -> None:
        self._heap.clear()
        self._members.clear()
        self._cancel_timer()

    def close(self) -> None:
        self._closed = True
        self.clear()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = None

    def _arm(self) -> None:
        self._cancel_timer()
        while self._heap and self._heap[0][1] not in self._members:
            heapq.heappop(self._heap)
        if not self._heap or self._closed:
            return
        at = self._heap[0][0]
        loop = asyncio.get_running_loop()
        # A few ms late rather than early: firing early would find nothing due and re-arm.
        delay = max(0.0, (at - now_ms()) / 1000.0) + 0.002
        self._timer_at = at
        self._timer = loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        if self._closed:
            return
        due = self.pop_due()
        self._arm()
        if due:
            self._on_due(due)
