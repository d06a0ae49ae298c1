"""Rollover: sealing the current ledger and moving appends to a new one.

Rolls when the current ledger is full (entries, bytes), old, or failed a
write. Appends issued while a rollover runs wait and are re-issued in order
once the new ledger is installed. A mixin of
:class:`~.managed_ledger.ManagedLedger` (state lives on the ledger); it
imports only lower modules, never :mod:`.managed_ledger`.

Failure modes: a ledger whose index cannot be written is recorded closed
without one (reading it scans the file). If the new ledger cannot be
created or the metadata write fails, the managed ledger is *failed*
(``ManagedLedgerFailedError``) or *fenced* (``ManagedLedgerFencedError``)
and refuses appends until it is closed and opened again.
"""
from __future__ import annotations

import asyncio
import logging
import time

from .errors import ManagedLedgerFailedError, ManagedLedgerFencedError, StorageError
from .backend import LedgerHandle
from . import waiters
from .ledger_meta import _CLOSING, _FAILED, _FENCED, _OPEN, _LedgerMeta

log = logging.getLogger(__name__)


class Rollover:
    """Rolling to a new ledger, its age timer and the spare ledger id (mixin)."""

    def _start_rollover(self) -> None:
        if self._rolling:
            return
        self._flush()  # the old ledger's last entries must reach the writer before its seal
        self._rolling = True
        self._rollover_task = self._loop.create_task(self._rollover())

    async def _rollover(self) -> None:
        old_meta = self._current_meta
        old = self._current
        try:
            if self._spare_id is None:
                if self._spare_task is not None:
                    await asyncio.shield(self._spare_task)
                if self._spare_id is None:
                    self._spare_id = await self._factory._new_ledger_id()
            new_id = self._spare_id
            new_ledger = await self._backend.create(new_id)
            try:
                try:
                    entries, size = await self._backend.seal(old)
                except StorageError as exc:
                    # Its confirmed entries are durable all the same: record it
                    # closed without an index file; reading it scans the file.
                    log.warning("%s: %s; closing it without an index", self.name, exc)
                    old.fence()
                    entries, size = old.entry_count, old.size
                now = time.time()
                new_meta = _LedgerMeta(new_id, created=now)
                async with self._record.lock:
                    self._check_not_fenced()
                    closed = _LedgerMeta(old_meta.ledger_id, entries, size, old_meta.created, now, "closed")
                    docs = self._ledgers.docs(without=(old_meta,))
                    if entries:
                        docs.append(closed.doc())
                    docs.append(new_meta.doc())
                    await self._save(docs, self._properties)
            except BaseException:
                await self._backend.delete(new_id, new_ledger)
                raise
        except BaseException as exc:
            self._rolling = False
            self._rollover_task = None
            self._fail(exc)
            if not isinstance(exc, Exception):
                raise
            return
        old_meta.entries, old_meta.size, old_meta.closed, old_meta.state = entries, size, now, "closed"
        if not entries:
            self._remove_meta(old_meta)
            self._loop.create_task(self._backend.delete(old_meta.ledger_id, old))
        else:
            old_meta.ledger = old
        self._spare_id = None
        self._install(new_meta, new_ledger)
        self._rolling = False
        self._rollover_task = None
        waiting = self._waiting
        self._waiting = []
        for i, (data, waiter) in enumerate(waiting):
            if self._rolling:  # a tiny max_entries_per_ledger can roll again at once
                self._waiting = waiting[i:] + self._waiting
                break
            if waiters.is_pending(waiter):
                self._enqueue(data, waiter)
        self._schedule_trim()
        self._wake_idle()

    def _install(self, meta: _LedgerMeta, ledger: LedgerHandle) -> None:
        meta.ledger = ledger
        self._ledgers.add(meta)
        self._current = ledger
        self._current_meta = meta
        self._next_entry = 0
        self._current_bytes = 0
        if self._age_timer is not None:
            self._age_timer.cancel()
        self._age_timer = self._loop.call_later(self._config.max_ledger_age_s, self._age_check, meta.ledger_id)
        if self._spare_task is None:
            self._spare_task = self._loop.create_task(self._fetch_spare_id())

    async def _fetch_spare_id(self) -> None:
        """Fetch the next ledger's id early: rollover stalls appends less, and
        ``next_position`` knows where appends go while a rollover runs."""
        try:
            if self._spare_id is None:
                self._spare_id = await self._factory._new_ledger_id()
        except StorageError as exc:
            log.warning("%s: could not fetch a ledger id ahead: %s", self.name, exc)
        finally:
            self._spare_task = None

    def _age_check(self, ledger_id: int) -> None:
        self._age_timer = None
        if self._state is not _OPEN or self._current_meta is None or self._current_meta.ledger_id != ledger_id:
            return
        if self._next_entry == 0:  # nothing to seal; look again later
            self._age_timer = self._loop.call_later(self._config.max_ledger_age_s, self._age_check, ledger_id)
        else:
            self._start_rollover()

    def _remove_meta(self, meta: _LedgerMeta) -> None:
        self._ledgers.remove(meta)
        self._cache.drop(meta.ledger_id)

    def _fail(self, exc: BaseException) -> None:
        """Rolling over failed: refuse every append until reopened."""
        if self._state in (_OPEN, _CLOSING):
            if isinstance(exc, ManagedLedgerFencedError):
                self._state = _FENCED
                self._error = exc
            else:
                self._state = _FAILED
                self._error = ManagedLedgerFailedError(f"managed ledger {self.name!r} failed: {exc}")
                log.error("%s: %s", self.name, self._error)
        waiting = self._waiting
        self._waiting = []
        waiters.fail([w for _, w in waiting], self._error or self._refusal())
        self._wake_idle()
