"""The byte ranges of commit objects that compactions on this broker are
going to fetch, by object: what a ranged GET of one of those objects may
read on their behalf at no extra cost in bytes.

A ledger opened from the store (a cold read after a restart or a move, a
recovery) is compacted from the store soon after: every one of its
sections will be fetched anyway. When a reader's GET of a commit object
also covers the sections other such ledgers have in it (a Spark job's
partitions, written together, each its own ledger), each object is read
once for all of them: the bytes are kept (:mod:`.range_gets`) and the
other ledgers' reads and compactions are served from them.

A ledger is added when its compaction from the store is scheduled; the
objects its compaction fetched are no longer pending for it (``taken``),
and it is dropped when that compaction ends (done, failed or cancelled).
No I/O.
"""
from __future__ import annotations

from typing import Iterable

from .index import Section


class PendingSections:
    def __init__(self) -> None:
        self._by_object: dict[str, dict[int, list[tuple[int, int]]]] = {}  # key -> ledger -> ranges
        self._objects: dict[int, set[str]] = {}  # ledger -> keys it has ranges in

    def add(self, ledger_id: int, sections: Iterable[Section]) -> None:
        """``ledger_id``'s ``sections`` will be fetched (replaces what it had)."""
        self.drop(ledger_id)
        keys: set[str] = set()
        for s in sections:
            self._by_object.setdefault(s.key, {}).setdefault(ledger_id, []).append((s.offset, s.offset + s.length))
            keys.add(s.key)
        if keys:
            self._objects[ledger_id] = keys

    def taken(self, ledger_id: int, keys: Iterable[str]) -> None:
        """``ledger_id``'s compaction has fetched its ranges of ``keys``."""
        mine = self._objects.get(ledger_id)
        if mine is None:
            return
        for key in keys:
            if key in mine:
                mine.discard(key)
                ledgers = self._by_object[key]
                ledgers.pop(ledger_id, None)
                if not ledgers:
                    del self._by_object[key]
        if not mine:
            del self._objects[ledger_id]

    def drop(self, ledger_id: int) -> None:
        for key in self._objects.pop(ledger_id, ()):
            ledgers = self._by_object[key]
            ledgers.pop(ledger_id, None)
            if not ledgers:
                del self._by_object[key]

    def __contains__(self, key: str) -> bool:
        """Whether some compaction will still fetch part of object ``key``."""
        return key in self._by_object

    def ranges(self, key: str) -> list[tuple[int, int]]:
        """Every pending ``[start, end)`` of object ``key`` (any ledger's)."""
        ledgers = self._by_object.get(key)
        if not ledgers:
            return []
        return [r for ranges in ledgers.values() for r in ranges]

    def __len__(self) -> int:
        return len(self._objects)
