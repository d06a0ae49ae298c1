"""Reading a managed ledger: positions and entries.

Positions are ``(ledger id, entry id)``; only confirmed (durable) entries are
read. Recent entries come from the tail cache, older ones from the backend
(``LedgerBackend.read``). A mixin of
:class:`~.managed_ledger.ManagedLedger`. Failure modes: ``StorageError`` from
a file read; a position past the end reads nothing.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from bisect import bisect_left, bisect_right
from typing import Callable

from .entry import Entry
from .errors import (
    StorageError,
)
from .backend import LedgerHandle
from .position import Position

from .ledger_meta import _CLOSED, _LedgerMeta

log = logging.getLogger(__name__)


class Reading:
    """Positions and reads (mixin; state lives on the ledger)."""

    # ============================================================== positions

    def _assigned(self, meta: _LedgerMeta) -> int:
        """Entries in the ledger, counting appends not yet durable for the current one."""
        return self._next_entry if meta is self._current_meta else meta.entries

    def _next_append_position(self) -> Position:
        """Where the next append goes. While a rollover runs and the new
        ledger's id is not known yet (rare), this is a position in the old
        ledger that will never hold an entry, which orders correctly all the
        same: reads from it go on to the next ledger."""
        if self._rolling and self._spare_id is not None:
            return Position(self._spare_id, len(self._waiting))
        meta = self._current_meta
        return Position(meta.ledger_id, self._next_entry)

    def first_position(self) -> Position | None:
        """The first confirmed entry still stored; None if there is none."""
        for meta in self._ledgers.values():
            if meta.entries:
                return Position(meta.ledger_id, 0)
        return None

    def next_position(self, pos: Position) -> Position:
        """The position right after ``pos``, crossing ledger boundaries and
        skipping empty or deleted ledgers. Past the end: the position the
        next append gets (if that is after ``pos``), or while a rollover
        runs, the new ledger's first position (appends wait for it)."""
        meta = self._ledgers.get(pos.ledger_id)
        if meta is not None and pos.entry_id + 1 < self._assigned(meta):
            return Position(pos.ledger_id, pos.entry_id + 1)
        ids = self._ids
        for i in range(bisect_right(ids, pos.ledger_id), len(ids)):
            later = self._ledgers[ids[i]]
            if self._assigned(later):
                return Position(later.ledger_id, 0)
        end = self._next_append_position()
        if end.ledger_id > pos.ledger_id:
            # A rollover is running: the appends waiting for the new ledger
            # become its entries 0, 1, ...; the next position is its first,
            # not where the next append goes (a reader would skip them).
            return Position(end.ledger_id, 0)
        return end if end > pos else Position(pos.ledger_id, pos.entry_id + 1)

    def _is_confirmed_entry(self, pos: Position) -> bool:
        meta = self._ledgers.get(pos.ledger_id)
        return meta is not None and 0 <= pos.entry_id < meta.entries

    def _entries_after(self, pos: Position) -> int:
        """Confirmed entries strictly after ``pos``."""
        total = 0
        for meta in self._ledgers.values():
            if meta.ledger_id > pos.ledger_id:
                total += meta.entries
            elif meta.ledger_id == pos.ledger_id:
                total += max(0, meta.entries - pos.entry_id - 1)
        return total

    def _locate(self, pos: Position) -> tuple[_LedgerMeta, int] | None:
        """The first confirmed entry at or after ``pos``."""
        ids = self._ids
        for i in range(bisect_left(ids, pos.ledger_id), len(ids)):
            meta = self._ledgers[ids[i]]
            entry_id = max(pos.entry_id, 0) if meta.ledger_id == pos.ledger_id else 0
            if entry_id < meta.entries:
                return meta, entry_id
        return None

    # ================================================================= reads

    async def read_entries(self, start: Position, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """Up to ``max_entries`` confirmed entries from ``start`` (or the next
        stored entry after it), possibly spanning ledgers; ``[]`` if none.
        With ``max_bytes``, stops once that much data was returned (at least
        one entry is always returned). Raises ``CorruptLedgerError`` if a
        record fails its CRC and ``StorageError`` on I/O errors."""
        if self._state is _CLOSED:
            raise self._refusal()
        out: list[Entry] = []
        nbytes = 0
        pos = start
        while len(out) < max_entries:
            found = self._locate(pos)
            if found is None:
                break
            meta, first = found
            lid = meta.ledger_id
            last = min(meta.entries - 1, first + max_entries - len(out) - 1)
            datas = self._cache.get(lid, first, last)
            if not datas:
                cached = self._cache.first_cached(lid)
                if cached is not None and first < cached <= last:
                    last = cached - 1
                try:
                    datas = await self._read_file(meta, first, last, max_bytes)
                except StorageError:
                    if self._ledgers.get(lid) is meta:
                        raise
                    pos = Position(lid + 1, 0)  # trimmed while we read: go on after it
                    continue
            for i, data in enumerate(datas, first):
                out.append(Entry(Position(lid, i), data))
                if max_bytes is not None:
                    nbytes += len(data)
                    if nbytes >= max_bytes:
                        return out
            pos = Position(lid, first + len(datas))
        return out

    async def _read_file(self, meta: _LedgerMeta, first: int, last: int, max_bytes: int | None) -> list[bytes]:
        ledger = meta.ledger
        if ledger is None:
            ledger = await self._open_ledger(meta)
        return await self._backend.read(ledger, first, last, max_bytes)

    async def _open_ledger(self, meta: _LedgerMeta) -> LedgerHandle:
        if meta.opening is None:
            meta.opening = self._loop.create_task(self._backend.open_sealed(meta.ledger_id, meta.entries))
        try:
            ledger = await asyncio.shield(meta.opening)
        except StorageError as exc:
            meta.opening = None
            raise StorageError(f"{self.name}: {exc}") from exc
        except BaseException:
            meta.opening = None
            raise
        if self._ledgers.get(meta.ledger_id) is not meta:
            ledger.close()  # trimmed meanwhile
            raise StorageError(f"ledger {meta.ledger_id} was deleted")
        if meta.ledger is None:
            meta.ledger = ledger
        return meta.ledger

    async def find_first(self, predicate: Callable[[Entry], bool]) -> Position | None:
        """Binary search for the first confirmed entry where ``predicate`` is
        True, assuming it is False...False True...True over the log (e.g.
        publish time >= t). None if it is True nowhere."""
        spans = [(m.ledger_id, m.entries) for m in self._ledgers.values() if m.entries]
        starts = list(itertools.accumulate((n for _, n in spans), initial=0))
        total = starts[-1]

        def position(k: int) -> Position:
            i = bisect_right(starts, k) - 1
            return Position(spans[i][0], k - starts[i])

        lo, hi = 0, total
        while lo < hi:
            mid = (lo + hi) // 2
            pos = position(mid)
            entries = await self.read_entries(pos, 1)
            if entries and entries[0].position == pos and predicate(entries[0]):
                hi = mid
            elif entries and entries[0].position == pos:
                lo = mid + 1
            else:  # trimmed under us: treat as before the answer
                lo = mid + 1
        return position(lo) if lo < total else None
