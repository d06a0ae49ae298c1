"""A managed ledger's record in the metadata store, written by compare-and-set.

Layout (JSON):

- ``/managed-ledgers/<name>``: ``{"format": 1, "ledgers": [{"id", "entries",
  "size", "created", "closed", "state"}...], "properties": {...}}`` (no
  ``format``: 1; a newer one is refused with NewerFormatError before
  anything is written). ``entries`` and
  ``size`` are final for closed ledgers; the open ledger's are recovered
  from its file. ``prepared`` (optional): ids of ledgers this managed
  ledger created ahead and no ``ledgers`` entry names yet; a recovery
  deletes them (:mod:`.recovery`: the prepared-ledger sweep).
  ``highest_id`` (optional): the largest ledger id the record ever named,
  written while no ledger or prepared id it names now is that large (an
  empty ledger dropped at close). Cursors keep naming such a ledger
  (``(id, -1)``), so the next owner's ledger must be above it: ledger ids
  come from per-broker blocks (:mod:`.ledger_ids`), not one growing counter.
- ``/managed-ledgers/<name>/cursors/<quoted name>``: one cursor (see
  :mod:`.cursor`); the name is percent-encoded with no safe characters, so
  any name maps to one key segment.

Ownership: every metadata write is a compare-and-set against the version
this instance last read or wrote; a cursor's writes are too
(:meth:`ManagedLedgerRecord.put_beside`: one transaction compares the record
*and* the cursor's key). A new owner's recovery always writes the record, so
an owner that was paused past its session cannot write a cursor the new
owner already loaded. A conflict, or a watch notification that
someone else wrote the record, means another instance (another broker) took
the managed ledger over: this instance is *fenced* and appends fail with
``ManagedLedgerFencedError`` from then on. The record knows nothing of
the managed ledger's state: it reports what it found (a conflict, a
change), the managed ledger decides.

Failure modes: :meth:`ManagedLedgerRecord.save` raises
``ManagedLedgerFencedError`` on a version conflict or a deleted record (the
caller then stops writing) and ``StorageError`` on other metadata errors
(nothing changed); :meth:`load` and :meth:`changed_elsewhere` let
``MetadataError`` through.
"""
from __future__ import annotations

import asyncio
import json
from typing import Callable

from ..metadata.store import (BadVersion, Compare, Delete, KeyNotFound, MetadataError, MetadataStore, Put,
                              TransactionFailed)
from .backend import CreateBeside, LedgerHandle
from .errors import ManagedLedgerFencedError, StorageError
from ..formats import check_format
from .ledger_meta import ROOT, LedgerMeta

#: The record's format (its ``format`` field; a record without one is format 1).
FORMAT = 1


class ManagedLedgerRecord:
    """The record of the managed ledger ``name`` in ``store``.

    ``lock`` serialises the writers of this instance (rollover, trimming,
    properties, close, the ownership check): hold it across a read of the
    in-memory ledger list and the :meth:`save` that follows.
    """

    def __init__(self, store: MetadataStore, name: str) -> None:
        self.store = store
        self.name = name
        self.key = f"{ROOT}/{name}"
        #: The version last read or written; -1: the record does not exist yet.
        self.version = -1
        #: Ledgers created ahead and not named by ``ledgers`` yet: every
        #: :meth:`save` writes them as ``prepared`` (the roller adds and removes them).
        self.prepared: list[int] = []
        #: The ``prepared`` ids :meth:`load` found (a previous owner's).
        self.found_prepared: list[int] = []
        #: The largest ledger id any version of the record this instance
        #: read or wrote named (``highest_id`` in the module docstring).
        self.highest_id = 0
        self.lock = asyncio.Lock()
        self._watch = None
        #: The highest version a notification named (-1: none yet), and
        #: whether one was a deletion: what :meth:`heard_unknown_change` weighs.
        self._heard_version = -1
        self._heard_deletion = False

    async def load(self) -> tuple[list[LedgerMeta], dict[str, str]]:
        """The ledgers and properties stored (none for a new managed ledger);
        remembers the version for the next :meth:`save`."""
        record = await self.store.get(self.key)
        if record is None:
            return [], {}
        doc = json.loads(record.value)
        check_format("managed ledger record", self.key, doc.get("format", 1), FORMAT)
        self.version = record.version
        self.found_prepared = [int(i) for i in doc.get("prepared", [])]
        metas = [LedgerMeta.from_doc(d) for d in doc.get("ledgers", [])]
        self.highest_id = max([int(doc.get("highest_id", 0)), *self.found_prepared, *(m.ledger_id for m in metas)])
        return metas, dict(doc.get("properties", {}))

    async def save(self, ledger_docs: list[dict], properties: dict[str, str],
                   beside: CreateBeside | None = None) -> LedgerHandle | None:
        """Compare-and-set the record. Caller holds :attr:`lock`.

        ``beside``: a ledger's creation (``LedgerBackend.create_beside``)
        applied in the same transaction; its handle is returned. A ledger
        record already there raises ``StorageError`` (nothing written)."""
        doc = {"format": FORMAT, "ledgers": ledger_docs, "properties": properties}
        if self.prepared:
            doc["prepared"] = list(self.prepared)
        named = max([0, *self.prepared, *(int(d["id"]) for d in ledger_docs)])
        highest = max(self.highest_id, named)
        if highest > named:
            doc["highest_id"] = highest
        value = json.dumps(doc, separators=(",", ":")).encode()
        try:
            if beside is None:
                self.version = await self.store.put(self.key, value, self.version)
                self.highest_id = highest
                return None
            versions = await self.store.transaction([Compare(self.key, self.version), *beside.compares],
                                                    [Put(self.key, value), *beside.writes])
        except TransactionFailed as exc:  # before BadVersion, its base
            if self.key in exc.keys:
                raise ManagedLedgerFencedError(
                    f"managed ledger {self.name!r} was changed elsewhere: {exc}") from exc
            raise StorageError(f"writing metadata of {self.name!r} failed: {exc} (two writers?)") from exc
        except (BadVersion, KeyNotFound) as exc:
            raise ManagedLedgerFencedError(f"managed ledger {self.name!r} was changed elsewhere: {exc}") from exc
        except MetadataError as exc:
            raise StorageError(f"writing metadata of {self.name!r} failed: {exc}") from exc
        self.highest_id = highest
        self.version = versions[0]
        return beside.finish(versions[1:])

    async def put_beside(self, key: str, value: bytes, version: int) -> int:
        """Compare-and-set ``key`` (a cursor of this managed ledger; ``version``
        -1: it must not exist yet), only while the record is at the version
        this instance last read or wrote; its new version. Takes :attr:`lock`.

        Raises ``ManagedLedgerFencedError`` if the record changed (another
        owner opened the managed ledger since), ``BadVersion`` if only
        ``key`` did, ``MetadataError`` if the store fails.
        """
        async with self.lock:
            compares = [Compare(self.key, self.version), Compare(key, version)]
            try:
                (new_version,) = await self.store.transaction(compares, [Put(key, value)])
            except TransactionFailed as exc:
                self._raise_if_taken(exc)
                raise
            return new_version

    async def delete_beside(self, key: str) -> None:
        """Delete ``key`` (if it exists) while the record is ours, as :meth:`put_beside`."""
        async with self.lock:
            try:
                await self.store.transaction([Compare(self.key, self.version)], [Delete(key)])
            except TransactionFailed as exc:
                self._raise_if_taken(exc)
                raise

    def _raise_if_taken(self, exc: TransactionFailed) -> None:
        if self.key in exc.keys:
            raise ManagedLedgerFencedError(
                f"managed ledger {self.name!r} was opened elsewhere (its record moved on)") from exc

    async def changed_elsewhere(self) -> bool:
        """Whether someone else wrote or deleted the record since our last
        read or write. Caller holds :attr:`lock`."""
        record = await self.store.get(self.key)
        return record is None or record.version != self.version

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change()`` when the record is written or deleted by
        someone else. A write's notification naming a version at or below
        the one this instance last wrote or read is known already (its own
        write coming back, or one it read since: this instance's version
        moves only by reading the record or by a compare-and-set on the
        version it held), so it is left out: each would cost the caller a
        read of the record (two per rollover). One that comes before its
        write's answer, or a deletion (no version: a key deleted and
        written again restarts its versions), is passed on: the caller's
        check weighs it under :attr:`lock` (:meth:`heard_unknown_change`)
        and reads the record only if it is still unknown then."""
        key = self.key

        def notified(notification) -> None:
            if notification.key != key:
                return
            version = notification.version
            if version is None:
                self._heard_deletion = True
            elif version <= self.version:
                return
            else:
                self._heard_version = max(self._heard_version, version)
            on_change()

        self._watch = self.store.watch(key, notified)

    def heard_unknown_change(self) -> bool:
        """Whether the watch told of a write this instance does not know
        (a version above the one it holds) or of a deletion. False when
        every notification so far named a version at or below it: an own
        write whose notification came before its answer. Caller holds
        :attr:`lock` (no save under way: the version is final)."""
        return self._heard_deletion or self._heard_version > self.version

    def stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
