"""The append path of a managed ledger: the current ledger, the appends
headed to it, and the moves to the next one.

Appends get their position in call order (:meth:`AppendPath.append_then`:
the broker's per-entry path), are handed to the backend once per loop
iteration (one batch, :meth:`take`, by the factory's :class:`~.flush_pass.FlushPass`
together with every other ledger's), and are told, in order, once their
batch is durable (:mod:`.waiters`). When the current ledger is full, old or
failed a write, the path rolls to a new one (the I/O is the
:class:`~.rollover.Roller`'s). If the next ledger was created ahead (the
backend said the rollover was near), appends switch to it at once: they
are written, and their receipts wait until the rollover has recorded the
ledger (then go out in order; if the rollover fails, they fail). Otherwise
appends issued meanwhile wait and are re-issued in order once the new
ledger is installed. It holds the managed
ledger's state (``open``, ``closing``, ``closed``, ``fenced``, ``failed``)
and its last confirmed position, which the managed ledger reads.

Write failures: if a write or fsync fails, the failed append and every
append issued before the failure became known (in any ledger of this
managed ledger) fail with ``StorageError``, in order. The failed ledger is
sealed at its last durable entry and appends issued afterwards go to a new
ledger, so no entry is ever reported durable after a failed one in the same
ledger, and a failure is always a contiguous block of appends. If the roll
to a new ledger fails too, the managed ledger is *failed*: every append
fails until it is closed and opened again. A batch the backend refuses with
``ManagedLedgerFencedError`` (a new owner fenced the ledger) fails every
unacknowledged append and fences the managed ledger.

A batch in flight is an :class:`~.append_batch.AppendBatch`, its own
backend callback (:meth:`AppendPath.on_written`).
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from typing import Callable

from . import waiters
from .append_batch import AppendBatch
from .backend import LedgerBackend, LedgerHandle
from .cache import TailCache
from .config import StorageConfig
from .flush_pass import FlushPass
from .errors import ManagedLedgerClosedError, ManagedLedgerFailedError, ManagedLedgerFencedError, StorageError
from .framing import HEADER_SIZE, MAX_ENTRY_SIZE
from .ledger_list import LedgerList
from .ledger_meta import CLOSED, CLOSING, FAILED, FENCED, OPEN, LedgerMeta
from .listeners import EntryListeners
from .position import Position
from .rollover import Roller
from .untracked import untrack_atoms
from .waiters import Waiter

from .write_stats import WriteStats

log = logging.getLogger(__name__)


def _failed_future(loop, exc: BaseException) -> asyncio.Future:
    fut = loop.create_future()
    fut.set_exception(exc)
    return fut


class AppendPath:
    """The append path of the managed ledger ``name``, handed its
    collaborators; ``after_rollover()`` is called once a new ledger is
    installed (trimming may follow)."""

    def __init__(self, name: str, config: StorageConfig, backend: LedgerBackend, ledgers: LedgerList,
                 cache: TailCache, roller: Roller, listeners: EntryListeners, write_stats: WriteStats,
                 after_rollover: Callable[[], None], loop: asyncio.AbstractEventLoop,
                 flushes: FlushPass | None = None) -> None:
        self.name = name
        #: Hands the buffer to the backend once per loop pass, with the other ledgers' (shared per factory).
        self._flushes = flushes or FlushPass(backend, loop)
        self._config = config
        self._backend = backend
        self._ledgers = ledgers
        self._cache = cache
        self._roller = roller
        self._listeners = listeners
        self.write_stats = write_stats
        self._after_rollover = after_rollover
        self._loop = loop
        #: ``open``, ``closing``, ``closed``, ``fenced`` or ``failed``.
        self.state = OPEN
        #: Why appends are refused (fenced, failed); None otherwise.
        self.error: StorageError | None = None
        #: Called once when this instance learns another owner took over
        #: (set by the managed ledger; must not raise).
        self.on_fenced: Callable[[StorageError], None] = lambda error: None
        # The last durable entry (``last_confirmed``): its ids, set per
        # completed batch (two ints, not a tuple: a tuple per batch lived
        # until the next, 10,000 of them for each middle-generation
        # collection to walk at 10,000 written topics), and its Position,
        # made once asked for.
        self._confirmed_ledger: int | None = None
        self._confirmed_entry = -1
        self._confirmed: Position | None = None
        # The current ledger, appends not yet handed to the backend (_buf),
        # batches handed over and not completed (_inflight), and appends
        # waiting for a rollover to finish (_waiting).
        self.current: LedgerHandle | None = None
        #: The storage profile of its namespace (None: the backend's default), given to each ledger installed.
        self.storage_profile: str | None = None
        self.current_meta: LedgerMeta | None = None
        self._next_entry = 0
        self._current_bytes = 0
        self._buf: list[bytes] = []
        self._buf_futures: list[Waiter] = []  # the waiters of _buf's entries
        self._flush_scheduled = False
        self._inflight: collections.deque[AppendBatch] = collections.deque()
        self._waiting: list[tuple[bytes, Waiter]] = []
        self._rolling = False  # a rollover is under way
        self._parked = False  # ... and appends wait for it (no ledger was prepared ahead)
        #: The ledger appends were switched to before the record names it
        #: (a rollover onto a ledger prepared ahead): its receipts wait.
        self._unrecorded: LedgerMeta | None = None
        self._held: list[tuple[AppendBatch, BaseException | None]] = []  # its batches written meanwhile
        self._switched_from: tuple[LedgerMeta, int] | None = None  # the ledger being sealed, its appends
        self._rollover_task: asyncio.Task | None = None
        self._age_timer: asyncio.TimerHandle | None = None
        self._max_entries = config.max_entries_per_ledger
        self._max_bytes = config.max_ledger_bytes
        self._idle_waiters: list[asyncio.Future] = []

    @property
    def last_confirmed(self) -> Position | None:
        """The last durable entry; None if no entry is stored."""
        pos = self._confirmed
        if pos is None and self._confirmed_ledger is not None:
            pos = self._confirmed = Position(self._confirmed_ledger, self._confirmed_entry)
        return pos

    @last_confirmed.setter
    def last_confirmed(self, pos: Position | None) -> None:
        self._confirmed = pos
        self._confirmed_ledger = None if pos is None else pos.ledger_id
        self._confirmed_entry = -1 if pos is None else pos.entry_id

    def fence(self, error: ManagedLedgerFencedError) -> None:
        """Another owner took over: refuse appends, and the current ledger
        refuses batches still queued. The first time, :attr:`on_fenced` hears it."""
        first = self.state is not FENCED
        self.state = FENCED
        self.error = error
        if self.current is not None:
            self.current.fence()
        if first:
            self.on_fenced(error)

    @property
    def appended_to_current(self) -> int:
        """Appends given positions in the current ledger (durable or not)."""
        return self._next_entry

    def stop_timer(self) -> None:
        if self._age_timer is not None:
            self._age_timer.cancel()

    def close_handles(self) -> None:
        for meta in self._ledgers:
            if meta.ledger is not None:
                meta.ledger.close()
        if self.current is not None:
            self.current.close()

    def closed(self) -> None:
        """The managed ledger is closed: anyone waiting for it hears."""
        if self.state in (OPEN, CLOSING):
            self.state = CLOSED
        for fut in self._idle_waiters:
            if not fut.done():
                fut.set_result(None)

    def abandon(self) -> None:
        """Stop dead, as a crash would: pending appends are cancelled."""
        self.state = CLOSED
        pending = [f for b in self._inflight for f in b.futures]
        pending += self._buf_futures + [f for _, f in self._waiting]
        self._buf, self._buf_futures, self._waiting = [], [], []
        self._inflight.clear()
        waiters.abandon(pending)
        if self._rollover_task is not None:
            self._rollover_task.cancel()
        self.stop_timer()

    def append(self, data: bytes) -> "asyncio.Future[Position]":
        """Append one entry (non-empty bytes-like, at most 4 GiB - 1).

        The position is fixed now, in call order; the future completes, in
        that order, once the entry is durable under the sync policy, or
        fails with ``StorageError`` (see the module docstring). The data is
        copied only if it is not ``bytes``; ``bytes`` are kept by reference.
        Raises ``ValueError`` at once for an empty or oversized entry.
        """
        if self.state is not OPEN:
            return _failed_future(self._loop, self.refusal())
        fut = self._loop.create_future()
        self.append_then(data, fut)
        return fut

    def append_then(self, data: bytes, on_stored: Waiter) -> None:
        """``ManagedLedger.append_then`` (bound to this per instance): its
        docstring states the contract."""
        if self.state is not OPEN:
            raise self.refusal()
        if type(data) is not bytes:
            data = bytes(data)
        size = len(data)
        if not 0 < size <= MAX_ENTRY_SIZE:
            raise ValueError(f"entry size {size} out of range 1..{MAX_ENTRY_SIZE}")
        if self._parked:
            self._waiting.append((data, on_stored))
            return
        # _enqueue inlined: this runs once per entry
        self._buf.append(data)
        self._buf_futures.append(on_stored)
        self._next_entry += 1
        self._current_bytes += size + HEADER_SIZE
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._flushes.add(self)
        if self._next_entry >= self._max_entries or self._current_bytes >= self._max_bytes:
            self._start_rollover()

    def refusal(self) -> StorageError:
        if self.error is not None:
            return self.error
        return ManagedLedgerClosedError(f"managed ledger {self.name!r} is {self.state}")

    def _enqueue(self, data: bytes, fut: Waiter) -> None:
        """``append`` after the checks (appends queued during a rollover)."""
        self._buf.append(data)
        self._buf_futures.append(fut)
        self._next_entry += 1
        self._current_bytes += len(data) + HEADER_SIZE
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._flushes.add(self)
        if self._next_entry >= self._max_entries or self._current_bytes >= self._max_bytes:
            self._start_rollover()

    def take(self) -> tuple | None:
        """What was appended since the last hand-over, as one batch for the
        backend: ``(handle, datas, nbytes, callback)``, now in flight (cached,
        counted in ``_inflight``); None if nothing is buffered (or closed).
        The caller must submit it (:class:`~.flush_pass.FlushPass`, :meth:`_flush`)."""
        self._flush_scheduled = False
        buf = self._buf
        if not buf or self.state is CLOSED:
            return None
        # What goes in flight is copied into tuples and the two buffers stay:
        # fresh buffers per hand-over lived until the ledger's next append
        # (half a second at 10,000 written topics), long enough to reach the
        # collector's middle generation, 20,000 lists that each of its passes
        # walked. The entries' tuple holds only bytes: untracked at once.
        datas = untrack_atoms(tuple(buf))
        buf.clear()
        meta = self.current_meta
        first = self._next_entry - len(datas)
        # One entry per ledger per pass is the usual case at many written topics.
        nbytes = (len(datas[0]) if len(datas) == 1 else sum(map(len, datas))) + HEADER_SIZE * len(datas)
        batch = AppendBatch(self, meta.ledger_id, first, self._buf_futures, nbytes, self._loop.time())
        self._buf_futures.clear()
        cache = self._cache
        if self._listeners or cache.read_recently():  # someone reads the tail (storage/cache.py)
            cache.put_many(meta.ledger_id, first, datas)
        self._inflight.append(batch)
        return self.current, datas, nbytes, batch

    def _flush(self) -> None:
        """Hand what was appended so far to the writer now (before a seal, a
        drain); the usual hand-over is the flush pass's, once per loop iteration."""
        taken = self.take()
        if taken is None:
            return
        handle, datas, _, on_written = taken
        try:
            self._backend.submit(handle, datas, on_written, self._loop)
        except StorageError as exc:
            on_written(exc)

    def on_written(self, batch: AppendBatch, error: BaseException | None) -> None:
        """The backend's answer for ``batch``. The usual case (stored, in
        order, no rollover recording) is one pass with no call but the
        waiters' own: at 10,000 written topics it runs for nearly every
        entry (one entry per topic per commit)."""
        if batch.failed:
            return
        if error is not None:
            self._on_failed(batch, error)
            return
        unrecorded = self._unrecorded
        if unrecorded is not None and batch.ledger_id == unrecorded.ledger_id:
            self._held.append((batch, None))  # told once the record names its ledger
            return
        inflight = self._inflight
        if inflight and inflight[0] is batch:
            inflight.popleft()
        else:  # cannot happen: the writer completes a ledger's batches in order
            log.error("%s: batch completed out of order", self.name)
            inflight.remove(batch)
        count = batch.count
        lid = batch.ledger_id
        first = batch.first
        meta = self._ledgers.metas.get(lid)
        if meta is not None:
            meta.entries += count
            meta.size += batch.nbytes
        self._confirmed_ledger = lid  # last_confirmed, its Position made when asked
        self._confirmed_entry = first + count - 1
        self._confirmed = None
        self.write_stats.record(count, batch.nbytes - HEADER_SIZE * count, self._loop.time() - batch.started)
        waiter = batch.waiter
        if waiter is not None:
            # One callback for the whole batch (one topic's run): waiters.complete inlined.
            try:
                waiter(lid, first, count, None)
            except Exception:  # a listener's bug must not stop the others' receipts
                log.exception("an append's callback failed on %d:%d (+%d)", lid, first, count)
        else:
            waiters.complete(batch._futures, lid, first)
        self._listeners.wake()
        if not inflight and self._idle_waiters:
            self.wake_idle()
        if not self._rolling and self.state is OPEN:
            current = self.current
            if current.full:
                self._start_rollover()
            elif current.nearly_full:
                self._roller.prepare_ahead()

    def _on_failed(self, batch: AppendBatch, error: BaseException) -> None:
        """:meth:`on_written` for a batch the backend refused or failed."""
        unrecorded = self._unrecorded
        if unrecorded is not None and batch.ledger_id == unrecorded.ledger_id:
            self._held.append((batch, error))  # told once the record names its ledger
            return
        if isinstance(error, ManagedLedgerFencedError):  # a new owner fenced the ledger
            self._fenced_on_disk(batch.ledger_id)
        else:
            self._on_write_failure(error)

    def _fenced_on_disk(self, ledger_id: int) -> None:
        """A new owner fenced our ledger (``LedgerBackend.fence``): nothing
        written but not yet acknowledged is acknowledged, now or later."""
        error = ManagedLedgerFencedError(
            f"managed ledger {self.name!r}: ledger {ledger_id} was fenced by a new owner")
        log.warning("%s: %s; failing %d unacknowledged batches", self.name, error, len(self._inflight))
        failed = list(self._inflight)
        self._inflight.clear()
        for batch in failed:
            batch.failed = True
            waiters.fail(batch.futures, error)
        buffered, self._buf, self._buf_futures = self._buf_futures, [], []
        waiters.fail(buffered, error)
        self.fence(error)
        self.fail(error)

    def _on_write_failure(self, error: BaseException) -> None:
        if not isinstance(error, StorageError):
            error = StorageError(f"write failed: {error!r}")
        log.error("%s: write failed, failing %d pending batches: %s", self.name, len(self._inflight), error)
        failed = list(self._inflight)
        self._inflight.clear()
        for batch in failed:
            batch.failed = True
        buffered = self._buf_futures
        self._buf = []
        self._buf_futures = []
        waiting = self._waiting
        self._waiting = []
        for batch in failed:
            self._cache.truncate(batch.ledger_id, batch.first)
            waiters.fail(batch.futures, error)
        waiters.fail(itertools.chain(buffered, (w for _, w in waiting)), error)
        if self.current_meta is not None:
            self._cache.truncate(self.current_meta.ledger_id, self.current_meta.entries)
        if self.current is not None:
            self.current.fence()
        if self._unrecorded is not None:
            # Switched to a ledger the rollover under way records: it is
            # fenced now, so appends wait (parked) and the rollover's end
            # rolls again, to a ledger made after the failure.
            self._parked = True
        elif self.state is OPEN:
            self._start_rollover()  # while closing, close() seals the fenced ledger instead
        self.wake_idle()

    def _start_rollover(self) -> None:
        """Roll to a new ledger (full, old, or a write failed). Appends
        issued meanwhile wait and are re-issued in order once the new ledger
        is installed. If the roll fails the managed ledger is failed or
        fenced (:meth:`_fail`)."""
        if self._rolling:
            return
        self._flush()  # the old ledger's last entries must reach the writer before its seal
        self._rolling = True
        old_meta, old = self.current_meta, self.current
        # Appends parked by a failure wait for a ledger made after it (below).
        prepared = self._roller.take_prepared() if self.state is OPEN and not self._waiting else None
        if prepared is not None:
            self._switch(old_meta, prepared.meta, prepared.handle)
        else:
            self._parked = True
        self._rollover_task = self._loop.create_task(self._rollover(old_meta, old, prepared))

    def _switch(self, old_meta: LedgerMeta, meta: LedgerMeta, ledger: LedgerHandle) -> None:
        """Appends go to ``ledger`` (created ahead) from now on, before the
        record names it: their batches are written at once, their receipts
        wait until the rollover has recorded it (:meth:`_recorded`)."""
        self._switched_from = (old_meta, self._next_entry)
        self._unrecorded = meta
        meta.ledger = ledger
        self._set_current(meta, ledger)

    def _recorded(self) -> None:
        """The record names the ledger appends were switched to: tell its
        batches written meanwhile, in order."""
        meta, self._unrecorded = self._unrecorded, None
        self._switched_from = None
        self._ledgers.add(meta)
        held, self._held = self._held, []
        for batch, error in held:
            self.on_written(batch, error)

    def _fail_unrecorded(self, error: BaseException) -> None:
        """The rollover onto a switched-to ledger failed: its appends, written
        or not, fail (no receipt: no record names the ledger)."""
        meta, self._unrecorded = self._unrecorded, None
        self._switched_from = None
        self._held = []
        if not isinstance(error, StorageError):
            error = StorageError(f"rolling over failed: {error!r}")
        doomed = [b for b in self._inflight if b.ledger_id == meta.ledger_id]
        self._inflight = collections.deque(b for b in self._inflight if b.ledger_id != meta.ledger_id)
        for batch in doomed:
            batch.failed = True
            waiters.fail(batch.futures, error)
        buffered, self._buf, self._buf_futures = self._buf_futures, [], []
        waiters.fail(buffered, error)
        self._cache.drop(meta.ledger_id)

    async def _rollover(self, old_meta: LedgerMeta, old: LedgerHandle, prepared) -> None:
        try:
            rolled = await self._roller.roll(old_meta, old, prepared)
        except BaseException as exc:
            self._rolling = self._parked = False
            self._rollover_task = None
            if self._unrecorded is not None:
                self._fail_unrecorded(exc)
            self.fail(exc)
            if not isinstance(exc, Exception):
                raise
            return
        old_meta.entries, old_meta.size, old_meta.closed, old_meta.state = (
            rolled.entries, rolled.size, rolled.closed, "closed")
        if not rolled.entries:
            self.remove_meta(old_meta)
            self._loop.create_task(self._backend.delete(old_meta.ledger_id, old))
        else:
            old_meta.ledger = old
        if self._unrecorded is not None:
            self._rolling = False
            self._rollover_task = None
            failed_meanwhile = self._parked
            self._recorded()
            # The batches it told may have started the next rollover, parking
            # appends for it (no ledger ready): they stay parked until its end.
            if not self._rolling:
                self._parked = False
            if failed_meanwhile and self.state is not OPEN:  # closing: nothing more goes in
                waiting, self._waiting = self._waiting, []
                waiters.fail([w for _, w in waiting], self.refusal())
            if self.state is OPEN and (failed_meanwhile or self._next_entry >= self._max_entries
                                       or self._current_bytes >= self._max_bytes or self.current.full):
                self._start_rollover()  # a write failed, or it filled up, while it was being recorded
            self._after_rollover()
            self.wake_idle()
            return
        self.install(rolled.new_meta, rolled.new_handle)
        self._rolling = self._parked = False
        self._rollover_task = None
        waiting = self._waiting
        self._waiting = []
        for i, (data, waiter) in enumerate(waiting):
            if self._rolling:  # a tiny max_entries_per_ledger can roll again at once
                self._waiting = waiting[i:] + self._waiting
                break
            if waiters.is_pending(waiter):
                self._enqueue(data, waiter)
        self._after_rollover()
        self.wake_idle()

    def install(self, meta: LedgerMeta, ledger: LedgerHandle) -> None:
        """Make ``ledger`` (recorded) the one appends go to."""
        meta.ledger = ledger
        self._ledgers.add(meta)
        self._set_current(meta, ledger)

    def _set_current(self, meta: LedgerMeta, ledger: LedgerHandle) -> None:
        self.current = ledger
        self.current_meta = meta
        self._backend.set_profile(ledger, self.storage_profile)
        self._next_entry = 0
        self._current_bytes = 0
        if self._age_timer is not None:
            self._age_timer.cancel()
        self._age_timer = self._loop.call_later(self._config.max_ledger_age_s, self._age_check, meta.ledger_id)
        self._roller.fetch_ahead()

    def _age_check(self, ledger_id: int) -> None:
        self._age_timer = None
        if self.state is not OPEN or self.current_meta is None or self.current_meta.ledger_id != ledger_id:
            return
        if self._next_entry == 0:  # nothing to seal; look again later
            self._age_timer = self._loop.call_later(self._config.max_ledger_age_s, self._age_check, ledger_id)
        else:
            self._start_rollover()

    def remove_meta(self, meta: LedgerMeta) -> None:
        self._ledgers.remove(meta)
        self._cache.drop(meta.ledger_id)

    def fail(self, exc: BaseException) -> None:
        """Rolling over failed, or a new owner took over: refuse every
        append until reopened."""
        if self.state in (OPEN, CLOSING):
            if isinstance(exc, ManagedLedgerFencedError):
                self.fence(exc)
            else:
                self.state = FAILED
                self.error = ManagedLedgerFailedError(f"managed ledger {self.name!r} failed: {exc}")
                log.error("%s: %s", self.name, self.error)
        waiting = self._waiting
        self._waiting = []
        waiters.fail([w for _, w in waiting], self.error or self.refusal())
        self.wake_idle()

    def assigned(self, meta: LedgerMeta) -> int:
        """Entries in the ledger, counting appends not yet durable for the
        current one (and for the one being sealed after a switch)."""
        if meta is self.current_meta:
            return self._next_entry
        switched = self._switched_from
        if switched is not None and meta is switched[0]:
            return switched[1]
        return meta.entries

    def next_append_position(self) -> Position:
        """Where the next append goes. While a rollover runs and the new
        ledger's id is not known yet (rare), this is a position in the old
        ledger that will never hold an entry, which orders correctly all the
        same: reads from it go on to the next ledger."""
        spare_id = self._roller.spare_id
        if self._parked and spare_id is not None:
            return Position(spare_id, len(self._waiting))
        meta = self.current_meta
        return Position(meta.ledger_id, self._next_entry)

    def wake_idle(self) -> None:
        if self._idle_waiters and not self._inflight and not self._rolling and not self._buf:
            idle, self._idle_waiters = self._idle_waiters, []
            for fut in idle:
                if not fut.done():
                    fut.set_result(None)

    async def drain(self) -> None:
        while self._inflight or self._rolling or self._buf:
            self._flush()
            fut = self._loop.create_future()
            self._idle_waiters.append(fut)
            self.wake_idle()
            await fut

    async def seal_current(self) -> None:
        meta = self.current_meta
        sealed = await self._roller.seal(meta, self.current)
        meta.entries, meta.size, meta.closed, meta.state = sealed.entries, sealed.size, sealed.closed, "closed"
        if not sealed.entries:
            self.remove_meta(meta)
            await self._backend.delete(meta.ledger_id, self.current)
