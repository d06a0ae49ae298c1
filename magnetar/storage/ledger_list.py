"""The ledgers of one managed ledger, oldest first, and the positions in them.

What the managed ledger knows of each ledger (a :class:`~.ledger_meta.LedgerMeta`:
confirmed entries, size, state, its open handle) by id, with the ids kept
sorted, so that positions can be found by bisection. Counts are of
confirmed (durable) entries only: where appends go next is the append
path's business, not this list's. No I/O.
"""
from __future__ import annotations

import itertools
from bisect import bisect_left
from typing import Iterator

from .entry import LedgerInfo
from .ledger_meta import LedgerMeta
from .position import Position


class LedgerList:
    """Ledgers by id (ids only ever grow: a new ledger goes last)."""

    def __init__(self) -> None:
        #: Id -> record, in id order (a dict keeps insertion order).
        self.metas: dict[int, LedgerMeta] = {}
        #: The same ids, sorted, for bisection.
        self.ids: list[int] = []

    def __iter__(self) -> Iterator[LedgerMeta]:
        return iter(self.metas.values())

    def get(self, ledger_id: int) -> LedgerMeta | None:
        return self.metas.get(ledger_id)

    def add(self, meta: LedgerMeta) -> None:
        """Append ``meta`` (its id is higher than every id listed)."""
        self.metas[meta.ledger_id] = meta
        self.ids.append(meta.ledger_id)

    def remove(self, meta: LedgerMeta) -> None:
        self.metas.pop(meta.ledger_id, None)
        i = bisect_left(self.ids, meta.ledger_id)
        if i < len(self.ids) and self.ids[i] == meta.ledger_id:
            del self.ids[i]

    def docs(self, without=()) -> list[dict]:
        """The records to store, leaving out the ledgers in ``without`` (records or ids)."""
        return [m.doc() for m in self.metas.values() if m not in without and m.ledger_id not in without]

    @property
    def entry_count(self) -> int:
        return sum(m.entries for m in self.metas.values())

    @property
    def total_size(self) -> int:
        return sum(m.size for m in self.metas.values())

    def infos(self) -> list[LedgerInfo]:
        return [LedgerInfo(m.ledger_id, m.entries, m.size, m.created, m.state, m.closed)
                for m in self.metas.values()]

    # -- positions --------------------------------------------------------

    def first_position(self) -> Position | None:
        """The first confirmed entry still stored; None if there is none."""
        for meta in self.metas.values():
            if meta.entries:
                return Position(meta.ledger_id, 0)
        return None

    def is_confirmed_entry(self, pos: Position) -> bool:
        meta = self.metas.get(pos.ledger_id)
        return meta is not None and 0 <= pos.entry_id < meta.entries

    def entries_after(self, pos: Position) -> int:
        """Confirmed entries strictly after ``pos``."""
        total = 0
        for meta in self.metas.values():
            if meta.ledger_id > pos.ledger_id:
                total += meta.entries
            elif meta.ledger_id == pos.ledger_id:
                total += max(0, meta.entries - pos.entry_id - 1)
        return total

    def locate(self, pos: Position) -> tuple[LedgerMeta, int] | None:
        """The first confirmed entry at or after ``pos``: its ledger and entry id."""
        ids = self.ids
        for i in range(bisect_left(ids, pos.ledger_id), len(ids)):
            meta = self.metas[ids[i]]
            entry_id = max(pos.entry_id, 0) if meta.ledger_id == pos.ledger_id else 0
            if entry_id < meta.entries:
                return meta, entry_id
        return None

    def spans(self) -> tuple[list[tuple[int, int]], list[int]]:
        """``(ledger id, entries)`` of the ledgers holding entries, and the
        number of entries before each (a last element: the total)."""
        spans = [(m.ledger_id, m.entries) for m in self.metas.values() if m.entries]
        return spans, list(itertools.accumulate((n for _, n in spans), initial=0))
