"""The managed ledger: a named, append-only log made of a sequence of ledgers.

A managed ledger writes to one open ledger at a time and rolls over to a new
one when the current one is full (entries, bytes) or old. Closed ledgers are
deleted (trimmed) once every durable cursor has consumed them and retention
allows (the factory's ``StorageConfig``, or a per managed ledger
:class:`~.config.RetentionPolicy` given to ``open``/``set_retention``, which
the broker derives from namespace policies). Its metadata lives in the metadata store; entries live in segment
files under ``<data_dir>/ledgers``; the :class:`ManagedLedgerFactory` owns
the single group-commit writer thread that every ledger's writes go through.

Metadata (JSON):

- ``/managed-ledgers/<name>``: ``{"ledgers": [{"id", "entries", "size",
  "created", "closed", "state"}...], "properties": {...}}``. ``entries`` and
  ``size`` are final for closed ledgers; the open ledger's are recovered
  from its file.
- ``/managed-ledgers/<name>/cursors/<quoted name>``: one cursor (see
  :mod:`.cursor`); the name is percent-encoded with no safe characters, so
  any name maps to one key segment.

Write failures: if a write or fsync fails, the failed append's future and
every append issued before the failure became known (in any ledger of this
managed ledger) fail with ``StorageError``, in order. The failed ledger is
sealed at its last durable entry and appends issued afterwards go to a new
ledger, so no entry is ever reported durable after a failed one in the same
ledger, and a failure is always a contiguous block of appends. If the roll
to a new ledger fails too, the managed ledger is *failed*: every append fails
until it is closed and opened again.

Trimming: a closed ledger is deleted (metadata first, then its files) when
there is at least one durable cursor, every durable cursor's *persisted*
mark-delete position is at or past its last entry, it was closed at least
``retention_time_s`` ago, and the managed ledger's size counting it exceeds
``retention_size_bytes`` (as in Pulsar, so what remains may be smaller than
that). Ledgers go oldest first, never skipping one. Trimming runs in the
background after a cursor persists a new mark-delete, after rollover, after
a cursor is deleted, and when retention time next lets a ledger go. With no
durable cursor nothing is trimmed; non-durable cursors never hold data.

Ownership: every metadata write is a compare-and-set against the version
this instance last read or wrote. A conflict, or a watch notification that
someone else wrote the record, means another instance (another broker) took
the managed ledger over: this instance is *fenced* and appends fail with
``ManagedLedgerFencedError`` from then on.

Recovery (``ManagedLedgerFactory.open``): a ledger left open by a crash is
scanned, its torn tail cut, and it is sealed at its last intact entry; then a
new ledger is created for writes. Entries that were written but never
confirmed may survive the crash and become readable. Ledger files that no
managed ledger names (a crash between creating a file and recording it, or
between un-recording a trimmed ledger and unlinking it) are deleted by
``ManagedLedgerFactory.remove_orphaned_ledgers``, which the broker runs at
start-up before any topic loads.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import json
import logging
import math
import time
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from ..metadata.store import BadVersion, MetadataError, MetadataStore, NotFound
from .cache import TailCache
from .config import RetentionPolicy, StorageConfig
from .entry import Entry, LedgerInfo
from .cursor import ManagedCursor
from .errors import (
    ManagedLedgerClosedError,
    ManagedLedgerFailedError,
    ManagedLedgerFencedError,
    ManagedLedgerNotFoundError,
    StorageError,
)
from .group_commit import GroupCommitWriter
from .ledger import HEADER_SIZE, MAX_ENTRY_SIZE, Ledger, delete_ledger_files, is_fenced, ledger_dir, write_fence
from .position import Position

log = logging.getLogger(__name__)

ROOT = "/managed-ledgers"
LEDGER_ID_COUNTER = "/counters/ledger-id"
SYNC_READ_BYTES = 256 * 1024  # larger file reads go to a thread
READ_CHUNK_BYTES = 8 * 1024 * 1024  # one pread never exceeds this (unless one entry does)

_OPEN, _CLOSING, _CLOSED, _FENCED, _FAILED = "open", "closing", "closed", "fenced", "failed"


class _LedgerMeta:
    """What the managed ledger knows of one of its ledgers.

    ``entries``/``size`` count confirmed (durable) entries only.
    """

    __slots__ = ("ledger_id", "entries", "size", "created", "closed", "state", "ledger", "opening")

    def __init__(self, ledger_id: int, entries: int = 0, size: int = 0, created: float = 0.0,
                 closed: float | None = None, state: str = "open") -> None:
        self.ledger_id = ledger_id
        self.entries = entries
        self.size = size
        self.created = created
        self.closed = closed
        self.state = state
        self.ledger: Ledger | None = None
        self.opening: asyncio.Future | None = None

    def doc(self) -> dict:
        return {"id": self.ledger_id, "entries": self.entries, "size": self.size,
                "created": self.created, "closed": self.closed, "state": self.state}

    @classmethod
    def from_doc(cls, doc: dict) -> "_LedgerMeta":
        return cls(int(doc["id"]), int(doc.get("entries", 0)), int(doc.get("size", 0)),
                   float(doc.get("created", 0.0)), doc.get("closed"), doc.get("state", "open"))


class _Batch:
    """Entries handed to the writer together; they complete together."""

    __slots__ = ("ledger_id", "first", "futures", "nbytes", "failed")

    def __init__(self, ledger_id: int, first: int, futures: list, nbytes: int) -> None:
        self.ledger_id = ledger_id
        self.first = first
        self.futures = futures
        self.nbytes = nbytes
        self.failed = False


def check_name(name: str) -> None:
    """Managed ledger names are ``/``-separated paths without empty segments.

    A second-to-last segment ``cursors`` is refused: ``a/cursors/b`` would
    share its key with cursor ``b`` of managed ledger ``a``.
    """
    if not isinstance(name, str) or not name or name.startswith("/") or name.endswith("/") or "//" in name:
        raise ValueError(f"invalid managed ledger name {name!r}: use 'a/b/c' with non-empty segments")
    parts = name.split("/")
    if len(parts) >= 3 and parts[-2] == "cursors":
        raise ValueError(f"invalid managed ledger name {name!r}: 'cursors' cannot be the second-to-last segment")


def cursor_key(ml_key: str, cursor_name: str) -> str:
    if not cursor_name:
        raise ValueError("cursor names must not be empty")
    segment = quote(cursor_name, safe="")
    if segment in (".", ".."):
        segment = segment.replace(".", "%2E")
    return f"{ml_key}/cursors/{segment}"


def _failed_future(loop, exc: BaseException) -> asyncio.Future:
    fut = loop.create_future()
    fut.set_exception(exc)
    return fut


class ManagedLedger:
    """A topic's log. Create through :meth:`ManagedLedgerFactory.open`.

    All methods must be called from the event loop the managed ledger was
    opened on.
    """

    def __init__(self, factory: "ManagedLedgerFactory", name: str) -> None:
        self.name = name
        self._factory = factory
        self._config: StorageConfig = factory.config
        self._store: MetadataStore = factory.store
        self._writer: GroupCommitWriter = factory.writer
        self._dir = factory.ledger_dir
        self._loop = asyncio.get_running_loop()
        self._key = f"{ROOT}/{name}"
        self._meta_version = -1
        self._meta_lock = asyncio.Lock()
        self._ledgers: dict[int, _LedgerMeta] = {}
        self._ids: list[int] = []
        self._properties: dict[str, str] = {}
        self._current: Ledger | None = None
        self._current_meta: _LedgerMeta | None = None
        self._next_entry = 0
        self._current_bytes = 0
        self._buf: list[bytes] = []
        self._buf_futures: list[asyncio.Future] = []
        self._flush_scheduled = False
        self._inflight: collections.deque[_Batch] = collections.deque()
        self._waiting: list[tuple[bytes, asyncio.Future]] = []
        self._rolling = False
        self._rollover_task: asyncio.Task | None = None
        self._spare_id: int | None = None  # id of the next ledger, fetched ahead of time
        self._spare_task: asyncio.Task | None = None
        self._state = _OPEN
        self._error: StorageError | None = None
        self._last_confirmed: Position | None = None
        self._listeners: dict[int, Callable[[], None]] = {}
        self._listener_ids = itertools.count()
        self._notify_scheduled = False
        self._idle_waiters: list[asyncio.Future] = []
        self._cache = TailCache(self._config.read_cache_bytes)
        self._max_entries = self._config.max_entries_per_ledger
        self._max_bytes = self._config.max_ledger_bytes
        self._age_timer: asyncio.TimerHandle | None = None
        self._trim_task: asyncio.Task | None = None
        self._trim_again = False
        self._trim_timer: asyncio.TimerHandle | None = None
        self._retention: RetentionPolicy | None = None  # None: the factory config's rule
        self._non_durable_ids = itertools.count()
        self._watch = None
        self._owner_check: asyncio.Task | None = None
        self.cursors: dict[str, ManagedCursor] = {}
        self._cursor_opening: dict[str, asyncio.Task] = {}

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
        return sum(m.entries for m in self._ledgers.values())

    @property
    def total_size(self) -> int:
        """Bytes on disk of confirmed entries not trimmed (frame headers included)."""
        return sum(m.size for m in self._ledgers.values())

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return [LedgerInfo(m.ledger_id, m.entries, m.size, m.created, m.state, m.closed)
                for m in self._ledgers.values()]

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
        if type(data) is not bytes:
            data = bytes(data)
        size = len(data)
        if not 0 < size <= MAX_ENTRY_SIZE:
            raise ValueError(f"entry size {size} out of range 1..{MAX_ENTRY_SIZE}")
        fut = self._loop.create_future()
        if self._rolling:
            self._waiting.append((data, fut))
            return fut
        # _enqueue inlined: this runs once per entry
        self._buf.append(data)
        self._buf_futures.append(fut)
        self._next_entry += 1
        self._current_bytes += size + HEADER_SIZE
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        if self._next_entry >= self._max_entries or self._current_bytes >= self._max_bytes:
            self._start_rollover()
        return fut

    def _refusal(self) -> StorageError:
        if self._error is not None:
            return self._error
        return ManagedLedgerClosedError(f"managed ledger {self.name!r} is {self._state}")

    def _enqueue(self, data: bytes, fut: asyncio.Future) -> None:
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
        batch = _Batch(meta.ledger_id, first, futures, sum(map(len, datas)) + HEADER_SIZE * len(datas))
        self._cache.put_many(meta.ledger_id, first, datas)
        self._inflight.append(batch)
        try:
            self._writer.submit_write(self._current, datas, functools.partial(self._on_written, batch), self._loop)
        except StorageError as exc:
            self._on_written(batch, exc)

    def _on_written(self, batch: _Batch, error: BaseException | None) -> None:
        if batch.failed:
            return
        if error is not None:
            self._on_write_failure(error)
            return
        if is_fenced(self._dir, batch.ledger_id):  # after the fsync, before any receipt
            self._fenced_on_disk(batch.ledger_id)
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
        for i, fut in enumerate(futures, first):
            if not fut.done():
                fut.set_result(Position(lid, i))
        if not self._notify_scheduled and self._listeners:
            self._notify_scheduled = True
            self._loop.call_soon(self._notify)
        if not self._inflight:
            self._wake_idle()

    def _fenced_on_disk(self, ledger_id: int) -> None:
        """A new owner fenced our ledger (see ``ledger.write_fence``): nothing
        written but not yet acknowledged is acknowledged, now or later."""
        error = ManagedLedgerFencedError(
            f"managed ledger {self.name!r}: ledger {ledger_id} was fenced by a new owner")
        log.warning("%s: %s; failing %d unacknowledged batches", self.name, error, len(self._inflight))
        failed = list(self._inflight)
        self._inflight.clear()
        for batch in failed:
            batch.failed = True
            for fut in batch.futures:
                if not fut.done():
                    fut.set_exception(error)
        buffered, self._buf, self._buf_futures = self._buf_futures, [], []
        for fut in buffered:
            if not fut.done():
                fut.set_exception(error)
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
            for fut in batch.futures:
                if not fut.done():
                    fut.set_exception(error)
        for fut in itertools.chain(buffered, (f for _, f in waiting)):
            if not fut.done():
                fut.set_exception(error)
        if self._current_meta is not None:
            self._cache.truncate(self._current_meta.ledger_id, self._current_meta.entries)
        if self._current is not None:
            self._current.fence()
        if self._state is _OPEN:
            self._start_rollover()  # while closing, close() seals the fenced ledger instead
        self._wake_idle()

    def _notify(self) -> None:
        self._notify_scheduled = False
        for callback in list(self._listeners.values()):
            try:
                callback()
            except Exception:
                log.exception("%s: entry listener failed", self.name)

    def add_listener(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` on the loop whenever new entries are confirmed
        (coalesced: at most once per loop iteration). Returns an unsubscribe
        function."""
        lid = next(self._listener_ids)
        self._listeners[lid] = callback
        return lambda: self._listeners.pop(lid, None)

    # ============================================================== rollover

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
            new_ledger = await self._writer.call(Ledger.create, self._dir, new_id)
            try:
                try:
                    entries, size = await self._writer.call(old.seal)
                except StorageError as exc:
                    # Its confirmed entries are durable all the same: record it
                    # closed without an index file; reading it scans the file.
                    log.warning("%s: %s; closing it without an index", self.name, exc)
                    old.fence()
                    entries, size = old.entry_count, old.size
                now = time.time()
                new_meta = _LedgerMeta(new_id, created=now)
                async with self._meta_lock:
                    self._check_not_fenced()
                    closed = _LedgerMeta(old_meta.ledger_id, entries, size, old_meta.created, now, "closed")
                    docs = [m.doc() for m in self._ledgers.values() if m is not old_meta]
                    if entries:
                        docs.append(closed.doc())
                    docs.append(new_meta.doc())
                    await self._save(docs, self._properties)
            except BaseException:
                await asyncio.to_thread(new_ledger.delete_files)
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
            old.close()
            self._loop.create_task(asyncio.to_thread(delete_ledger_files, self._dir, old_meta.ledger_id))
        else:
            old_meta.ledger = old
        self._spare_id = None
        self._install(new_meta, new_ledger)
        self._rolling = False
        self._rollover_task = None
        waiting = self._waiting
        self._waiting = []
        for i, (data, fut) in enumerate(waiting):
            if self._rolling:  # a tiny max_entries_per_ledger can roll again at once
                self._waiting = waiting[i:] + self._waiting
                break
            if not fut.done():
                self._enqueue(data, fut)
        self._schedule_trim()
        self._wake_idle()

    def _install(self, meta: _LedgerMeta, ledger: Ledger) -> None:
        meta.ledger = ledger
        self._ledgers[meta.ledger_id] = meta
        self._ids.append(meta.ledger_id)
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
        self._ledgers.pop(meta.ledger_id, None)
        i = bisect_left(self._ids, meta.ledger_id)
        if i < len(self._ids) and self._ids[i] == meta.ledger_id:
            del self._ids[i]
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
        for _, fut in waiting:
            if not fut.done():
                fut.set_exception(self._error or self._refusal())
        self._wake_idle()

    def _check_not_fenced(self) -> None:
        if self._state is _FENCED:
            raise self._error

    async def _save(self, ledger_docs: list[dict], properties: dict[str, str]) -> None:
        """Compare-and-set the managed ledger's record. Caller holds _meta_lock."""
        value = json.dumps({"ledgers": ledger_docs, "properties": properties}, separators=(",", ":")).encode()
        try:
            self._meta_version = await self._store.put(self._key, value, self._meta_version)
        except (BadVersion, NotFound) as exc:
            error = ManagedLedgerFencedError(f"managed ledger {self.name!r} was changed elsewhere: {exc}")
            self._state = _FENCED
            self._error = error
            if self._current is not None:
                self._current.fence()
            raise error from exc
        except MetadataError as exc:
            raise StorageError(f"writing metadata of {self.name!r} failed: {exc}") from exc

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
        async with self._meta_lock:
            self._check_usable()
            props = dict(self._properties)
            for key, value in updates.items():
                if value is None:
                    props.pop(key, None)
                else:
                    props[key] = value
            await self._save([m.doc() for m in self._ledgers.values()], props)
            self._properties = props

    # ============================================================= retention

    @property
    def retention(self) -> RetentionPolicy | None:
        """This managed ledger's retention override; None: the factory config's."""
        return self._retention

    def set_retention(self, policy: RetentionPolicy | None) -> None:
        """Replace the retention override (None: back to the factory config)
        and re-check what can be trimmed. Not persisted: whoever opens the
        managed ledger sets it again (the broker, from namespace policies)."""
        self._retention = policy
        self._schedule_trim()

    def _check_usable(self) -> None:
        if self._state in (_CLOSED, _FENCED):
            raise self._refusal()

    # ============================================================== positions

    def _assigned(self, meta: _LedgerMeta) -> int:
        """Entries in the ledger, counting appends not yet durable for the current one."""
        return self._next_entry if meta is self._current_meta else meta.entries

    def _next_append_position(self) -> Position:
        """Where the next append goes. While a rollover runs and the new
        ledger's id is not known yet (rare), this is a position in the old
        ledger that will never hold an entry, which orders correctly all the
        same: reads from it go on to the next ledger."""
        if self._rolling and self._spare_id is not None:
            return Position(self._spare_id, len(self._waiting))
        meta = self._current_meta
        return Position(meta.ledger_id, self._next_entry)

    def first_position(self) -> Position | None:
        """The first confirmed entry still stored; None if there is none."""
        for meta in self._ledgers.values():
            if meta.entries:
                return Position(meta.ledger_id, 0)
        return None

    def next_position(self, pos: Position) -> Position:
        """The position right after ``pos``, crossing ledger boundaries and
        skipping empty or deleted ledgers. Past the end: the position the
        next append gets (if that is after ``pos``)."""
        meta = self._ledgers.get(pos.ledger_id)
        if meta is not None and pos.entry_id + 1 < self._assigned(meta):
            return Position(pos.ledger_id, pos.entry_id + 1)
        ids = self._ids
        for i in range(bisect_right(ids, pos.ledger_id), len(ids)):
            later = self._ledgers[ids[i]]
            if self._assigned(later):
                return Position(later.ledger_id, 0)
        end = self._next_append_position()
        return end if end > pos else Position(pos.ledger_id, pos.entry_id + 1)

    def _is_confirmed_entry(self, pos: Position) -> bool:
        meta = self._ledgers.get(pos.ledger_id)
        return meta is not None and 0 <= pos.entry_id < meta.entries

    def _entries_after(self, pos: Position) -> int:
        """Confirmed entries strictly after ``pos``."""
        total = 0
        for meta in self._ledgers.values():
            if meta.ledger_id > pos.ledger_id:
                total += meta.entries
            elif meta.ledger_id == pos.ledger_id:
                total += max(0, meta.entries - pos.entry_id - 1)
        return total

    def _locate(self, pos: Position) -> tuple[_LedgerMeta, int] | None:
        """The first confirmed entry at or after ``pos``."""
        ids = self._ids
        for i in range(bisect_left(ids, pos.ledger_id), len(ids)):
            meta = self._ledgers[ids[i]]
            entry_id = max(pos.entry_id, 0) if meta.ledger_id == pos.ledger_id else 0
            if entry_id < meta.entries:
                return meta, entry_id
        return None

    # ================================================================= reads

    async def read_entries(self, start: Position, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """Up to ``max_entries`` confirmed entries from ``start`` (or the next
        stored entry after it), possibly spanning ledgers; ``[]`` if none.
        With ``max_bytes``, stops once that much data was returned (at least
        one entry is always returned). Raises ``CorruptLedgerError`` if a
        record fails its CRC and ``StorageError`` on I/O errors."""
        if self._state is _CLOSED:
            raise self._refusal()
        out: list[Entry] = []
        nbytes = 0
        pos = start
        while len(out) < max_entries:
            found = self._locate(pos)
            if found is None:
                break
            meta, first = found
            lid = meta.ledger_id
            last = min(meta.entries - 1, first + max_entries - len(out) - 1)
            datas = self._cache.get(lid, first, last)
            if not datas:
                cached = self._cache.first_cached(lid)
                if cached is not None and first < cached <= last:
                    last = cached - 1
                try:
                    datas = await self._read_file(meta, first, last, max_bytes)
                except StorageError:
                    if self._ledgers.get(lid) is meta:
                        raise
                    pos = Position(lid + 1, 0)  # trimmed while we read: go on after it
                    continue
            for i, data in enumerate(datas, first):
                out.append(Entry(Position(lid, i), data))
                if max_bytes is not None:
                    nbytes += len(data)
                    if nbytes >= max_bytes:
                        return out
            pos = Position(lid, first + len(datas))
        return out

    async def _read_file(self, meta: _LedgerMeta, first: int, last: int, max_bytes: int | None) -> list[bytes]:
        ledger = meta.ledger
        if ledger is None:
            ledger = await self._open_ledger(meta)
        limit = READ_CHUNK_BYTES if max_bytes is None else min(READ_CHUNK_BYTES, max_bytes + HEADER_SIZE)
        if ledger.range_bytes(first, last) > limit:
            last = ledger.last_within(first, last, limit)
        if ledger.range_bytes(first, last) > SYNC_READ_BYTES:
            return await asyncio.to_thread(ledger.read_range, first, last)
        return ledger.read_range(first, last)

    async def _open_ledger(self, meta: _LedgerMeta) -> Ledger:
        if meta.opening is None:
            meta.opening = self._loop.create_task(asyncio.to_thread(
                Ledger.open_sealed, self._dir, meta.ledger_id, meta.entries))
        try:
            ledger = await asyncio.shield(meta.opening)
        except OSError as exc:
            meta.opening = None
            raise StorageError(f"{self.name}: cannot open ledger {meta.ledger_id}: {exc}") from exc
        except BaseException:
            meta.opening = None
            raise
        if self._ledgers.get(meta.ledger_id) is not meta:
            ledger.close()  # trimmed meanwhile
            raise StorageError(f"ledger {meta.ledger_id} was deleted")
        if meta.ledger is None:
            meta.ledger = ledger
        return meta.ledger

    async def find_first(self, predicate: Callable[[Entry], bool]) -> Position | None:
        """Binary search for the first confirmed entry where ``predicate`` is
        True, assuming it is False...False True...True over the log (e.g.
        publish time >= t). None if it is True nowhere."""
        spans = [(m.ledger_id, m.entries) for m in self._ledgers.values() if m.entries]
        starts = list(itertools.accumulate((n for _, n in spans), initial=0))
        total = starts[-1]

        def position(k: int) -> Position:
            i = bisect_right(starts, k) - 1
            return Position(spans[i][0], k - starts[i])

        lo, hi = 0, total
        while lo < hi:
            mid = (lo + hi) // 2
            pos = position(mid)
            entries = await self.read_entries(pos, 1)
            if entries and entries[0].position == pos and predicate(entries[0]):
                hi = mid
            elif entries and entries[0].position == pos:
                lo = mid + 1
            else:  # trimmed under us: treat as before the answer
                lo = mid + 1
        return position(lo) if lo < total else None

    # =============================================================== cursors

    async def open_cursor(self, name: str, initial_position: str = "latest") -> ManagedCursor:
        """The durable cursor ``name``, created if new: ``"latest"`` starts
        after the last confirmed entry, ``"earliest"`` before the first stored
        one. An existing cursor comes back with its persisted state."""
        self._check_usable()
        if initial_position not in ("latest", "earliest"):
            raise ValueError(f"initial_position must be 'latest' or 'earliest'; got {initial_position!r}")
        cursor = self.cursors.get(name)
        if cursor is not None:
            return cursor
        task = self._cursor_opening.get(name)
        if task is None:
            task = self._loop.create_task(self._create_cursor(name, initial_position))
            self._cursor_opening[name] = task
            task.add_done_callback(lambda _: self._cursor_opening.pop(name, None))
        return await asyncio.shield(task)

    async def _create_cursor(self, name: str, initial_position: str) -> ManagedCursor:
        if initial_position == "latest" and self._last_confirmed is not None:
            md = self._last_confirmed
        else:
            first = self.first_position() or self._next_append_position()
            md = Position(first.ledger_id, -1)
        cursor = ManagedCursor(self, name, md, key=cursor_key(self._key, name), version=-1)
        cursor._gen += 1
        await cursor._persist()
        if self._state is not _OPEN:
            await cursor._close()
            raise self._refusal()
        self.cursors[name] = cursor
        return cursor

    async def delete_cursor(self, name: str) -> None:
        """Delete the durable cursor ``name`` (no error if it does not exist)."""
        self._check_usable()
        cursor = self.cursors.pop(name, None)
        if cursor is not None:
            await cursor._close(ManagedLedgerClosedError(f"cursor {name!r} was deleted"))
        try:
            await self._store.delete(cursor_key(self._key, name))
        except NotFound:
            pass
        except MetadataError as exc:
            raise StorageError(f"deleting cursor {name!r} failed: {exc}") from exc
        self._schedule_trim()

    def new_non_durable_cursor(self, mark_delete: Position) -> ManagedCursor:
        """An in-memory cursor (for readers): never persisted, not in
        ``cursors``, and it does not keep ledgers from being trimmed."""
        name = f"__non_durable_{next(self._non_durable_ids)}"
        return ManagedCursor(self, name, mark_delete, durable=False)

    async def _load_cursors(self) -> None:
        base = f"{self._key}/cursors"
        for child in await self._store.children(base):
            record = await self._store.get(f"{base}/{child}")
            if record is None:
                continue  # a path below, not a cursor
            try:
                doc = json.loads(record.value)
                cursor = ManagedCursor.from_snapshot(self, doc, key=f"{base}/{child}", version=record.version)
            except (ValueError, KeyError, TypeError) as exc:
                log.error("%s: ignoring unreadable cursor record %s: %s", self.name, child, exc)
                continue
            self.cursors[cursor.name] = cursor

    # ============================================================== trimming

    def _cursor_moved(self, mark_delete: Position) -> None:
        """A durable cursor persisted a new mark-delete position."""
        for meta in self._ledgers.values():
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
        for meta in self._ledgers.values():
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
        async with self._meta_lock:
            if self._state is not _OPEN:
                return
            victims = self._trimmable()
            if not victims:
                return
            gone = {m.ledger_id for m in victims}
            await self._save([m.doc() for m in self._ledgers.values() if m.ledger_id not in gone], self._properties)
            for meta in victims:
                self._remove_meta(meta)
        log.info("%s: trimmed ledgers %s", self.name, sorted(gone))
        for meta in victims:
            if meta.ledger is not None:
                await asyncio.to_thread(meta.ledger.delete_files)
            else:
                await asyncio.to_thread(delete_ledger_files, self._dir, meta.ledger_id)

    # ================================================================= close

    def _wake_idle(self) -> None:
        if self._idle_waiters and not self._inflight and not self._rolling and not self._buf:
            waiters, self._idle_waiters = self._idle_waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def _wait_idle(self) -> None:
        while self._inflight or self._rolling or self._buf:
            self._flush()
            fut = self._loop.create_future()
            self._idle_waiters.append(fut)
            self._wake_idle()
            await fut

    async def close(self) -> None:
        """Finish pending appends, seal the current ledger, record it closed.

        Appends issued after ``close()`` was called fail with
        ``ManagedLedgerClosedError``. Idempotent. A fenced or failed managed
        ledger just releases its files.
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
        for timer in (self._age_timer, self._trim_timer):
            if timer is not None:
                timer.cancel()
        if self._spare_task is not None:
            self._spare_task.cancel()
        if self._trim_task is not None:
            try:
                await self._trim_task
            except Exception:
                pass
        for cursor in list(self.cursors.values()):
            await cursor._close()
        if clean and self._state is _CLOSING and self._current is not None:
            try:
                await self._seal_current()
            except Exception as exc:
                log.error("%s: close could not seal ledger: %s", self.name, exc)
        for meta in self._ledgers.values():
            if meta.ledger is not None:
                meta.ledger.close()
        if self._current is not None:
            self._current.close()
        self._cache.clear()
        if self._watch is not None:
            self._watch.cancel()
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
        if self._watch is not None:
            self._watch.cancel()
        pending = [f for b in self._inflight for f in b.futures]
        pending += self._buf_futures + [f for _, f in self._waiting]
        self._buf, self._buf_futures, self._waiting = [], [], []
        self._inflight.clear()
        for batch_future in pending:
            batch_future.cancel()
        for task in (self._rollover_task, self._trim_task, self._spare_task):
            if task is not None:
                task.cancel()
        for timer in (self._age_timer, self._trim_timer):
            if timer is not None:
                timer.cancel()
        for meta in self._ledgers.values():
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
        entries, size = await self._writer.call(self._current.seal)
        now = time.time()
        async with self._meta_lock:
            docs = [m.doc() for m in self._ledgers.values() if m is not meta]
            if entries:
                docs.append(_LedgerMeta(meta.ledger_id, entries, size, meta.created, now, "closed").doc())
            await self._save(docs, self._properties)
        meta.entries, meta.size, meta.closed, meta.state = entries, size, now, "closed"
        if not entries:
            self._remove_meta(meta)
            await asyncio.to_thread(self._current.delete_files)

    # ================================================================== open

    async def _recover(self) -> None:
        """Load metadata, recover an unsealed ledger, start a new one."""
        record = await self._store.get(self._key)
        metas: list[_LedgerMeta] = []
        if record is not None:
            doc = json.loads(record.value)
            metas = [_LedgerMeta.from_doc(d) for d in doc.get("ledgers", [])]
            self._properties = dict(doc.get("properties", {}))
            self._meta_version = record.version
        empties = []
        for meta in metas:
            if meta.state == "closed":
                continue
            # Fence first: a previous owner still running must not acknowledge
            # anything it writes to this ledger from now on.
            try:
                await asyncio.to_thread(write_fence, self._dir, meta.ledger_id)
            except FileNotFoundError:
                pass  # the ledger directory itself is gone: recover finds nothing either
            try:
                ledger = await asyncio.to_thread(Ledger.recover, self._dir, meta.ledger_id)
            except FileNotFoundError:
                # created in metadata but the file never made it: nothing was written to it
                log.warning("%s: ledger %d has no file; dropping it", self.name, meta.ledger_id)
                meta.entries = 0
                empties.append(meta)
                continue
            meta.entries, meta.size = await asyncio.to_thread(ledger.seal)
            meta.state = "closed"
            meta.closed = time.time()
            log.info("%s: recovered ledger %d with %d entries", self.name, meta.ledger_id, meta.entries)
            if meta.entries:
                meta.ledger = ledger
            else:
                ledger.close()
                empties.append(meta)
        for meta in metas:
            if meta.state == "closed" and not meta.entries and meta not in empties:
                empties.append(meta)
        metas = [m for m in metas if m not in empties]
        new_id = await self._factory._new_ledger_id()
        new_ledger = await asyncio.to_thread(Ledger.create, self._dir, new_id)
        new_meta = _LedgerMeta(new_id, created=time.time())
        try:
            async with self._meta_lock:
                await self._save([m.doc() for m in metas] + [new_meta.doc()], self._properties)
        except BaseException:
            new_ledger.delete_files()
            for meta in metas:
                if meta.ledger is not None:
                    meta.ledger.close()
            raise
        for meta in empties:
            await asyncio.to_thread(delete_ledger_files, self._dir, meta.ledger_id)
        for meta in metas:
            self._ledgers[meta.ledger_id] = meta
            self._ids.append(meta.ledger_id)
            if meta.entries:
                self._last_confirmed = Position(meta.ledger_id, meta.entries - 1)
        self._install(new_meta, new_ledger)
        await self._load_cursors()
        self._watch = self._store.watch(self._key, self._on_metadata_change)
        self._schedule_trim()

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


class ManagedLedgerFactory:
    """Opens managed ledgers stored under ``data_dir`` with metadata in ``store``.

    Owns the group-commit writer thread. One factory per data directory and
    event loop; two factories must never share a data directory.
    """

    def __init__(self, data_dir: Path, store: MetadataStore, config: StorageConfig | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.store = store
        self.config = config or StorageConfig()
        self.ledger_dir = ledger_dir(self.data_dir)
        self.ledger_dir.mkdir(parents=True, exist_ok=True)
        self.writer = GroupCommitWriter(self.config.sync_policy, self.config.sync_interval_ms)
        self._open: dict[str, ManagedLedger] = {}
        self._opening: dict[str, asyncio.Task] = {}
        self._closed = False

    async def open(self, name: str, *, retention: RetentionPolicy | None = None) -> ManagedLedger:
        """Open (recovering if needed) or create the managed ledger ``name``.

        Opening a name that is already open returns the same instance.
        ``retention`` becomes its retention override (``set_retention``; on a
        new instance before anything is trimmed).
        Raises ``ValueError`` for a bad name, ``StorageError`` if recovery
        fails (``CorruptLedgerError`` if a ledger lost entries it had
        confirmed, ``ManagedLedgerFencedError`` if another instance changed
        its metadata meanwhile).
        """
        check_name(name)
        if self._closed:
            raise ManagedLedgerClosedError("factory is closed")
        ml = self._open.get(name)
        if ml is None:
            task = self._opening.get(name)
            if task is None:
                task = asyncio.get_running_loop().create_task(self._open_new(name, retention))
                self._opening[name] = task
                task.add_done_callback(lambda _: self._opening.pop(name, None))
            ml = await asyncio.shield(task)
        if ml.retention != retention:
            ml.set_retention(retention)
        return ml

    async def _open_new(self, name: str, retention: RetentionPolicy | None = None) -> ManagedLedger:
        ml = ManagedLedger(self, name)
        ml._retention = retention
        try:
            await ml._recover()
        except (MetadataError, OSError) as exc:
            raise StorageError(f"opening managed ledger {name!r} failed: {exc}") from exc
        self._open[name] = ml
        return ml

    def _forget(self, ml: ManagedLedger) -> None:
        if self._open.get(ml.name) is ml:
            del self._open[ml.name]

    async def _new_ledger_id(self) -> int:
        try:
            return await self.store.increment(LEDGER_ID_COUNTER)
        except MetadataError as exc:
            raise StorageError(f"allocating a ledger id failed: {exc}") from exc

    async def close(self) -> None:
        """Close every open managed ledger (a clean shutdown), then stop the writer."""
        self._closed = True
        for task in list(self._opening.values()):
            try:
                await task
            except Exception:
                pass
        await asyncio.gather(*(ml.close() for ml in list(self._open.values())), return_exceptions=True)
        await self.writer.close()

    def abandon(self) -> None:
        """Drop everything as a crash would: stop the writer without finishing
        queued work, close files, write nothing. For tests simulating kill -9."""
        self._closed = True
        self.writer.abandon()
        for ml in list(self._open.values()):
            ml._abandon()
        self._open.clear()

    async def delete(self, name: str) -> None:
        """Delete the managed ledger ``name``: its cursors, metadata and files.

        Raises ``ManagedLedgerNotFoundError`` if it does not exist.
        """
        check_name(name)
        ml = self._open.get(name)
        if ml is not None:
            await ml.close()
        key = f"{ROOT}/{name}"
        try:
            record = await self.store.get(key)
            if record is None:
                raise ManagedLedgerNotFoundError(f"managed ledger {name!r} does not exist")
            doc = json.loads(record.value)
            base = f"{key}/cursors"
            for child in await self.store.children(base):
                try:
                    await self.store.delete(f"{base}/{child}")
                except NotFound:
                    pass
            await self.store.delete(key, record.version)
        except BadVersion as exc:
            raise ManagedLedgerFencedError(f"managed ledger {name!r} changed while deleting it") from exc
        except MetadataError as exc:
            raise StorageError(f"deleting managed ledger {name!r} failed: {exc}") from exc
        for ledger_doc in doc.get("ledgers", []):
            await asyncio.to_thread(delete_ledger_files, self.ledger_dir, int(ledger_doc["id"]))

    async def exists(self, name: str) -> bool:
        """Whether the managed ledger ``name`` is stored (one metadata read,
        unlike scanning ``list_names``). ValueError for a bad name."""
        check_name(name)
        if name in self._open:
            return True
        record = await self.store.get(f"{ROOT}/{name}")
        return record is not None and _is_ml_record(record.value)

    async def list_names(self) -> list[str]:
        """Names of all managed ledgers in the metadata store, sorted."""
        names: list[str] = []

        async def walk(key: str, prefix: str) -> None:
            for child in await self.store.children(key):
                path = f"{key}/{child}"
                record = await self.store.get(path)
                if record is not None and _is_ml_record(record.value):
                    names.append(prefix + child)
                await walk(path, f"{prefix}{child}/")

        await walk(ROOT, "")
        return sorted(names)

    async def remove_orphaned_ledgers(self) -> list[int]:
        """Delete ledger files that no managed ledger's metadata names; return their ids.

        A crash between creating a ledger file and recording it (a rollover,
        the new ledger of a recovery) or between dropping a trimmed ledger
        from metadata and unlinking its files leaves such orphans behind;
        nothing can ever read them. Call before opening any managed ledger
        (the factory refuses once one is open or opening, as a ledger being
        created would look orphaned). Deletes nothing when the metadata
        store names no managed ledger at all while files exist: that is a
        data directory paired with the wrong (or a lost) metadata store, and
        the files are left for an operator. Raises StorageError if the
        metadata cannot be read.
        """
        if self._open or self._opening:
            raise StorageError("orphaned ledgers can only be removed before any managed ledger is opened")
        on_disk = _ledger_ids_on_disk(self.ledger_dir)
        if not on_disk:
            return []
        referenced: set[int] = set()
        found_any = False

        async def walk(key: str) -> None:
            nonlocal found_any
            for child in await self.store.children(key):
                path = f"{key}/{child}"
                record = await self.store.get(path)
                if record is not None and _is_ml_record(record.value):
                    found_any = True
                    referenced.update(int(d["id"]) for d in json.loads(record.value)["ledgers"])
                await walk(path)

        try:
            await walk(ROOT)
        except MetadataError as exc:
            raise StorageError(f"cannot list managed ledgers to find orphaned ledgers: {exc}") from exc
        if not found_any:
            log.warning("%d ledger files in %s but no managed ledger in the metadata store: leaving them",
                        len(on_disk), self.ledger_dir)
            return []
        orphans = sorted(on_disk - referenced)
        for ledger_id in orphans:
            log.warning("deleting orphaned ledger %d (no managed ledger names it)", ledger_id)
            await asyncio.to_thread(delete_ledger_files, self.ledger_dir, ledger_id)
        return orphans

    @property
    def managed_ledgers(self) -> dict[str, ManagedLedger]:
        """The open managed ledgers by name (a copy)."""
        return dict(self._open)


def _ledger_ids_on_disk(directory: Path) -> set[int]:
    """Ids of the ledgers with a segment or index file in ``directory``."""
    ids = set()
    for path in directory.iterdir():
        stem, suffix = path.stem, path.suffix
        if suffix in (".log", ".idx", ".fenced") and len(stem) == 20 and stem.isdigit():
            ids.add(int(stem))
    return ids


def _is_ml_record(value: bytes) -> bool:
    try:
        doc = json.loads(value)
    except ValueError:
        return False
    return isinstance(doc, dict) and "ledgers" in doc
