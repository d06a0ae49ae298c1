"""Ownership: compare-and-set writes of the managed ledger's record, and
noticing that another instance (another broker) took it over, through the
metadata store's watch.

Failure modes: a version conflict or a deleted record fences the managed
ledger (``ManagedLedgerFencedError``, the current ledger refuses further
batches); other metadata errors raise ``StorageError`` and change nothing.

The data path's own check (the fence marker after each fsync) is in
:mod:`.managed_ledger` (``_fenced_on_disk``); this is the metadata side. A
mixin of :class:`~.managed_ledger.ManagedLedger`.
"""
from __future__ import annotations

import json
import logging

from ..metadata.store import BadVersion, MetadataError, KeyNotFound
from .errors import ManagedLedgerFencedError, StorageError
from .ledger_meta import _OPEN, _CLOSING, _FENCED

log = logging.getLogger(__name__)


class Ownership:
    """Metadata writes and ownership checks (mixin; state lives on the ledger)."""

    def _check_not_fenced(self) -> None:
        if self._state is _FENCED:
            raise self._error

    async def _save(self, ledger_docs: list[dict], properties: dict[str, str]) -> None:
        """Compare-and-set the managed ledger's record. Caller holds _meta_lock."""
        value = json.dumps({"ledgers": ledger_docs, "properties": properties}, separators=(",", ":")).encode()
        try:
            self._meta_version = await self._store.put(self._key, value, self._meta_version)
        except (BadVersion, KeyNotFound) as exc:
            error = ManagedLedgerFencedError(f"managed ledger {self.name!r} was changed elsewhere: {exc}")
            self._state = _FENCED
            self._error = error
            if self._current is not None:
                self._current.fence()
            raise error from exc
        except MetadataError as exc:
            raise StorageError(f"writing metadata of {self.name!r} failed: {exc}") from exc

    # ============================================================ ownership

    def _on_metadata_change(self, notification) -> None:
        if notification.key == self._key and self._state in (_OPEN, _CLOSING) and self._owner_check is None:
            self._owner_check = self._loop.create_task(self._check_owner())

    async def _check_owner(self) -> None:
        """Someone else may have written our record (another broker opened
        this managed ledger): if so, stop writing now rather than at our
        next metadata write."""
        try:
            async with self._meta_lock:
                record = await self._store.get(self._key)
                if record is not None and record.version == self._meta_version:
                    return
                if self._state not in (_OPEN, _CLOSING):
                    return
                self._state = _FENCED
                self._error = ManagedLedgerFencedError(
                    f"managed ledger {self.name!r} was taken over or deleted elsewhere")
                log.warning("%s: %s", self.name, self._error)
                if self._current is not None:
                    self._current.fence()  # the writer refuses batches still queued
                self._fail(self._error)
        except MetadataError as exc:
            log.warning("%s: could not check ownership: %s", self.name, exc)
        finally:
            self._owner_check = None
