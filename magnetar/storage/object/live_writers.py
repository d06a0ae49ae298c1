"""Whether another broker may still be compacting a ledger it wrote.

A ledger's writer compacts it into chunks from the bytes it kept, after
its seal: while alive after a move, and for up to
``object_close_compact_s`` of a clean close. A broker that opens such a
ledger from the store meanwhile (a reader on its new owner) would index it
a second after the load (an index object, :mod:`.ledger_index`), and the
first marker wins: an index whose lone cold read costs a GET per section,
where the writer's chunks cost one per chunk. So the opener holds back
while the ledger's writer is alive: its ``alive`` key
(:mod:`.writer_fence`) exists and it is not this broker's own (and the
ledger is not fenced: a takeover's recovery does not wait).

:meth:`LiveWriters.compacting` answers from one read of that key per
writer per ``CHECK_EVERY_S`` (a takeover opens thousands of ledgers of one
writer). Failure modes: ``MetadataError`` from the store, to the caller.
"""
from __future__ import annotations

import time
from typing import Callable

from ...metadata.store import MetadataStore
from .writer_fence import alive_key

#: Seconds an answer about a writer holds.
CHECK_EVERY_S = 1.0


class LiveWriters:
    """``own``: this broker's writer id now (None: it writes no format-2 ledger yet)."""

    def __init__(self, store: MetadataStore, own: Callable[[], str | None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store, self._own, self._clock = store, own, clock
        self._answers: dict[str, tuple[bool, float]] = {}

    async def compacting(self, writer: str) -> bool:
        """Whether ``writer`` is another broker's, alive: it may be compacting its ledgers."""
        if writer == self._own():
            return False
        now = self._clock()
        known = self._answers.get(writer)
        if known is not None and now - known[1] < CHECK_EVERY_S:
            return known[0]
        alive = await self._store.get(alive_key(writer)) is not None
        if len(self._answers) > 1000:  # writers come and go: forget the old answers
            self._answers = {w: a for w, a in self._answers.items() if now - a[1] < CHECK_EVERY_S}
        self._answers[writer] = (alive, now)
        return alive
