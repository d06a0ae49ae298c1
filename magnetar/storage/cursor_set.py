"""The durable cursors of one managed ledger: open, create, delete, load.

Each durable cursor has its own key below the managed ledger's record
(``<record key>/cursors/<quoted name>``, :func:`~.ledger_meta.cursor_key`).
The :class:`CursorSet` creates them (persisted before they are handed out),
loads them when the managed ledger opens (by range: on etcd a request
per page of cursors), and deletes them. Cursors see
their managed ledger as a :class:`~.cursor.CursorLedger`; this set sees it
as a :class:`CursorOwner` (that, plus its state).

Failure modes: ``StorageError`` when a cursor record cannot be written or
deleted; an unreadable record is logged and skipped at load.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
from typing import Protocol

from ..formats import check_format

from ..metadata.store import MetadataError, MetadataStore, Record
from .cursor import CURSOR_FORMAT, CursorLedger, ManagedCursor
from .errors import ManagedLedgerClosedError, StorageError
from .ledger_meta import OPEN, cursor_key
from .position import Position

#: Cursor records per range read when a managed ledger opens.
CURSORS_PAGE = 64

log = logging.getLogger(__name__)


class CursorOwner(CursorLedger, Protocol):
    """The managed ledger as its cursor set sees it."""

    @property
    def state(self) -> str: ...

    def first_position(self) -> Position | None: ...

    def _refusal(self) -> StorageError: ...

    async def _delete_cursor(self, key: str) -> None: ...


class CursorSet:
    """The durable cursors by name (:attr:`by_name`) and readers' cursors."""

    def __init__(self, ml: CursorOwner, store: MetadataStore, record_key: str,
                 loop: asyncio.AbstractEventLoop) -> None:
        self._ml = ml
        self._store = store
        self._key = record_key
        self._loop = loop
        #: The durable cursors by name (``ManagedLedger.cursors``).
        self.by_name: dict[str, ManagedCursor] = {}
        self._opening: dict[str, asyncio.Task] = {}
        self._non_durable_ids = itertools.count()

    async def open(self, name: str, initial_position: str) -> ManagedCursor:
        """See ``ManagedLedger.open_cursor``."""
        if initial_position not in ("latest", "earliest"):
            raise ValueError(f"initial_position must be 'latest' or 'earliest'; got {initial_position!r}")
        cursor = self.by_name.get(name)
        if cursor is not None:
            return cursor
        task = self._opening.get(name)
        if task is None:
            task = self._loop.create_task(self._create(name, initial_position))
            self._opening[name] = task
            task.add_done_callback(lambda _: self._opening.pop(name, None))
        return await asyncio.shield(task)

    async def _create(self, name: str, initial_position: str) -> ManagedCursor:
        ml = self._ml
        last = ml.last_confirmed
        if initial_position == "latest" and last is not None:
            md = last
        else:
            first = ml.first_position() or ml._next_append_position()
            md = Position(first.ledger_id, -1)
        cursor = ManagedCursor(ml, name, md, key=cursor_key(self._key, name), version=-1)
        cursor._gen += 1
        await cursor._persist()
        if ml.state is not OPEN:
            await cursor._close()
            raise ml._refusal()
        self.by_name[name] = cursor
        return cursor

    async def delete(self, name: str) -> None:
        """Delete the durable cursor ``name`` (no error if it does not exist)."""
        cursor = self.by_name.pop(name, None)
        if cursor is not None:
            await cursor._close(ManagedLedgerClosedError(f"cursor {name!r} was deleted"))
        try:
            await self._ml._delete_cursor(cursor_key(self._key, name))
        except MetadataError as exc:
            raise StorageError(f"deleting cursor {name!r} failed: {exc}") from exc

    def non_durable(self, mark_delete: Position) -> ManagedCursor:
        """An in-memory cursor (for readers), not in :attr:`by_name`."""
        name = f"__non_durable_{next(self._non_durable_ids)}"
        return ManagedCursor(self._ml, name, mark_delete, durable=False)

    async def load(self) -> None:
        """Read every stored cursor (opening the managed ledger): by range
        (``children_records``: on etcd one request per :data:`CURSORS_PAGE`
        cursors, not a listing and a read per cursor; paths below a cursor
        with no record of their own are left out)."""
        base = f"{self._key}/cursors"
        start = ""
        while True:
            page = await self._store.children_records(base, start, CURSORS_PAGE)
            for record in page:
                self._load_one(base, record)
            if len(page) < CURSORS_PAGE:
                return
            start = page[-1].key.rsplit("/", 1)[1] + "\x00"

    def _load_one(self, base: str, record: Record) -> None:
        """Take one stored cursor record into :attr:`by_name` (an unreadable one is logged and left out)."""
        child = record.key.rsplit("/", 1)[1]
        try:
            doc = json.loads(record.value)
        except ValueError as exc:
            log.error("%s: ignoring unreadable cursor record %s: %s", self._ml.name, child, exc)
            return
        # Not ignored when newer (a cursor left out would be made again, over its data): refused.
        check_format("cursor record", f"{base}/{child}", doc.get("format", 1) if isinstance(doc, dict) else 1,
                     CURSOR_FORMAT)
        try:
            cursor = ManagedCursor.from_snapshot(self._ml, doc, key=f"{base}/{child}", version=record.version)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("%s: ignoring unreadable cursor record %s: %s", self._ml.name, child, exc)
            return
        self.by_name[cursor.name] = cursor

    async def close_all(self) -> None:
        """Stop every cursor taking acknowledgements; waits for their persists
        in flight. Idempotent."""
        for cursor in list(self.by_name.values()):
            await cursor._close()
