"""The sections cold readers are about to read, by commit object: what a
ranged GET of one of those objects may read on their behalf, and whose
bytes stay kept until they are read.

A ledger of small sections (an indexed ledger, :mod:`.ledger_index`: one
entry per section, each in another commit object) is read cold by one
ranged GET per section. A backfill reads many such ledgers, written
together, at once: each commit object holds a section of every one of
them, but the readers go at their own pace, so by the time a slow reader
comes to an object a fast one fetched, its bytes may be gone from the
:class:`~.range_gets.RangeGets`' kept bytes (least recently used first
out), and the object is fetched again: once per reader at worst (7,331 GETs
for 585 commit objects in a cold read of 1,000 topics, bench/README.md).

So a reader that reads ahead also says which sections it reads next
(:meth:`ReadWindows.ahead`: its next ``WINDOW_SECTIONS``): a GET of one of
those objects covers them (within ``max_gap``) and its bytes are kept for
them before other bytes (up to ``KEEP_PENDING_BYTES`` in all, as for
compactions: :mod:`.pending_sections`), until the reader has read them
(:meth:`taken`). A reader that stops (its consumer gone) does not pin
bytes for long: a window not renewed for ``WINDOW_TTL_S`` is dropped at
the next call. The windows hold ``MAX_SECTIONS`` sections in all at most
(a reader past it announces what fits, or nothing: its reads are as
before), so 10,000 readers at once cost no more memory than 256. No I/O.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable, Sequence

from .index import Section
from .pending_sections import PendingSections

#: Sections a reader announces (from its read-ahead on).
WINDOW_SECTIONS = 256
#: Sections announced in all, at most (~60 MB of ranges at most, ~230 bytes each).
MAX_SECTIONS = 256 * 256
#: A reader's window not renewed for this long is dropped (its reader stopped).
WINDOW_TTL_S = 30.0


class ReadWindows:
    def __init__(self, ttl_s: float = WINDOW_TTL_S, clock: Callable[[], float] = time.monotonic,
                 max_sections: int = MAX_SECTIONS) -> None:
        self.ttl_s = ttl_s
        self.max_sections = max_sections
        self._counts: dict[int, int] = {}  # ledger -> sections in its window
        self._held = 0  # their sum
        self._clock = clock
        self._pending = PendingSections()
        self._since: OrderedDict[int, float] = OrderedDict()  # ledger -> when its window was set, oldest first

    def ahead(self, ledger_id: int, sections: Sequence[Section]) -> None:
        """``ledger_id``'s reader reads ``sections`` next (replaces its
        window; those of them that fit within ``max_sections``)."""
        now = self._clock()
        while self._since:
            oldest, since = next(iter(self._since.items()))
            if now - since < self.ttl_s:
                break
            self.drop(oldest)
        self.drop(ledger_id)
        room = self.max_sections - self._held
        if room <= 0:
            return
        sections = sections[:room]
        self._pending.add(ledger_id, sections)
        self._counts[ledger_id] = len(sections)
        self._held += len(sections)
        self._since[ledger_id] = now
        self._since.move_to_end(ledger_id)

    def taken(self, ledger_id: int, key: str) -> None:
        """``ledger_id``'s reader has its section of object ``key``."""
        if ledger_id in self._since:
            self._pending.taken(ledger_id, (key,))

    def drop(self, ledger_id: int) -> None:
        self._since.pop(ledger_id, None)
        self._held -= self._counts.pop(ledger_id, 0)
        self._pending.drop(ledger_id)

    def __contains__(self, key: str) -> bool:
        return key in self._pending

    def ranges(self, key: str) -> list[tuple[int, int]]:
        return self._pending.ranges(key)

    def __len__(self) -> int:
        return len(self._since)


class Pending:
    """What :class:`~.range_gets.RangeGets` reads on others' behalf and keeps
    first: the compactions' pending sections and the readers' windows."""

    def __init__(self, *parts) -> None:
        self.parts = parts

    def __contains__(self, key: str) -> bool:
        return any(key in part for part in self.parts)

    def ranges(self, key: str) -> list[tuple[int, int]]:
        # only of the parts that hold it: a compaction round's GETs ask this
        # once each (test_compaction_round_reads counts the asks)
        return [r for part in self.parts if key in part for r in part.ranges(key)]
