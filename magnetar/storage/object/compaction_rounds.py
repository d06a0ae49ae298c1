"""Compactions from the store gathered into rounds: the ledgers a writer
sealed within ``COMPACT_ROUND_S`` of the first of them are compacted
together, in one lockstep (:class:`~.range_gets.Lockstep`).

A commit object holds sections of many ledgers, and compacting a ledger
from the store reads every commit object that holds one of its sections
(up to ``MAX_SECTIONS_PER_LEDGER`` of them). Ledgers compacted together
share those GETs: one per object for all of them. Their rollovers are
spread (:func:`~.object_ledger.draw_max_sections`), so ledgers filled
together are sealed over a while, not at once: compacted 50 ms after each
seal, they would each read their own objects again (a few ledgers a
lockstep), about as many GETs as sections, where a round reads each object
of the window once for all the ledgers sealed in it. A round waits at most
``COMPACT_ROUND_S`` after its first seal (what its ledgers' sections cost
meanwhile: they stay in memory and in the index a little longer). Ledgers
a writer compacts from the bytes it kept (:mod:`.kept_sections`) read
nothing and do not wait; neither do ledgers compacted into an index object
(:mod:`.ledger_index`), nor ledgers opened from the store (a takeover's,
whose loads already come together).

No I/O here: :meth:`CompactionRounds.add` queues, and the round's start
(a callback) begins the compactions. Failure modes: none of its own; a
ledger deleted while waiting is :meth:`~CompactionRounds.discard`\\ ed.
"""
from __future__ import annotations

import asyncio
from typing import Callable

from .object_ledger import ObjectLedger

#: Seconds a round gathers sealed ledgers after its first, before they are compacted together.
COMPACT_ROUND_S = 30.0


class CompactionRounds:
    """Sealed ledgers waiting for the next round; ``start`` is called with
    all of them at once (``every_s`` after the first of them came)."""

    def __init__(self, start: Callable[[list[ObjectLedger]], None], every_s: float | None = None) -> None:
        self._start = start
        self.every_s = COMPACT_ROUND_S if every_s is None else every_s
        self._waiting: dict[int, ObjectLedger] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.rounds = 0  # rounds started

    def __contains__(self, ledger_id: int) -> bool:
        return ledger_id in self._waiting

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, ledger: ObjectLedger) -> None:
        """Compact ``ledger`` in the next round."""
        self._waiting[ledger.ledger_id] = ledger
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.every_s, self._go)

    def discard(self, ledger_id: int) -> None:
        """Not to be compacted (deleted meanwhile)."""
        self._waiting.pop(ledger_id, None)

    def _go(self) -> None:
        self._timer = None
        waiting, self._waiting = list(self._waiting.values()), {}
        if waiting:
            self.rounds += 1
            self._start(waiting)

    def flush(self) -> None:
        """Start the round waiting now (the backend is closing)."""
        if self._timer is not None:
            self._timer.cancel()
            self._go()

    def stop(self) -> None:
        """Compact none of those waiting (the backend closes: each is
        compacted when next sealed or opened)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting.clear()
