"""Trimming: deleting consumed ledgers that retention lets go.

A mixin of :class:`~.managed_ledger.ManagedLedger` (the rules are in that
module's docstring, "Trimming"): it runs in the background after a cursor
persists a new mark-delete position, after rollover, after a cursor is
deleted, and when retention time next lets a ledger go. Failures are logged
and retried at the next trigger; trimming never fails an append.
"""
from __future__ import annotations

import logging
import math
import time

from .errors import (
    StorageError,
)
from .position import Position

from .ledger_meta import _OPEN, _LedgerMeta

log = logging.getLogger(__name__)


class Trimming:
    """Trimming and retention of a managed ledger (mixin; state lives on the ledger)."""

    # ============================================================== trimming

    def _cursor_moved(self, mark_delete: Position) -> None:
        """A durable cursor persisted a new mark-delete position."""
        for meta in self._ledgers:
            if meta.state == "closed" and Position(meta.ledger_id, meta.entries - 1) <= mark_delete:
                self._schedule_trim()
            return

    def _schedule_trim(self) -> None:
        if self._state is not _OPEN:
            return
        if self._trim_task is None:
            self._trim_task = self._loop.create_task(self._trim_loop())
        else:
            self._trim_again = True

    async def _trim_loop(self) -> None:
        try:
            while True:
                self._trim_again = False
                await self._trim_once()
                if not self._trim_again or self._state is not _OPEN:
                    break
        except StorageError as exc:
            log.warning("%s: trimming failed: %s", self.name, exc)
        except Exception:
            log.exception("%s: trimming failed", self.name)
        finally:
            self._trim_task = None

    def _trimmable(self) -> list[_LedgerMeta]:
        """Closed ledgers at the head that every durable cursor has consumed
        and retention lets go. Arms a timer if retention time is what holds
        the next one back."""
        if not self.cursors:
            return []
        slowest = min(c._persisted_mark_delete for c in self.cursors.values())
        now = time.time()
        remaining = self.total_size
        # The ledger holding the last confirmed entry is always kept: the last
        # entry must stay readable (upper layers recover state from it, e.g.
        # the broker's upcoming topic offset), even after a restart leaves an
        # empty current ledger behind it.
        last = self.last_confirmed
        victims = []
        for meta in self._ledgers:
            if meta.state != "closed" or meta is self._current_meta:
                break
            if last is not None and meta.ledger_id == last.ledger_id:
                break
            if meta.entries and Position(meta.ledger_id, meta.entries - 1) > slowest:
                break
            if meta.entries and self._retained(meta, now, remaining):
                break
            victims.append(meta)
            remaining -= meta.size
        return victims

    def _retained(self, meta: _LedgerMeta, now: float, remaining: int) -> bool:
        """Whether retention keeps the consumed ledger ``meta`` (``remaining``:
        the managed ledger's size counting it). Arms the trim timer when its
        age is what keeps it."""
        policy = self._retention
        if policy is None:  # StorageConfig: kept while young enough OR small enough
            time_s, size, either = self._config.retention_time_s, self._config.retention_size_bytes, False
        else:  # RetentionPolicy (Pulsar): kept while young enough AND small enough
            time_s, size, either = policy.time_s, policy.size_bytes, True
        ripe_at = (meta.closed or meta.created) + time_s
        young = now < ripe_at
        small = not remaining > size
        kept = (young and small) if either else (young or small)
        if kept and young and ripe_at != math.inf:
            self._arm_trim_timer(ripe_at - now)
        return kept

    def _arm_trim_timer(self, delay: float) -> None:
        if self._trim_timer is not None:
            self._trim_timer.cancel()
        self._trim_timer = self._loop.call_later(delay + 0.01, self._schedule_trim)

    async def _trim_once(self) -> None:
        if not self._trimmable():
            return
        async with self._record.lock:
            if self._state is not _OPEN:
                return
            victims = self._trimmable()
            if not victims:
                return
            gone = {m.ledger_id for m in victims}
            await self._save(self._ledgers.docs(without=gone), self._properties)
            for meta in victims:
                self._remove_meta(meta)
        log.info("%s: trimmed ledgers %s", self.name, sorted(gone))
        for meta in victims:
            await self._backend.delete(meta.ledger_id, meta.ledger)
