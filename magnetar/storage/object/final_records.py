"""A dead writer's commit records, read and decoded once for all the
recoveries of its ledgers.

A takeover recovers every ledger of a dead broker's writer in waves (a
broker loads ``max_concurrent_topic_loads`` = 256 topics at a time, and
:class:`~.commit_records.RecordScans` gathers each wave into one scan).
Each scan read and decoded all of the writer's records again: at 10,000
ledgers of 20 sections, 40 scans read 169 MB where etcd held 4.2 MB, 10.5 s
(bench/takeover_scans.py). Once the writer's session is over (its
``alive`` key gone) its records are final: every commit compares that key,
so none lands any more, and the collector only removes rows of ledgers
compacted or deleted, which no recovery reads. So the first wave's scan
keeps every ledger's sections (:class:`FinalRecords`) and the later waves
take theirs from it, reading nothing.

Bounds: at most :data:`MAX_SECTIONS` sections kept per writer (past that
the scan keeps only its wave's, as before, and that writer is not tried
again); a ledger's sections leave when handed out (a second recovery of it
reads the records again); what is left goes :data:`KEEP_S` after the last
use. A live writer's records are never kept: a commit of it still in
flight may land before a record already read. No I/O here.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

from .index import Section

#: Sections of one dead writer's records kept at most (~160 bytes each: a
#: transient 160 MB at most, shrinking as the waves take theirs; 10,000
#: ledgers of 100 sections each fit).
MAX_SECTIONS = 1_000_000
#: Kept this long after the last wave that took from them.
KEEP_S = 60.0


class FinalRecords:
    """The sections of every ledger in a dead writer's records numbered
    ``since`` or later, by ledger id, each handed out once."""

    def __init__(self, since: int, found: dict[int, list[Section]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.since = since
        self._found = found
        self._taken: set[int] = set()
        self._clock = clock
        self.used = clock()

    def serves(self, since: int, ledgers: Iterable[int]) -> bool:
        """Whether it holds what a scan of ``ledgers`` from ``since`` would
        find: none of them handed out before, ``since`` within its records."""
        return since >= self.since and self._taken.isdisjoint(ledgers)

    def take(self, ledgers: Iterable[int]) -> dict[int, list[Section]]:
        """The sections of ``ledgers`` (those with none are absent), out of it."""
        self.used = self._clock()
        out = {}
        for lid in ledgers:
            self._taken.add(lid)
            sections = self._found.pop(lid, None)
            if sections is not None:
                out[lid] = sections
        return out

    def stale(self) -> bool:
        return self._clock() - self.used > KEEP_S
