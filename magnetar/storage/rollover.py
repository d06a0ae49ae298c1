"""Rolling over: sealing a ledger and recording it closed, with the next one.

The :class:`Roller` does the I/O of a rollover and of a close: it fetches
the next ledger's id ahead of time (so a rollover stalls appends less, and
the managed ledger knows where appends go while one runs), creates the new
ledger, seals the old one through the backend and writes the record (old
ledger closed, or dropped if empty; the new one open) through its managed
ledger (:class:`RolledLedger`), whose compare-and-set fences it on a
conflict. When the backend says a rollover is near
(``LedgerHandle.nearly_full``), :meth:`Roller.prepare_ahead` creates the
next ledger ahead; the rollover then takes it (:meth:`Roller.take_prepared`)
and the managed ledger switches appends to it at once, holding their
receipts until the record names it. What appends do meanwhile (switched,
or waiting to be re-issued in order) and the state the result goes into
are the managed ledger's (``append_path``). A ledger prepared and never
used is deleted at close (:meth:`Roller.discard_prepared`). By the time
it exists, the record names it under ``prepared`` (in the background: on
the object backend one etcd transaction writes the record and creates the
ledger's, ``LedgerBackend.create_beside``; on files the record's
compare-and-set comes first): one left by a crash or by an owner taken
over is deleted by the next owner's recovery (:mod:`.recovery`).

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

from .backend import CreateBeside, LedgerBackend, LedgerHandle
from .errors import ManagedLedgerFencedError, StorageError
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

    async def _save(self, ledger_docs: list[dict], properties: dict[str, str],
                    beside: "CreateBeside | None" = None) -> "LedgerHandle | None":
        """Compare-and-set the record, with a ledger's creation ``beside``
        it (its handle returned); the caller holds its lock."""
        ...


@dataclass
class Sealed:
    """A ledger sealed and recorded closed (dropped from the record if empty)."""

    entries: int
    size: int
    closed: float


@dataclass
class Prepared:
    """The next ledger, created ahead and not recorded yet."""

    meta: LedgerMeta
    handle: LedgerHandle


@dataclass
class Rolled(Sealed):
    """:class:`Sealed`, and the new ledger recorded open after it."""

    new_meta: LedgerMeta
    new_handle: LedgerHandle


class Roller:
    """Rollovers and the close-time seal of one managed ledger."""

    def __init__(self, ml: RolledLedger, ledgers: LedgerList, backend: LedgerBackend, lock: asyncio.Lock,
                 new_ledger_id: Callable[[int], Awaitable[int]], loop: asyncio.AbstractEventLoop,
                 prepared_ids: list[int]) -> None:
        self._ml = ml
        #: The record's ``prepared`` ids (``ManagedLedgerRecord.prepared``): written with every save.
        self._prepared_ids = prepared_ids
        self._ledgers = ledgers
        self._backend = backend
        self._lock = lock  # the record's
        self._new_ledger_id = new_ledger_id
        #: The largest id :meth:`_next_id` got.
        self._last_id = 0
        self._loop = loop
        #: The next ledger's id, fetched ahead of time; None until fetched.
        self.spare_id: int | None = None
        self._spare_task: asyncio.Task | None = None
        #: The next ledger, created ahead (:meth:`prepare_ahead`); None until then.
        self.prepared: Prepared | None = None
        self._prepare_task: asyncio.Task | None = None

    def fetch_ahead(self) -> None:
        """Fetch the next ledger's id in the background (if not under way)."""
        if self._spare_task is None:
            self._spare_task = self._loop.create_task(self._fetch_spare_id())

    async def _fetch_spare_id(self) -> None:
        try:
            if self.spare_id is None:
                self.spare_id = await self._next_id()
        except StorageError as exc:
            log.warning("%s: could not fetch a ledger id ahead: %s", self._ml.name, exc)
        finally:
            self._spare_task = None

    def _above(self) -> int:
        """The largest ledger id the managed ledger names (listed or
        prepared): its next ledger's id must be greater (positions are
        ordered by ledger id)."""
        ids = self._ledgers.ids
        return max(ids[-1] if ids else 0, max(self._prepared_ids, default=0), self._last_id)

    async def _next_id(self) -> int:
        """The next ledger's id (see :meth:`_above`); StorageError if none can be had."""
        ledger_id = await self._new_ledger_id(self._above())
        # Also above a ledger switched to and not listed yet (nor prepared any more).
        self._last_id = max(self._last_id, ledger_id)
        return ledger_id

    def prepare_ahead(self) -> None:
        """Create the next ledger in the background (if not done or under
        way), so that the rollover can switch appends to it at once
        (:meth:`take_prepared`). A failure is logged: the rollover then
        creates it as usual."""
        if self.prepared is None and self._prepare_task is None:
            self._prepare_task = self._loop.create_task(self._prepare())

    async def _prepare(self) -> None:
        try:
            if self.spare_id is None and self._spare_task is not None:
                await asyncio.shield(self._spare_task)
            if self.spare_id is None:
                self.spare_id = await self._next_id()
            ledger_id = self.spare_id
            handle = await self._name_prepared(ledger_id)
            self.spare_id = None
            self.prepared = Prepared(LedgerMeta(ledger_id, created=time.time()), handle)
        except StorageError as exc:
            log.warning("%s: could not create the next ledger ahead: %s", self._ml.name, exc)
        finally:
            self._prepare_task = None

    async def _name_prepared(self, ledger_id: int) -> LedgerHandle:
        """Create ledger ``ledger_id`` with the record naming it prepared:
        from then until a rollover names it among the ledgers, a crash
        leaves it to the next owner's recovery. A backend with a ledger
        record in the metadata store creates it in the record's own
        transaction (``LedgerBackend.create_beside``: one etcd write, not
        two); otherwise the record is written first, then the ledger made.
        Raises what the record's save raises (the ledger is then not
        created, or, its outcome unknown, left named as prepared)."""
        beside = await self._backend.create_beside(ledger_id)
        async with self._lock:
            self._ml._check_not_fenced()
            self._prepared_ids.append(ledger_id)
            try:
                handle = await self._ml._save(self._ledgers.docs(), self._ml._properties, beside)
            except ManagedLedgerFencedError:
                self._prepared_ids.remove(ledger_id)  # nothing written
                raise
            except BaseException:
                if beside is None:
                    self._prepared_ids.remove(ledger_id)
                else:
                    # The transaction may have created it (unknown outcome,
                    # cancelled): still named, a later recovery deletes it;
                    # the next ledger gets another id.
                    self.spare_id = None
                raise
        return handle if beside is not None else await self._backend.create(ledger_id)

    def take_prepared(self) -> "Prepared | None":
        """The ledger created ahead, now the caller's (None: none ready)."""
        prepared, self.prepared = self.prepared, None
        return prepared

    def stop(self) -> None:
        """Cancel the fetch and the creation ahead (close, abandon)."""
        if self._spare_task is not None:
            self._spare_task.cancel()
        if self._prepare_task is not None:
            self._prepare_task.cancel()

    async def discard_prepared(self) -> None:
        """Delete the ledger created ahead and never used (close): no
        managed ledger names it. Failures are logged (it stays as an
        orphan record)."""
        if self._prepare_task is not None:
            await asyncio.gather(asyncio.shield(self._prepare_task), return_exceptions=True)
        prepared = self.take_prepared()
        if prepared is not None:
            try:
                await self._backend.delete(prepared.meta.ledger_id, prepared.handle)
            except StorageError as exc:
                log.warning("%s: could not delete ledger %d, created ahead and not used (the next "
                            "owner's recovery does): %s", self._ml.name, prepared.meta.ledger_id, exc)
                return
            if prepared.meta.ledger_id in self._prepared_ids:
                self._prepared_ids.remove(prepared.meta.ledger_id)  # the next save forgets it

    async def roll(self, old_meta: LedgerMeta, old: LedgerHandle, prepared: "Prepared | None" = None) -> Rolled:
        """Seal ``old`` after every batch submitted to it and record it
        closed with the next ledger open: ``prepared`` (created ahead, its
        appends already switched to it by the caller) or one created now.
        Raises (see the module docstring); the next ledger is then deleted."""
        if prepared is None and self._prepare_task is not None:
            await asyncio.shield(self._prepare_task)  # never create the same id twice
        if prepared is None:
            prepared = self.take_prepared()
        if prepared is not None:
            new_id, new_ledger = prepared.meta.ledger_id, prepared.handle
            self.spare_id = new_id  # where parked appends go (``AppendPath.next_append_position``)
        else:
            if self.spare_id is None:
                if self._spare_task is not None:
                    await asyncio.shield(self._spare_task)
                if self.spare_id is None:
                    self.spare_id = await self._next_id()
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
            new_meta = prepared.meta if prepared is not None else LedgerMeta(new_id, created=now)
            async with self._lock:
                self._ml._check_not_fenced()
                docs = self._closed_docs(old_meta, entries, size, now)
                docs.append(new_meta.doc())
                if new_id in self._prepared_ids:
                    self._prepared_ids.remove(new_id)  # named among the ledgers from this save on
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
