"""Reading a managed ledger's confirmed entries.

Recent entries come from the tail cache, older ones from the backend
(``LedgerBackend.read``; a sealed ledger is opened on first read). The
:class:`EntryReader` is handed the managed ledger's :class:`~.ledger_list.LedgerList`,
its tail cache and the backend; it reads only confirmed entries, so it
needs nothing of the append path.

A read that returns entries is timed in the ledger's
:class:`~.read_stats.ReadStats`, and a read that goes to the backend counted
as a cache miss there.

Failure modes: ``StorageError`` from the backend (``CorruptLedgerError``
on a bad checksum); a ledger trimmed while it is read is skipped; a
position past the end reads nothing.
"""
from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_right
from typing import Awaitable, Callable

from .backend import LedgerBackend, LedgerHandle
from .cache import TailCache
from .entry import Entry
from .errors import StorageError
from .ledger_list import LedgerList
from .ledger_meta import LedgerMeta
from .position import Position
from .read_budget import bytes_within
from .read_stats import ReadStats

log = logging.getLogger(__name__)


class EntryReader:
    """Reads of one managed ledger (``name`` is for error messages)."""

    def __init__(self, name: str, ledgers: LedgerList, cache: TailCache, backend: LedgerBackend,
                 stats: ReadStats) -> None:
        self.name = name
        self._ledgers = ledgers
        self._cache = cache
        self._backend = backend
        self._stats = stats

    async def read_entries(self, start: Position, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """See :meth:`.managed_ledger.ManagedLedger.read_entries`."""
        return [Entry(Position(lid, i), data) for lid, first, datas in await self.read_runs(start, max_entries, max_bytes)
                for i, data in enumerate(datas, first)]

    async def read_runs(self, start: Position, max_entries: int,
                        max_bytes: int | None = None) -> list[tuple[int, int, list[bytes]]]:
        """What :meth:`read_entries` reads, as runs of consecutive entries of
        one ledger: ``(ledger id, first entry id, the entries' bytes)``, with
        no object made per entry (a bulk reader's path)."""
        began = time.monotonic()
        out = await self._read(start, max_entries, max_bytes)
        if out:
            self._stats.record(sum(len(datas) for _, _, datas in out), time.monotonic() - began)
        return out

    async def _read(self, start: Position, max_entries: int,
                    max_bytes: int | None) -> list[tuple[int, int, list[bytes]]]:
        ledgers = self._ledgers
        out: list[tuple[int, int, list[bytes]]] = []
        count = nbytes = 0
        pos = start
        while count < max_entries:
            found = ledgers.locate(pos)
            if found is None:
                break
            meta, first = found
            lid = meta.ledger_id
            last = min(meta.entries - 1, first + max_entries - count - 1)
            if max_bytes is not None:
                # A fetch takes a few MiB of a cache that may hold 100,000s of
                # entries: slice about what fits (sized by the first entry),
                # not everything up to `last` (the loop takes more if short).
                head = self._cache.get(lid, first, first)
                if head:
                    last = min(last, first + (max_bytes - nbytes) // max(len(head[0]), 1) * 9 // 8 + 8)
            datas = self._cache.get(lid, first, last)
            if not datas:
                cached = self._cache.first_cached(lid)
                if cached is not None and first < cached <= last:
                    last = cached - 1
                try:
                    datas = await self._read_stored(meta, first, last, max_bytes)
                except StorageError:
                    if ledgers.get(lid) is meta:
                        raise
                    pos = Position(lid + 1, 0)  # trimmed while we read: go on after it
                    continue
            if max_bytes is not None:
                # Stop after the entry that reaches max_bytes (one call, not a step per entry).
                keep, total = bytes_within(datas, nbytes, max_bytes)
                if keep <= len(datas):
                    out.append((lid, first, datas if keep == len(datas) else datas[:keep]))
                    return out
                nbytes = total
            out.append((lid, first, datas))
            count += len(datas)
            pos = Position(lid, first + len(datas))
        return out

    async def _read_stored(self, meta: LedgerMeta, first: int, last: int, max_bytes: int | None) -> list[bytes]:
        self._stats.misses += 1
        ledger = meta.ledger
        if ledger is None:
            ledger = await self._open_ledger(meta)
        return await self._backend.read(ledger, first, last, max_bytes)

    async def _open_ledger(self, meta: LedgerMeta) -> LedgerHandle:
        if meta.opening is None:
            meta.opening = asyncio.get_running_loop().create_task(
                self._backend.open_sealed(meta.ledger_id, meta.entries))
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


async def find_first(ledgers: LedgerList, read: Callable[[Position, int], Awaitable[list[Entry]]],
                     predicate: Callable[[Entry], bool]) -> Position | None:
    """Binary search for the first confirmed entry where ``predicate`` is
    True, assuming it is False...False True...True over the log; None if it
    is True nowhere. ``read(position, 1)`` reads one entry."""
    spans, starts = ledgers.spans()
    total = starts[-1]

    def position(k: int) -> Position:
        i = bisect_right(starts, k) - 1
        return Position(spans[i][0], k - starts[i])

    lo, hi = 0, total
    while lo < hi:
        mid = (lo + hi) // 2
        pos = position(mid)
        entries = await read(pos, 1)
        if entries and entries[0].position == pos and predicate(entries[0]):
            hi = mid
        else:  # False here, or trimmed under us: treat as before the answer
            lo = mid + 1
    return position(lo) if lo < total else None
