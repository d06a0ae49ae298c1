"""The managed ledger: a named, append-only log made of a sequence of ledgers.

This module holds the class: what a topic asks of its log, and the
lifecycle (open, close). The work is done by collaborators, each in its own module, handed what they need at
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
- ``append_path``: the current ledger, the appends headed to it, the
  managed ledger's state, rollover;
- ``rollover``: sealing a ledger and recording the next one (its I/O);
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

Write failures and rollover: :mod:`.append_path`. Elsewhere: the record's layout and ownership (a compare-and-set conflict
or the watch fences this instance) in :mod:`.ledger_record`; recovery at
open in :mod:`.recovery`; trimming's rules in :mod:`.trimming`.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from bisect import bisect_right
from typing import Awaitable, Callable

from ..metadata.store import MetadataError, MetadataStore
from .append_path import AppendPath
from .backend import CreateBeside, LedgerBackend, LedgerHandle
from .cache import CacheBudget, TailCache
from .config import RetentionPolicy, StorageConfig
from .cursor import ManagedCursor
from .cursor_set import CursorSet
from .entry import Entry, LedgerInfo
from .errors import ManagedLedgerFencedError, StorageError
from .ledger_list import LedgerList
from .ledger_meta import CLOSED, CLOSING, FENCED, OPEN, LedgerMeta
from .ledger_record import ManagedLedgerRecord
from .flush_pass import FlushPass
from .listeners import EntryListeners
from .position import Position
from .reading import EntryReader, find_first
from .recovery import recover
from .rollover import Roller
from .trimming import Trimmer
from .read_stats import ReadStats
from .waiters import Waiter
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
                 cache_budget: CacheBudget | None, new_ledger_id: Callable[[int], Awaitable[int]],
                 on_closed: Callable[["ManagedLedger"], None], flushes: FlushPass | None = None) -> None:
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
        self._properties: dict[str, str] = {}
        #: Why the fence listeners were told to let go (None: they were not).
        self.let_go_reason: StorageError | None = None
        #: Ledgers a previous owner prepared and never recorded, deleted by this open's recovery.
        self.swept_at_open: list[int] = []
        self._owner_check: asyncio.Task | None = None
        self._closing: asyncio.Task | None = None  # the close, once begun (see :meth:`close`)
        #: Its ledgers, oldest first, and the positions in them.
        self._ledgers = LedgerList()
        self._cache = TailCache(config.read_cache_bytes, cache_budget)
        self._reader = EntryReader(name, self._ledgers, self._cache, backend, self.read_stats)
        self._listeners = EntryListeners(name, loop)
        self._roller = Roller(self, self._ledgers, backend, self._record.lock, new_ledger_id, loop,
                              self._record.prepared)
        #: Deletes consumed ledgers that retention lets go.
        self._trimmer = Trimmer(self, self._ledgers, config, backend, self._record.lock, loop)
        self._appends = AppendPath(name, config, backend, self._ledgers, self._cache, self._roller,
                                   self._listeners, self.write_stats, self._trimmer.schedule, loop, flushes)
        # The publish path, once per entry: straight to the append path.
        self.append_then = self._appends.append_then
        self._fence_listeners = EntryListeners(name, loop)  # reused: callbacks, each run once per fence
        self._appends.on_fenced = self._on_fenced
        self._cursors = CursorSet(self, store, self._key, loop)
        #: The durable cursors by name.
        self.cursors: dict[str, ManagedCursor] = self._cursors.by_name

    def __repr__(self) -> str:
        return f"<ManagedLedger {self.name!r} {self.state} last={self.last_confirmed}>"

    # ================================================================= stats

    @property
    def state(self) -> str:
        """``open``, ``closing``, ``closed``, ``fenced`` or ``failed``."""
        return self._appends.state

    @property
    def record_version(self) -> int:
        """The version of the metadata record this instance last read or
        wrote (for the logs: two instances showing one version saw the same
        record; an instance behind the store's version was overtaken)."""
        return self._record.version

    @property
    def last_confirmed(self) -> Position | None:
        """The last durable entry; None if no entry is stored."""
        return self._appends.last_confirmed

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
        fails with ``StorageError`` (see :mod:`.append_path`). The data is
        copied only if it is not ``bytes``; ``bytes`` are kept by reference.
        Raises ``ValueError`` at once for an empty or oversized entry.
        """
        return self._appends.append(data)

    def append_then(self, data: bytes, on_stored: Waiter) -> None:  # replaced per instance in __init__
        """:meth:`append` without a future: ``on_stored(ledger_id,
        first_entry_id, count, error)`` is called instead, once per run of
        appends that gave it one after the other (the contract is in
        :mod:`.waiters`).

        Raises at once, appending nothing and never calling ``on_stored``:
        ``StorageError`` when the managed ledger takes no appends (closing,
        closed, fenced, failed), ``ValueError`` for an empty or oversized
        entry. So every call that returns is told exactly once, in call order.
        """
        self._appends.append_then(data, on_stored)

    def add_listener(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` on the loop whenever new entries are confirmed
        (coalesced: at most once per loop iteration). Returns an unsubscribe
        function."""
        return self._listeners.add(callback)

    @property
    def listener_count(self) -> int:
        """Callbacks :meth:`add_listener` registered and not removed."""
        return len(self._listeners)

    def add_fence_listener(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` on the loop once this instance learns that
        another owner opened the managed ledger (by its record, a cursor's
        write or the data path's fence), or that a cursor's record changed
        elsewhere (``CursorFencedError``: that cursor persists nothing
        more); :attr:`let_go_reason` says which. Whoever serves from it
        should let go (the broker unloads the topic; a new instance reads
        the records as stored). Returns an unsubscribe function."""
        return self._fence_listeners.add(callback)

    def _on_fenced(self, error: StorageError) -> None:
        log.info("%s: fenced: %s", self.name, error)
        self.let_go_reason = self.let_go_reason or error
        self._fence_listeners.wake()

    def _cursor_fenced(self, error: StorageError) -> None:
        """A cursor's write met its record changed elsewhere (:mod:`.cursor`)."""
        log.warning("%s: %s", self.name, error)
        self.let_go_reason = self.let_go_reason or error
        self._fence_listeners.wake()

    async def _put_cursor(self, key: str, value: bytes, version: int) -> int:
        """Write a cursor's record, fenced by the managed ledger's own
        (:meth:`.ledger_record.ManagedLedgerRecord.put_beside`); its new version.
        ``ManagedLedgerFencedError`` fences this instance too."""
        with self._fenced_on_conflict():
            return await self._record.put_beside(key, value, version)

    async def _delete_cursor(self, key: str) -> None:
        """Delete a cursor's record while the managed ledger is ours (as :meth:`_put_cursor`)."""
        with self._fenced_on_conflict():
            await self._record.delete_beside(key)

    @contextlib.contextmanager
    def _fenced_on_conflict(self):
        """Around a write of the record (or a cursor beside it): a conflict
        means another owner took over, so this instance stops appending too."""
        try:
            yield
        except ManagedLedgerFencedError as error:
            self._appends.fence(error)
            raise

    def _refusal(self) -> StorageError:
        return self._appends.refusal()

    def _next_append_position(self) -> Position:
        return self._appends.next_append_position()

    # ======================================================= positions, reads

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
        if meta is not None and pos.entry_id + 1 < self._appends.assigned(meta):
            return Position(pos.ledger_id, pos.entry_id + 1)
        ids = ledgers.ids
        for i in range(bisect_right(ids, pos.ledger_id), len(ids)):
            later = ledgers.metas[ids[i]]
            if self._appends.assigned(later):
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
        if self._appends.state is CLOSED:
            raise self._refusal()
        return await self._reader.read_entries(start, max_entries, max_bytes)

    async def read_runs(self, start: Position, max_entries: int,
                        max_bytes: int | None = None) -> list[tuple[int, int, list[bytes]]]:
        """:meth:`read_entries` as runs ``(ledger id, first entry id, the
        entries' bytes)``, no object per entry (bulk reads: FETCH_ENTRIES)."""
        if self._appends.state is CLOSED:
            raise self._refusal()
        return await self._reader.read_runs(start, max_entries, max_bytes)

    async def find_first(self, predicate: Callable[[Entry], bool]) -> Position | None:
        """Binary search for the first confirmed entry where ``predicate`` is
        True, assuming it is False...False True...True over the log (e.g.
        publish time >= t). None if it is True nowhere."""
        return await find_first(self._ledgers, self.read_entries, predicate)

    # ====================================================== open, ownership

    async def _recover(self, creating: Callable[[], Awaitable[None]] | None = None) -> None:
        """Open: recover what a crash or a previous owner left
        (:func:`.recovery.recover`; ``creating`` as there), start a new
        ledger, load the cursors, watch the record."""
        found = await recover(self._record, self._backend, self._new_ledger_id, creating)
        self.swept_at_open = found.swept
        self._properties = found.properties
        for meta in found.ledgers:
            self._ledgers.add(meta)
            if meta.entries:
                self._appends.last_confirmed = Position(meta.ledger_id, meta.entries - 1)
        self._appends.install(found.current, found.current_handle)
        await self._cursors.load()
        self._record.watch(self._on_record_change)
        self._schedule_trim()

    async def _save(self, ledger_docs: list[dict], properties: dict[str, str],
                    beside: CreateBeside | None = None) -> LedgerHandle | None:
        """Write the record (:meth:`.ledger_record.ManagedLedgerRecord.save`,
        with a ledger's creation ``beside`` it; caller holds its lock). A
        conflict fences this instance: the current ledger refuses further batches."""
        with self._fenced_on_conflict():
            return await self._record.save(ledger_docs, properties, beside)

    def _check_not_fenced(self) -> None:
        if self._appends.state is FENCED:
            raise self._appends.error

    def _on_record_change(self) -> None:
        if self._appends.state in (OPEN, CLOSING) and self._owner_check is None:
            self._owner_check = self._loop.create_task(self._check_owner())

    async def _check_owner(self) -> None:
        """Someone else may have written our record (another broker opened
        this managed ledger): if so, stop writing now rather than at our
        next metadata write. The data path's own check (the backend's fence
        after each write) is ``_fenced_on_disk``."""
        try:
            async with self._record.lock:
                # The notification may be our own save's, come before its
                # answer: known by now, with no read.
                if not self._record.heard_unknown_change() or not await self._record.changed_elsewhere():
                    return
                if self._appends.state not in (OPEN, CLOSING):
                    return
                error = ManagedLedgerFencedError(f"managed ledger {self.name!r} was taken over or deleted elsewhere")
                log.warning("%s: %s", self.name, error)
                self._appends.fence(error)  # the current ledger refuses batches still queued
                self._appends.fail(error)
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

    def set_storage_profile(self, profile: str | None) -> None:
        """How the backend commits this managed ledger's next appends
        (``"latency"``, ``"cost"``; None: the backend's default). Applies at
        once to the open ledger and to every ledger it rolls to; not
        persisted (the broker sets it from the namespace policy)."""
        self._appends.storage_profile = profile
        if self._appends.current is not None:
            self._backend.set_profile(self._appends.current, profile)

    def _schedule_trim(self) -> None:
        self._trimmer.schedule()

    def _cursor_moved(self, mark_delete: Position) -> None:
        """A durable cursor persisted a new mark-delete position (trimming may follow)."""
        self._trimmer.cursor_moved(mark_delete)

    def _is_current(self, meta: LedgerMeta) -> bool:
        return meta is self._appends.current_meta

    async def _forget_ledgers(self, victims: list[LedgerMeta]) -> None:
        """Trimmed: record the ledgers gone, then forget them (caller holds the record's lock)."""
        await self._save(self._ledgers.docs(without=victims), self._properties)
        for meta in victims:
            self._appends.remove_meta(meta)

    def _check_usable(self) -> None:
        if self._appends.state in (CLOSED, FENCED):
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

    async def close(self, *, keep_cursors: bool = False) -> None:
        """Finish pending appends, seal the current ledger, record it closed
        (an empty current ledger is left as it is: see below).

        Appends issued after ``close()`` was called fail with
        ``ManagedLedgerClosedError``. Idempotent. A fenced or failed managed
        ledger just releases its files. With ``keep_cursors`` the durable
        cursors stay open and keep persisting acknowledgements (a topic moving
        to another broker takes the acks its clients send until they are told
        where it went) until :meth:`close_cursors`.

        A close once begun finishes even if its caller is cancelled (an
        unload cut short by the broker's stop): it runs as a task of its own
        that every caller waits for. Cancelled half way, the managed ledger
        stayed ``closing`` for good, and the broker's own close of it at
        stop waited forever.
        """
        if self._closing is None:
            appends = self._appends
            if appends.state is CLOSED:
                return
            # Here, not in the task: appends are refused from the call on.
            clean = appends.state is OPEN
            if clean:
                appends.state = CLOSING
            self._closing = self._loop.create_task(self._close(clean, keep_cursors))
            self._closing.add_done_callback(_retrieved)
        await asyncio.shield(self._closing)

    async def _close(self, clean: bool, keep_cursors: bool) -> None:
        appends = self._appends
        try:
            await appends.drain()
        except Exception:
            clean = False
        appends.stop_timer()
        await self._roller.discard_prepared()
        self._roller.stop()
        await self._trimmer.stop()
        if not keep_cursors:
            await self.close_cursors()
        current = appends.current
        if (clean and appends.state is CLOSING and current is not None
                and await self._backend.taken_over(current.ledger_id)):
            # A new owner took the managed ledger over (this broker's session
            # lapsed before it heard): that owner recovers and seals this
            # ledger and owns the metadata, whose compare-and-set would refuse
            # ours anyway. Nothing to do, and nothing wrong.
            log.info("%s: ledger %d was fenced by a new owner, which seals it", self.name, current.ledger_id)
            clean = False
        if clean and appends.state is CLOSING and current is not None:
            try:
                await appends.seal_current()
            except Exception as exc:
                log.error("%s: close could not seal ledger: %s", self.name, exc)
        appends.close_handles()
        self._cache.clear()
        self._record.stop_watching()
        appends.closed()
        self._on_closed(self)

    def _abandon(self) -> None:
        """Stop dead, as a crash would (see ``ManagedLedgerFactory.abandon``):
        pending appends are cancelled, nothing is written."""
        self._appends.abandon()
        self._record.stop_watching()
        self._roller.stop()
        self._trimmer.abandon()
        self._appends.close_handles()


def _retrieved(task: asyncio.Task) -> None:
    """A close's error reaches whoever awaits it; if its callers were all
    cancelled, it is not also logged as never retrieved."""
    if not task.cancelled():
        task.exception()
