"""Rolling over: sealing a ledger and recording it closed, with the next one.

The :class:`Roller` does the I/O of a rollover and of a close: it fetches
the next ledger's id ahead of time (so a rollover stalls appends less, and
the managed ledger knows where appends go while one runs), creates the new
ledger, seals the old one through the backend and writes the record (old
ledger closed, or dropped if empty; the new one open) through its managed
ledger (:class:`RolledLedger`), whose compare-and-set fences it on a
conflict. What appends do meanwhile (they wait and are re-issued in order)
and the state the result goes into are the managed ledger's.

Failure modes: a ledger whose index cannot be written is recorded closed
without one (reading it scans the file). If the new ledger cannot be
created or the record cannot be written, :meth:`Roller.roll` deletes the
new ledger and raises (``StorageError``, ``ManagedLedgerFencedError``):
the managed ledger is then failed or fenced.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Protocol

from .backend import LedgerBackend, LedgerHandle
from .errors import StorageError
from .ledger_list import LedgerList
from .ledger_meta import LedgerMeta

log = logging.getLogger(__name__)


class RolledLedger(Protocol):
    """What the roller needs of its managed ledger (``managed_ledger.ManagedLedger``)."""

    name: str
    #: The properties stored with the record.
    _properties: dict[str, str]

    def _check_not_fenced(self) -> None:
        """Raise ``ManagedLedgerFencedError`` if another owner took over."""
        ...

    async def _save(self, ledger_docs: list[dict], properties: dict[str, str]) -> None:
        """Compare-and-set the record (the caller holds its lock)."""
        ...


@dataclass
class Sealed:
    """A ledger sealed and recorded closed (dropped from the record if empty)."""

    entries: int
    size: int
    closed: float


@dataclass
class Rolled(Sealed):
    """:class:`Sealed`, and the new ledger recorded open after it."""

    new_meta: LedgerMeta
    new_handle: LedgerHandle


class Roller:
    """Rollovers and the close-time seal of one managed ledger."""

    def __init__(self, ml: RolledLedger, ledgers: LedgerList, backend: LedgerBackend, lock: asyncio.Lock,
                 new_ledger_id: Callable[[], Awaitable[int]], loop: asyncio.AbstractEventLoop) -> None:
        self._ml = ml
        self._ledgers = ledgers
        self._backend = backend
        self._lock = lock  # the record's
        self._new_ledger_id = new_ledger_id
        self._loop = loop
        #: The next ledger's id, fetched ahead of time; None until fetched.
        self.spare_id: int | None = None
        self._spare_task: asyncio.Task | None = None

    def fetch_ahead(self) -> None:
        """Fetch the next ledger's id in the background (if not under way)."""
        if self._spare_task is None:
            self._spare_task = self._loop.create_task(self._fetch_spare_id())

    async def _fetch_spare_id(self) -> None:
        try:
            if self.spare_id is None:
                self.spare_id = await self._new_ledger_id()
        except StorageError as exc:
            log.warning("%s: could not fetch a ledger id ahead: %s", self._ml.name, exc)
        finally:
            self._spare_task = None

    def stop(self) -> None:
        """Cancel the fetch ahead (close, abandon)."""
        if self._spare_task is not None:
            self._spare_task.cancel()

    async def roll(self, old_meta: LedgerMeta, old: LedgerHandle) -> Rolled:
        """Create the next ledger, seal ``old`` after every batch submitted
        to it, and record both. Raises (see the module docstring)."""
        if self.spare_id is None:
            if self._spare_task is not None:
                await asyncio.shield(self._spare_task)
            if self.spare_id is None:
                self.spare_id = await self._new_ledger_id()
        new_id = self.spare_id
        new_ledger = await self._backend.create(new_id)
        try:
            try:
                entries, size = await self._backend.seal(old)
            except StorageError as exc:
                # Its confirmed entries are durable all the same: record it
                # closed without an index file; reading it scans the file.
                log.warning("%s: %s; closing it without an index", self._ml.name, exc)
                old.fence()
                entries, size = old.entry_count, old.size
            now = time.time()
            new_meta = LedgerMeta(new_id, created=now)
            async with self._lock:
                self._ml._check_not_fenced()
                docs = self._closed_docs(old_meta, entries, size, now)
                docs.append(new_meta.doc())
                await self._ml._save(docs, self._ml._properties)
        except BaseException:
            await self._backend.delete(new_id, new_ledger)
            raise
        self.spare_id = None
        return Rolled(entries, size, now, new_meta, new_ledger)

    async def seal(self, meta: LedgerMeta, handle: LedgerHandle) -> Sealed:
        """Seal the current ledger at close and record it closed (or gone,
        if empty). Raises ``StorageError``."""
        entries, size = await self._backend.seal(handle)
        now = time.time()
        async with self._lock:
            await self._ml._save(self._closed_docs(meta, entries, size, now), self._ml._properties)
        return Sealed(entries, size, now)

    def _closed_docs(self, meta: LedgerMeta, entries: int, size: int, now: float) -> list[dict]:
        docs = self._ledgers.docs(without=(meta,))
        if entries:
            docs.append(LedgerMeta(meta.ledger_id, entries, size, meta.created, now, "closed").doc())
        return docs
