"""Sets of positions stored as per-ledger runs of consecutive entry ids.

A cursor's individually acknowledged entries are mostly long runs with a few
holes, so storing runs keeps memory and persisted state small however many
entries are acknowledged. Runs never span ledgers (whether two ledgers are
adjacent is the managed ledger's knowledge, not this set's).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Iterator

from .position import Position


class _Runs:
    """Disjoint, non-adjacent inclusive runs ``[starts[i], ends[i]]``, sorted."""

    __slots__ = ("starts", "ends")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []


class PositionRangeSet:
    def __init__(self) -> None:
        self._ledgers: dict[int, _Runs] = {}
        self._ids: list[int] = []  # sorted ledger ids with runs
        self._count = 0

    def __len__(self) -> int:
        """Number of positions in the set."""
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __contains__(self, pos: Position) -> bool:
        runs = self._ledgers.get(pos.ledger_id)
        if runs is None:
            return False
        i = bisect_right(runs.starts, pos.entry_id) - 1
        return i >= 0 and pos.entry_id <= runs.ends[i]

    def run_end(self, pos: Position) -> Position | None:
        """The last position of the run holding ``pos``; None if absent."""
        runs = self._ledgers.get(pos.ledger_id)
        if runs is None:
            return None
        i = bisect_right(runs.starts, pos.entry_id) - 1
        if i >= 0 and pos.entry_id <= runs.ends[i]:
            return Position(pos.ledger_id, runs.ends[i])
        return None

    def add(self, pos: Position) -> bool:
        """Add ``pos``; True if it was not there."""
        return self.add_run(pos.ledger_id, pos.entry_id, pos.entry_id) > 0

    def add_run(self, ledger_id: int, first: int, last: int) -> int:
        """Add entries ``first..last`` of a ledger; returns how many were new."""
        runs = self._ledgers.get(ledger_id)
        if runs is None:
            runs = self._ledgers[ledger_id] = _Runs()
            i = bisect_left(self._ids, ledger_id)
            self._ids.insert(i, ledger_id)
        starts, ends = runs.starts, runs.ends
        # runs touching or overlapping [first-1, last+1] merge into one
        lo = bisect_left(ends, first - 1)
        hi = bisect_right(starts, last + 1)
        if lo == hi:
            starts.insert(lo, first)
            ends.insert(lo, last)
            added = last - first + 1
        else:
            covered = sum(
                min(ends[k], last) - max(starts[k], first) + 1
                for k in range(lo, hi)
                if ends[k] >= first and starts[k] <= last
            )
            new_first = min(first, starts[lo])
            new_last = max(last, ends[hi - 1])
            added = last - first + 1 - covered
            starts[lo:hi] = [new_first]
            ends[lo:hi] = [new_last]
        self._count += added
        return added

    def remove_through(self, pos: Position) -> None:
        """Drop every position ``<= pos``."""
        ids = self._ids
        while ids and ids[0] < pos.ledger_id:
            runs = self._ledgers.pop(ids.pop(0))
            self._count -= sum(e - s + 1 for s, e in zip(runs.starts, runs.ends))
        if not ids or ids[0] != pos.ledger_id:
            return
        runs = self._ledgers[pos.ledger_id]
        starts, ends = runs.starts, runs.ends
        cut = pos.entry_id
        while starts and starts[0] <= cut:
            if ends[0] <= cut:
                self._count -= ends[0] - starts[0] + 1
                del starts[0], ends[0]
            else:
                self._count -= cut - starts[0] + 1
                starts[0] = cut + 1
        if not starts:
            del self._ledgers[pos.ledger_id]
            ids.pop(0)

    def clear(self) -> None:
        self._ledgers.clear()
        self._ids.clear()
        self._count = 0

    def count_in_ledger(self, ledger_id: int) -> int:
        runs = self._ledgers.get(ledger_id)
        if runs is None:
            return 0
        return sum(e - s + 1 for s, e in zip(runs.starts, runs.ends))

    def ledger_ids(self) -> list[int]:
        return list(self._ids)

    def runs(self) -> Iterator[tuple[int, int, int]]:
        """``(ledger_id, first, last)`` for every run, in position order."""
        for lid in self._ids:
            runs = self._ledgers[lid]
            for s, e in zip(runs.starts, runs.ends):
                yield lid, s, e

    def ranges(self) -> list[tuple[Position, Position]]:
        """Inclusive ``(first, last)`` position pairs, in order."""
        return [(Position(lid, s), Position(lid, e)) for lid, s, e in self.runs()]
