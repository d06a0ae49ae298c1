"""The managed ledger: a named, append-only log made of a sequence of ledgers.

This module holds the class: its state, the append path and the
lifecycle (open, rollover, close). What it does with others is done by
collaborators, each in its own module, handed what they need at
construction and importing nothing of this one (where one must call back,
it names what it needs with a small Protocol):

- ``backend`` (:class:`~.backend.LedgerBackend`, given by the factory):
  where entries' bytes are written, read, fenced and deleted;
- ``ledger_record``: the record in the metadata store (compare-and-set
  writes, the watch that notices a new owner);
- ``recovery``: what a crash or a previous owner left, at open (a function);
- ``ledger_list``: its ledgers, oldest first, and the positions in them;
- ``reading``: reads of confirmed entries (tail cache, else the backend);
- ``cache``: the tail cache, in the factory's shared budget;
- ``rollover``: sealing a ledger and recording the next one;
- ``trimming``: deleting consumed ledgers that retention lets go;
- ``cursor_set``: the durable cursors (``cursor``: one cursor);
- ``listeners``: coalesced wake-ups when entries are confirmed.

The ledgers' records are in ``ledger_meta``, the factory in ``factory``.

A managed ledger writes to one open ledger at a time and rolls over to a new
one when the current one is full (entries, bytes) or old. Closed ledgers are
deleted (trimmed) once every durable cursor has consumed them and retention
allows (the factory's ``StorageConfig``, or a per managed ledger
:class:`~.config.RetentionPolicy` given to ``open``/``set_retention``, which
the broker derives from namespace policies). Its metadata lives in the
metadata store; the bytes of its entries go through the factory's
:class:`~.backend.LedgerBackend` and nowhere else (by default segment files
under ``<data_dir>/ledgers``, written by one group-commit thread:
:mod:`.file_backend`).

Write failures: if a write or fsync fails, the failed append's future and
every append issued before the failure became known (in any ledger of this
managed ledger) fail with ``StorageError``, in order. The failed ledger is
sealed at its last durable entry and appends issued afterwards go to a new
ledger, so no entry is ever reported durable after a failed one in the same
ledger, and a failure is always a contiguous block of appends. If the roll
to a new ledger fails too, the managed ledger is *failed*: every append fails
until it is closed and opened again.

Elsewhere: the record's layout and ownership (a compare-and-set conflict
or the watch fences this instance) in :mod:`.ledger_record`; recovery at
open in :mod:`.recovery`; trimming's rules in :mod:`.trimming`.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import logging
from bisect import bisect_right
from typing import Awaitable, Callable

from ..metadata.store import MetadataError, MetadataStore
from . import waiters
from .backend import LedgerBackend, LedgerHandle
from .cache import CacheBudget, TailCache
from .config import RetentionPolicy, StorageConfig
from .cursor import ManagedCursor
from .cursor_set import CursorSet
from .entry import Entry, LedgerInfo
from .errors import ManagedLedgerClosedError, ManagedLedgerFailedError, ManagedLedgerFencedError, StorageError
from .ledger import HEADER_SIZE, MAX_ENTRY_SIZE
from .ledger_list import LedgerList
from .ledger_meta import _CLOSED, _CLOSING, _FAILED, _FENCED, _OPEN, _Batch, _LedgerMeta, _failed_future
from .ledger_record import ManagedLedgerRecord
from .listeners import EntryListeners
from .position import Position
from .reading import EntryReader, find_first
from .recovery import recover
from .rollover import Roller
from .trimming import Trimmer
from .waiters import Waiter
from .read_stats import ReadStats
from .write_stats import WriteStats

log = logging.getLogger(__name__)


class ManagedLedger:
    """A topic's log. Create through :meth:`ManagedLedgerFactory.open`,
    which hands it its collaborators: the ``config``, the metadata
    ``store``, the ``backend`` for entries' bytes, the tail caches'
    ``cache_budget``, where ledger ids come from (``new_ledger_id``) and
    whom to tell once it is closed (``on_closed``).

    All methods must be called from the event loop the managed ledger was
    opened on.
    """

    def __init__(self, name: str, *, config: StorageConfig, store: MetadataStore, backend: LedgerBackend,
                 cache_budget: CacheBudget | None, new_ledger_id: Callable[[], Awaitable[int]],
                 on_closed: Callable[["ManagedLedger"], None]) -> None:
        self.name = name
        #: Write latency and entry size counts (the broker's metrics read them).
        self.write_stats = WriteStats()
        #: Read latency and cache miss counts (likewise; the EntryReader keeps them).
        self.read_stats = ReadStats()
        self._config = config
        self._store = store
        # Every byte of every entry goes through this one seam (backend.py).
        self._backend = backend
        self._new_ledger_id = new_ledger_id
        self._on_closed = on_closed
        self._loop = loop = asyncio.get_running_loop()
        #: The record in the metadata store (compare-and-set writes, the watch).
        self._record = ManagedLedgerRecord(store, name)
        self._key = self._record.key
        #: Its ledgers, oldest first, and the positions in them.
        self._ledgers = LedgerList()
        self._properties: dict[str, str] = {}
        self._state = _OPEN
        self._error: StorageError | None = None
        self._last_confirmed: Position | None = None
        # The append path: the current ledger, appends not yet handed to the
        # backend (_buf), batches handed over and not completed (_inflight),
        # and appends waiting for a rollover to finish (_waiting).
        self._current: LedgerHandle | None = None
        self._current_meta: _LedgerMeta | None = None
        self._next_entry = 0
        self._current_bytes = 0
        self._buf: list[bytes] = []
        self._buf_futures: list[Waiter] = []  # the waiters of _buf's entries
        self._flush_scheduled = False
        self._inflight: collections.deque[_Batch] = collections.deque()
        self._waiting: list[tuple[bytes, Waiter]] = []
        self._rolling = False
        self._rollover_task: asyncio.Task | None = None
        self._age_timer: asyncio.TimerHandle | None = None
        self._max_entries = config.max_entries_per_ledger
        self._max_bytes = config.max_ledger_bytes
        self._idle_waiters: list[asyncio.Future] = []
        self._owner_check: asyncio.Task | None = None
        # Collaborators.
        self._cache = TailCache(config.read_cache_bytes, cache_budget)
        self._reader = EntryReader(name, self._ledgers, self._cache, backend, self.read_stats)
        self._listeners = EntryListeners(name, loop)
        self._roller = Roller(self, self._ledgers, backend, self._record.lock, new_ledger_id, loop)
        #: Deletes consumed ledgers that retention lets go.
        self._trimmer = Trimmer(self, self._ledgers, config, backend, self._record.lock, loop)
        self._cursors = CursorSet(self, store, self._key, loop)
        #: The durable cursors by name.
        self.cursors: dict[str, ManagedCursor] = self._cursors.by_name

    def __repr__(self) -> str:
        return f"<ManagedLedger {self.name!r} {self._state} last={self._last_confirmed}>"

    # ================================================================= stats

    @property
    def state(self) -> str:
        """``open``, ``closing``, ``closed``, ``fenced`` or ``failed``."""
        return self._state

    @property
    def last_confirmed(self) -> Position | None:
        """The last durable entry; None if no entry is stored."""
        return self._last_confirmed

    @property
    def entry_count(self) -> int:
        """Confirmed entries not trimmed."""
        return self._ledgers.entry_count

    @property
    def total_size(self) -> int:
        """Bytes on disk of confirmed entries not trimmed (frame headers included)."""
        return self._ledgers.total_size

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return self._ledgers.infos()

    @property
    def properties(self) -> dict[str, str]:
        """A copy of the persisted properties; change them with :meth:`set_properties`."""
        return dict(self._properties)

    # ================================================================ append

    def append(self, data: bytes) -> "asyncio.Future[Position]":
        """Append one entry (non-empty bytes-like, at most 4 GiB - 1).

        The position is fixed now, in call order; the future completes, in
        that order, once the entry is durable under the sync policy, or
        fails with ``StorageError`` (see the module docstring). The data is
        copied only if it is not ``bytes``; ``bytes`` are kept by reference.
        Raises ``ValueError`` at once for an empty or oversized entry.
        """
        if self._state is not _OPEN:
            return _failed_future(self._loop, self._refusal())
        fut = self._loop.create_future()
        self.append_then(data, fut)
        return fut

    def append_then(self, data: bytes, on_stored: Waiter) -> None:
        """:meth:`append` without a future: ``on_stored(ledger_id,
        first_entry_id, count, error)`` is called instead, once per run of
        appends that gave it one after the other (the contract is in
        :mod:`.waiters`).

        Raises at once, appending nothing and never calling ``on_stored``:
        ``StorageError`` when the managed ledger takes no appends (closing,
        closed, fenced, failed), ``ValueError`` for an empty or oversized
        entry. So every call that returns is told exactly once, in call order.
        """
        if self._state is not _OPEN:
            raise self._refusal()
        if type(data) is not bytes:
            data = bytes(data)
        size = len(data)
        if not 0 < size <= MAX_ENTRY_SIZE:
            raise ValueError(f"entry size {size} out of range 1..{MAX_ENTRY_SIZE}")
        if self._rolling:
            self._waiting.append((data, on_stored))
            return
        # _enqueue inlined: this runs once per entry
        self._buf.append(data)
        self._buf_futures.append(on_stored)
        self._next_entry += 1
        self._current_bytes += size + HEADER_SIZE
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        if self._next_entry >= self._max_entries or self._current_bytes >= self._max_bytes:
            self._start_rollover()

    def _refusal(self) -> StorageError:
        if self._error is not None:
            return self._error
        return ManagedLedgerClosedError(f"managed ledger {self.name!r} is {self._state}")

    def _enqueue(self, data: bytes, fut: Waiter) -> None:
        """``append`` after the checks (appends queued during a rollover)."""
        self._buf.append(data)
        self._buf_futures.append(fut)
        self._next_entry += 1
        self._current_bytes += len(data) + HEADER_SIZE
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        if self._next_entry >= self._max_entries or self._current_bytes >= self._max_bytes:
            self._start_rollover()

    def _flush(self) -> None:
        """Hand what was appended since the last flush to the writer (once per
        loop iteration, so concurrent appenders share one batch)."""
        self._flush_scheduled = False
        datas = self._buf
        if not datas or self._state is _CLOSED:
            return
        futures = self._buf_futures
        self._buf = []
        self._buf_futures = []
        meta = self._current_meta
        first = self._next_entry - len(datas)
        batch = _Batch(meta.ledger_id, first, futures, sum(map(len, datas)) + HEADER_SIZE * len(datas),
                       self._loop.time())
        self._cache.put_many(meta.ledger_id, first, datas)
        self._inflight.append(batch)
        try:
            self._backend.submit(self._current, datas, functools.partial(self._on_written, batch), self._loop)
        except StorageError as exc:
            self._on_written(batch, exc)

    def _on_written(self, batch: _Batch, error: BaseException | None) -> None:
        if batch.failed:
            return
        if error is not None:
            if isinstance(error, ManagedLedgerFencedError):  # a new owner fenced the ledger
                self._fenced_on_disk(batch.ledger_id)
            else:
                self._on_write_failure(error)
            return
        if self._inflight and self._inflight[0] is batch:
            self._inflight.popleft()
        else:  # cannot happen: the writer completes a ledger's batches in order
            log.error("%s: batch completed out of order", self.name)
            self._inflight.remove(batch)
        futures = batch.futures
        lid = batch.ledger_id
        first = batch.first
        meta = self._ledgers.get(lid)
        if meta is not None:
            meta.entries += len(futures)
            meta.size += batch.nbytes
        self._last_confirmed = Position(lid, first + len(futures) - 1)
        self.write_stats.record(len(futures), batch.nbytes - HEADER_SIZE * len(futures),
                                self._loop.time() - batch.started)
        waiters.complete(futures, lid, first)
        self._listeners.wake()
        if not self._inflight:
            self._wake_idle()
        if self._current.full and not self._rolling and self._state is _OPEN:
            self._start_rollover()

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
        self._state = _FENCED
        self._error = error
        if self._current is not None:
            self._current.fence()
        self._fail(error)

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
        if self._current_meta is not None:
            self._cache.truncate(self._current_meta.ledger_id, self._current_meta.entries)
        if self._current is not None:
            self._current.fence()
        if self._state is _OPEN:
            self._start_rollover()  # while closing, close() seals the fenced ledger instead
        self._wake_idle()

    def add_listener(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` on the loop whenever new entries are confirmed
        (coalesced: at most once per loop iteration). Returns an unsubscribe
        function."""
        return self._listeners.add(callback)

    # ============================================================== rollover

    def _start_rollover(self) -> None:
        """Roll to a new ledger (full, old, or a write failed). Appends
        issued meanwhile wait and are re-issued in order once the new ledger
        is installed. If the roll fails the managed ledger is failed or
        fenced (:meth:`_fail`)."""
        if self._rolling:
            return
        self._flush()  # the old ledger's last entries must reach the writer before its seal
        self._rolling = True
        self._rollover_task = self._loop.create_task(self._rollover())

    async def _rollover(self) -> None:
        old_meta = self._current_meta
        old = self._current
        try:
            rolled = await self._roller.roll(old_meta, old)
        except BaseException as exc:
            self._rolling = False
            self._rollover_task = None
            self._fail(exc)
            if not isinstance(exc, Exception):
                raise
            return
        old_meta.entries, old_meta.size, old_meta.closed, old_meta.state = (
            rolled.entries, rolled.size, rolled.closed, "closed")
        if not rolled.entries:
            self._remove_meta(old_meta)
            self._loop.create_task(self._backend.delete(old_meta.ledger_id, old))
        else:
            old_meta.ledger = old
        self._install(rolled.new_meta, rolled.new_handle)
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
        """Make ``ledger`` the one appends go to."""
        meta.ledger = ledger
        self._ledgers.add(meta)
        self._current = ledger
        self._current_meta = meta
        self._next_entry = 0
        self._current_bytes = 0
        if self._age_timer is not None:
            self._age_timer.cancel()
        self._age_timer = self._loop.call_later(self._config.max_ledger_age_s, self._age_check, meta.ledger_id)
        self._roller.fetch_ahead()

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
        """Rolling over failed, or a new owner took over: refuse every
        append until reopened."""
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

    # ======================================================= positions, reads

    def _assigned(self, meta: _LedgerMeta) -> int:
        """Entries in the ledger, counting appends not yet durable for the current one."""
        return self._next_entry if meta is self._current_meta else meta.entries

    def _next_append_position(self) -> Position:
        """Where the next append goes. While a rollover runs and the new
        ledger's id is not known yet (rare), this is a position in the old
        ledger that will never hold an entry, which orders correctly all the
        same: reads from it go on to the next ledger."""
        spare_id = self._roller.spare_id
        if self._rolling and spare_id is not None:
            return Position(spare_id, len(self._waiting))
        meta = self._current_meta
        return Position(meta.ledger_id, self._next_entry)

    def first_position(self) -> Position | None:
        """The first confirmed entry still stored; None if there is none."""
        return self._ledgers.first_position()

    def next_position(self, pos: Position) -> Position:
        """The position right after ``pos``, crossing ledger boundaries and
        skipping empty or deleted ledgers. Past the end: the position the
        next append gets (if that is after ``pos``), or while a rollover
        runs, the new ledger's first position (appends wait for it)."""
        ledgers = self._ledgers
        meta = ledgers.get(pos.ledger_id)
        if meta is not None and pos.entry_id + 1 < self._assigned(meta):
            return Position(pos.ledger_id, pos.entry_id + 1)
        ids = ledgers.ids
        for i in range(bisect_right(ids, pos.ledger_id), len(ids)):
            later = ledgers.metas[ids[i]]
            if self._assigned(later):
                return Position(later.ledger_id, 0)
        end = self._next_append_position()
        if end.ledger_id > pos.ledger_id:
            # A rollover is running: the appends waiting for the new ledger
            # become its entries 0, 1, ...; the next position is its first,
            # not where the next append goes (a reader would skip them).
            return Position(end.ledger_id, 0)
        return end if end > pos else Position(pos.ledger_id, pos.entry_id + 1)

    def _is_confirmed_entry(self, pos: Position) -> bool:
        return self._ledgers.is_confirmed_entry(pos)

    def _entries_after(self, pos: Position) -> int:
        """Confirmed entries strictly after ``pos``."""
        return self._ledgers.entries_after(pos)

    async def read_entries(self, start: Position, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """Up to ``max_entries`` confirmed entries from ``start`` (or the next
        stored entry after it), possibly spanning ledgers; ``[]`` if none.
        With ``max_bytes``, stops once that much data was returned (at least
        one entry is always returned). Raises ``CorruptLedgerError`` if a
        record fails its CRC and ``StorageError`` on I/O errors
        (:class:`.reading.EntryReader`)."""
        if self._state is _CLOSED:
            raise self._refusal()
        return await self._reader.read_entries(start, max_entries, max_bytes)

    async def find_first(self, predicate: Callable[[Entry], bool]) -> Position | None:
        """Binary search for the first confirmed entry where ``predicate`` is
        True, assuming it is False...False True...True over the log (e.g.
        publish time >= t). None if it is True nowhere."""
        return await find_first(self._ledgers, self.read_entries, predicate)

    # ====================================================== open, ownership

    async def _recover(self) -> None:
        """Open: recover what a crash or a previous owner left
        (:func:`.recovery.recover`), start a new ledger, load the cursors,
        watch the record."""
        found = await recover(self._record, self._backend, self._new_ledger_id)
        self._properties = found.properties
        for meta in found.ledgers:
            self._ledgers.add(meta)
            if meta.entries:
                self._last_confirmed = Position(meta.ledger_id, meta.entries - 1)
        self._install(found.current, found.current_handle)
        await self._cursors.load()
        self._record.watch(self._on_record_change)
        self._schedule_trim()

    async def _save(self, ledger_docs: list[dict], properties: dict[str, str]) -> None:
        """Write the record (:meth:`.ledger_record.ManagedLedgerRecord.save`;
        caller holds its lock). A conflict fences this instance: the
        current ledger refuses further batches."""
        try:
            await self._record.save(ledger_docs, properties)
        except ManagedLedgerFencedError as error:
            self._state = _FENCED
            self._error = error
            if self._current is not None:
                self._current.fence()
            raise

    def _check_not_fenced(self) -> None:
        if self._state is _FENCED:
            raise self._error

    def _on_record_change(self) -> None:
        if self._state in (_OPEN, _CLOSING) and self._owner_check is None:
            self._owner_check = self._loop.create_task(self._check_owner())

    async def _check_owner(self) -> None:
        """Someone else may have written our record (another broker opened
        this managed ledger): if so, stop writing now rather than at our
        next metadata write. The data path's own check (the backend's fence
        after each write) is ``_fenced_on_disk``."""
        try:
            async with self._record.lock:
                if not await self._record.changed_elsewhere():
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

    # ============================================================ properties

    async def set_properties(self, updates: dict[str, str | None]) -> None:
        """Merge ``updates`` (a None value deletes the key) and persist them
        (compare-and-set) before returning. Raises ``StorageError`` (nothing
        changed) if the write fails; ``ManagedLedgerFencedError`` if another
        instance changed the managed ledger."""
        self._check_usable()
        for key, value in updates.items():
            if not isinstance(key, str) or not (value is None or isinstance(value, str)):
                raise TypeError(f"properties are str -> str; got {key!r}: {value!r}")
        async with self._record.lock:
            self._check_usable()
            props = dict(self._properties)
            for key, value in updates.items():
                if value is None:
                    props.pop(key, None)
                else:
                    props[key] = value
            await self._save(self._ledgers.docs(), props)
            self._properties = props

    # ============================================================= retention

    @property
    def retention(self) -> RetentionPolicy | None:
        """This managed ledger's retention override; None: the factory config's."""
        return self._trimmer.retention

    def set_retention(self, policy: RetentionPolicy | None) -> None:
        """Replace the retention override (None: back to the factory config)
        and re-check what can be trimmed. Not persisted: whoever opens the
        managed ledger sets it again (the broker, from namespace policies)."""
        self._trimmer.retention = policy
        self._schedule_trim()

    def _schedule_trim(self) -> None:
        self._trimmer.schedule()

    def _cursor_moved(self, mark_delete: Position) -> None:
        """A durable cursor persisted a new mark-delete position (trimming may follow)."""
        self._trimmer.cursor_moved(mark_delete)

    def _is_current(self, meta: _LedgerMeta) -> bool:
        return meta is self._current_meta

    async def _forget_ledgers(self, victims: list[_LedgerMeta]) -> None:
        """Trimmed: record the ledgers gone, then forget them (caller holds the record's lock)."""
        await self._save(self._ledgers.docs(without=victims), self._properties)
        for meta in victims:
            self._remove_meta(meta)

    def _check_usable(self) -> None:
        if self._state in (_CLOSED, _FENCED):
            raise self._refusal()

    # =============================================================== cursors

    async def open_cursor(self, name: str, initial_position: str = "latest") -> ManagedCursor:
        """The durable cursor ``name``, created if new: ``"latest"`` starts
        after the last confirmed entry, ``"earliest"`` before the first stored
        one. An existing cursor comes back with its persisted state."""
        self._check_usable()
        return await self._cursors.open(name, initial_position)

    async def delete_cursor(self, name: str) -> None:
        """Delete the durable cursor ``name`` (no error if it does not exist)."""
        self._check_usable()
        await self._cursors.delete(name)
        self._schedule_trim()

    def new_non_durable_cursor(self, mark_delete: Position) -> ManagedCursor:
        """An in-memory cursor (for readers): never persisted, not in
        ``cursors``, and it does not keep ledgers from being trimmed."""
        return self._cursors.non_durable(mark_delete)

    async def close_cursors(self) -> None:
        """Stop every cursor taking acknowledgements; waits for their persists
        in flight. Idempotent."""
        await self._cursors.close_all()

    # ================================================================= close

    def _wake_idle(self) -> None:
        if self._idle_waiters and not self._inflight and not self._rolling and not self._buf:
            idle, self._idle_waiters = self._idle_waiters, []
            for fut in idle:
                if not fut.done():
                    fut.set_result(None)

    async def _wait_idle(self) -> None:
        while self._inflight or self._rolling or self._buf:
            self._flush()
            fut = self._loop.create_future()
            self._idle_waiters.append(fut)
            self._wake_idle()
            await fut

    async def _wait_closed(self) -> None:
        fut = self._loop.create_future()
        self._idle_waiters.append(fut)
        await fut

    async def close(self, *, keep_cursors: bool = False) -> None:
        """Finish pending appends, seal the current ledger, record it closed
        (an empty current ledger is left as it is: see below).

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
        self._roller.stop()
        await self._trimmer.stop()
        if not keep_cursors:
            await self.close_cursors()
        if clean and self._state is _CLOSING and self._current is not None and self._next_entry == 0:
            # Nothing was written to the open ledger: nothing to seal or
            # record (a stop of many idle topics costs no I/O per topic). It
            # stays in metadata as open and empty; the next open recovers it
            # with no entries and drops it, as after a crash.
            clean = False
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
        self._close_handles()
        self._cache.clear()
        self._record.stop_watching()
        if self._state in (_OPEN, _CLOSING):
            self._state = _CLOSED
        self._on_closed(self)
        for fut in self._idle_waiters:
            if not fut.done():
                fut.set_result(None)

    async def _seal_current(self) -> None:
        meta = self._current_meta
        sealed = await self._roller.seal(meta, self._current)
        meta.entries, meta.size, meta.closed, meta.state = sealed.entries, sealed.size, sealed.closed, "closed"
        if not sealed.entries:
            self._remove_meta(meta)
            await self._backend.delete(meta.ledger_id, self._current)

    def _close_handles(self) -> None:
        for meta in self._ledgers:
            if meta.ledger is not None:
                meta.ledger.close()
        if self._current is not None:
            self._current.close()

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
        if self._rollover_task is not None:
            self._rollover_task.cancel()
        self._roller.stop()
        self._trimmer.abandon()
        if self._age_timer is not None:
            self._age_timer.cancel()
        self._close_handles()
