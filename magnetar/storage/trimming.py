"""Trimming: deleting consumed ledgers that retention lets go.

A closed ledger is deleted (metadata first, then its files) when
there is at least one durable cursor, every durable cursor's *persisted*
mark-delete position is at or past its last entry, it was closed at least
``retention_time_s`` ago, and the managed ledger's size counting it exceeds
``retention_size_bytes`` (as in Pulsar, so what remains may be smaller than
that). Ledgers go oldest first, never skipping one. Trimming runs in the
background after a cursor persists a new mark-delete, after rollover, after
a cursor is deleted, and when retention time next lets a ledger go. With no
durable cursor nothing is trimmed; non-durable cursors never hold data.

The :class:`Trimmer` reads the managed ledger's :class:`~.ledger_list.LedgerList` and
cursors, and removes ledgers through the managed ledger
(:class:`TrimmedLedger`: the record's write, then the list), then deletes
their bytes through the backend.

Failure modes: failures are logged and retried at the next trigger;
trimming never fails an append.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, Protocol

from .backend import LedgerBackend
from .config import RetentionPolicy, StorageConfig
from .errors import StorageError
from .ledger_list import LedgerList
from .ledger_meta import OPEN, LedgerMeta
from .position import Position

log = logging.getLogger(__name__)


class TrimmedLedger(Protocol):
    """What the trimmer needs of its managed ledger (``managed_ledger.ManagedLedger``)."""

    name: str
    #: Durable cursors by name; each has ``_persisted_mark_delete``.
    cursors: dict[str, Any]

    @property
    def state(self) -> str: ...

    @property
    def last_confirmed(self) -> Position | None: ...

    def _is_current(self, meta: LedgerMeta) -> bool: ...

    async def _forget_ledgers(self, victims: list[LedgerMeta]) -> None:
        """Record the ledgers gone, then drop them from the list (the caller
        holds the record's lock). Raises ``StorageError``."""
        ...


class Trimmer:
    """Trimming of one managed ledger, with its retention override
    (:attr:`retention`; None: the rule of ``config``)."""

    def __init__(self, ml: TrimmedLedger, ledgers: LedgerList, config: StorageConfig,
                 backend: LedgerBackend, lock: asyncio.Lock, loop: asyncio.AbstractEventLoop) -> None:
        self._ml = ml
        self._lock = lock  # the record's: the list read and the record written together
        self._ledgers = ledgers
        self._config = config
        self._backend = backend
        self._loop = loop
        self.retention: RetentionPolicy | None = None
        self._task: asyncio.Task | None = None
        self._again = False
        self._timer: asyncio.TimerHandle | None = None

    def cursor_moved(self, mark_delete: Position) -> None:
        """A durable cursor persisted a new mark-delete position."""
        for meta in self._ledgers:
            if meta.state == "closed" and Position(meta.ledger_id, meta.entries - 1) <= mark_delete:
                self.schedule()
            return

    def schedule(self) -> None:
        """Trim soon, in the background (once more if a round is running)."""
        if self._ml.state is not OPEN:
            return
        if self._task is None:
            self._task = self._loop.create_task(self._rounds())
        else:
            self._again = True

    async def stop(self) -> None:
        """Cancel the timer and wait for the round running (a clean close)."""
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            try:
                await self._task
            except Exception:
                pass

    def abandon(self) -> None:
        """Stop dead (a crash)."""
        if self._task is not None:
            self._task.cancel()
        if self._timer is not None:
            self._timer.cancel()

    async def _rounds(self) -> None:
        try:
            while True:
                self._again = False
                await self._trim_once()
                if not self._again or self._ml.state is not OPEN:
                    break
        except StorageError as exc:
            log.warning("%s: trimming failed: %s", self._ml.name, exc)
        except Exception:
            log.exception("%s: trimming failed", self._ml.name)
        finally:
            self._task = None

    def trimmable(self) -> list[LedgerMeta]:
        """Closed ledgers at the head that every durable cursor has consumed
        and retention lets go. Arms a timer if retention time is what holds
        the next one back."""
        ml = self._ml
        if not ml.cursors:
            return []
        slowest = min(c._persisted_mark_delete for c in ml.cursors.values())
        now = time.time()
        remaining = self._ledgers.total_size
        # The ledger holding the last confirmed entry is always kept: the last
        # entry must stay readable (upper layers recover state from it, e.g.
        # the broker's upcoming topic offset), even after a restart leaves an
        # empty current ledger behind it.
        last = ml.last_confirmed
        victims = []
        for meta in self._ledgers:
            if meta.state != "closed" or ml._is_current(meta):
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

    def _retained(self, meta: LedgerMeta, now: float, remaining: int) -> bool:
        """Whether retention keeps the consumed ledger ``meta`` (``remaining``:
        the managed ledger's size counting it). Arms the trim timer when its
        age is what keeps it."""
        policy = self.retention
        if policy is None:  # StorageConfig: kept while young enough OR small enough
            time_s, size, either = self._config.retention_time_s, self._config.retention_size_bytes, False
        else:  # RetentionPolicy (Pulsar): kept while young enough AND small enough
            time_s, size, either = policy.time_s, policy.size_bytes, True
        ripe_at = (meta.closed or meta.created) + time_s
        young = now < ripe_at
        small = not remaining > size
        kept = (young and small) if either else (young or small)
        if kept and young and ripe_at != math.inf:
            self._arm_timer(ripe_at - now)
        return kept

    def _arm_timer(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(delay + 0.01, self.schedule)

    async def _trim_once(self) -> None:
        if not self.trimmable():
            return
        async with self._lock:
            if self._ml.state is not OPEN:
                return
            victims = self.trimmable()
            if not victims:
                return
            await self._ml._forget_ledgers(victims)
        log.info("%s: trimmed ledgers %s", self._ml.name, sorted(m.ledger_id for m in victims))
        for meta in victims:
            await self._backend.delete(meta.ledger_id, meta.ledger)
