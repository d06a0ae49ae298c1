"""Closing a managed ledger: waiting for appends in flight, sealing the open
ledger, persisting cursors; and abandoning one (tests, a failed factory).

A mixin of :class:`~.managed_ledger.ManagedLedger`.
"""
from __future__ import annotations

import logging
import time


from . import waiters
from .ledger_meta import _OPEN, _CLOSING, _CLOSED, _LedgerMeta

log = logging.getLogger(__name__)


class Closing:
    """Close and abandon (mixin; state lives on the ledger)."""

    # ================================================================= close

    def _wake_idle(self) -> None:
        if self._idle_waiters and not self._inflight and not self._rolling and not self._buf:
            waiters, self._idle_waiters = self._idle_waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def close_cursors(self) -> None:
        """Stop every cursor taking acknowledgements; waits for their persists
        in flight. Idempotent."""
        for cursor in list(self.cursors.values()):
            await cursor._close()

    async def _wait_idle(self) -> None:
        while self._inflight or self._rolling or self._buf:
            self._flush()
            fut = self._loop.create_future()
            self._idle_waiters.append(fut)
            self._wake_idle()
            await fut

    async def close(self, *, keep_cursors: bool = False) -> None:
        """Finish pending appends, seal the current ledger, record it closed.

        Appends issued after ``close()`` was called fail with
        ``ManagedLedgerClosedError``. Idempotent. A fenced or failed managed
        ledger just releases its files. With ``keep_cursors`` the durable
        cursors stay open and keep persisting acknowledgements (a topic moving
        to another broker takes the acks its clients send until they are told
        where it went) until :meth:`close_cursors`.
        """
        if self._state in (_CLOSED, _CLOSING):
            while self._state is _CLOSING:
                await self._wait_closed()
            return
        clean = self._state is _OPEN
        if clean:
            self._state = _CLOSING
        try:
            await self._wait_idle()
        except Exception:
            clean = False
        if self._age_timer is not None:
            self._age_timer.cancel()
        if self._spare_task is not None:
            self._spare_task.cancel()
        await self._trimmer.stop()
        if not keep_cursors:
            await self.close_cursors()
        if (clean and self._state is _CLOSING and self._current is not None
                and await self._backend.taken_over(self._current.ledger_id)):
            # A new owner took the managed ledger over (this broker's session
            # lapsed before it heard): that owner recovers and seals this
            # ledger and owns the metadata, whose compare-and-set would refuse
            # ours anyway. Nothing to do, and nothing wrong.
            log.info("%s: ledger %d was fenced by a new owner, which seals it", self.name,
                     self._current.ledger_id)
            clean = False
        if clean and self._state is _CLOSING and self._current is not None:
            try:
                await self._seal_current()
            except Exception as exc:
                log.error("%s: close could not seal ledger: %s", self.name, exc)
        for meta in self._ledgers:
            if meta.ledger is not None:
                meta.ledger.close()
        if self._current is not None:
            self._current.close()
        self._cache.clear()
        self._record.stop_watching()
        if self._state in (_OPEN, _CLOSING):
            self._state = _CLOSED
        self._factory._forget(self)
        for fut in self._idle_waiters:
            if not fut.done():
                fut.set_result(None)

    def _abandon(self) -> None:
        """Stop dead, as a crash would (see ``ManagedLedgerFactory.abandon``):
        pending appends are cancelled, nothing is written."""
        self._state = _CLOSED
        self._record.stop_watching()
        pending = [f for b in self._inflight for f in b.futures]
        pending += self._buf_futures + [f for _, f in self._waiting]
        self._buf, self._buf_futures, self._waiting = [], [], []
        self._inflight.clear()
        waiters.abandon(pending)
        for task in (self._rollover_task, self._spare_task):
            if task is not None:
                task.cancel()
        self._trimmer.abandon()
        if self._age_timer is not None:
            self._age_timer.cancel()
        for meta in self._ledgers:
            if meta.ledger is not None:
                meta.ledger.close()
        if self._current is not None:
            self._current.close()

    async def _wait_closed(self) -> None:
        fut = self._loop.create_future()
        self._idle_waiters.append(fut)
        await fut

    async def _seal_current(self) -> None:
        meta = self._current_meta
        entries, size = await self._backend.seal(self._current)
        now = time.time()
        async with self._record.lock:
            docs = self._ledgers.docs(without=(meta,))
            if entries:
                docs.append(_LedgerMeta(meta.ledger_id, entries, size, meta.created, now, "closed").doc())
            await self._save(docs, self._properties)
        meta.entries, meta.size, meta.closed, meta.state = entries, size, now, "closed"
        if not entries:
            self._remove_meta(meta)
            await self._backend.delete(meta.ledger_id, self._current)
