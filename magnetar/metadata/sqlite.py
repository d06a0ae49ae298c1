"""Durable MetadataStore on one SQLite file, for the standalone broker.

Open with ``store = await SqliteMetadataStore.open(path)`` (parent folders are
created); the plain constructor does no I/O and an unopened store refuses
every operation. ``await store.close()`` (or ``async with``) releases it.

Durability: WAL journal with ``synchronous=FULL``, so once ``put``, ``delete``
or ``increment`` returns, the change survives a crash of the process or the
machine.

Threading: every SQLite call runs on one dedicated worker thread, so the event
loop never waits on the disk, and operations are applied one at a time in the
order they were issued; each one is a single transaction (a compare-and-set
reads and writes inside one ``BEGIN IMMEDIATE``). A write whose caller is
cancelled may or may not happen (it is dropped only if the worker had not
started it); if it happens, watchers are told all the same.

Single owner: the file belongs to one store at a time (an exclusive ``flock``
on ``<path>.lock``); opening it twice raises :class:`MetadataError`. Hence the
ephemeral keys found at open belong to sessions of a process that is gone, and
``open`` deletes them.

Sessions are local to the process: a background task per session refreshes
its keepalive every ``ttl/3``. If the event loop stalls so that no refresh
happens for ``ttl``, the session reads as expired at once and its ephemeral
keys are deleted on the next tick, like a ZooKeeper session after a long pause.

Failure modes beyond the contract's: ``MetadataError`` for a store that is not
open or already closed, or a file locked by another store; ``sqlite3.Error``
for disk-level failures (the operation did not happen, except that an error
raised by the commit itself leaves its outcome unknown).
"""
from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

from ._watches import WatchRegistry
from .store import (
    BadVersion,
    EventType,
    MetadataError,
    MetadataStore,
    KeyNotFound,
    Notification,
    Record,
    MetadataSession,
    SessionExpired,
    Watch,
    Put,
    TransactionFailed,
    check_delta,
    check_transaction,
    check_expected_version,
    check_key,
    check_value,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX; the single-owner check is skipped
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    key     TEXT PRIMARY KEY,
    value   BLOB NOT NULL,
    version INTEGER NOT NULL,
    session TEXT            -- NULL for persistent keys
);
CREATE INDEX IF NOT EXISTS kv_by_session ON kv(session) WHERE session IS NOT NULL;
CREATE TABLE IF NOT EXISTS counters (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""


class SqliteSession(MetadataSession):
    """A session of a :class:`SqliteMetadataStore`; see the module docstring."""

    def __init__(self, store: "SqliteMetadataStore", ttl_s: float) -> None:
        super().__init__()
        self.id = f"sqlite-{uuid.uuid4().hex}"
        self.ttl_s = ttl_s
        self._store = store
        self._deadline = time.monotonic() + ttl_s
        self._ended = False
        self._ending: asyncio.Task[None] | None = None
        self._keepalive: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        # The deadline counts even before the keepalive task notices, so a
        # process waking from a long stall never trusts a lapsed session.
        return not self._ended and time.monotonic() <= self._deadline

    def _start(self) -> None:
        self._keepalive = asyncio.get_running_loop().create_task(
            self._keep_alive(), name=f"keepalive {self.id}"
        )

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            now = time.monotonic()
            if now > self._deadline:
                await self._end(expired=True)
                return
            self._deadline = now + self.ttl_s

    async def close(self) -> None:
        """End the session and delete its ephemeral keys. Idempotent."""
        await self._end()

    def _end(self, *, expired: bool = False) -> asyncio.Future[None]:
        # Every caller (close, expiry, store close) awaits the same task, so a
        # second close returns only once the keys are really gone.
        if self._ending is None:
            self._ended = True
            # Reported before the keys are deleted: the owner must stop
            # serving now, not once the disk has caught up.
            self._mark_ended(expired=expired)
            if self._keepalive is not None and self._keepalive is not asyncio.current_task():
                self._keepalive.cancel()
            self._ending = asyncio.get_running_loop().create_task(self._store._end_session(self.id))
        return asyncio.shield(self._ending)


class SqliteMetadataStore(MetadataStore):
    """MetadataStore on a SQLite file; see the module docstring."""

    def __init__(self, path: str | Path, *, unwatched: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self._shut = False  # the connection is closed and the worker gone
        self._watches = WatchRegistry(unwatched)
        self._sessions: dict[str, SqliteSession] = {}
        # Worker-thread state: only touched inside jobs run on the executor.
        self._conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        self._live_sessions: set[str] = set()

    @classmethod
    async def open(cls, path: str | Path, *, unwatched: tuple[str, ...] = ()) -> "SqliteMetadataStore":
        """Open (creating if needed) the store at ``path``.

        Deletes ephemeral keys left by a previous process. Raises
        MetadataError if another store holds the file, or if the file has a
        newer schema than this code knows.
        """
        store = cls(path, unwatched=unwatched)
        store._loop = asyncio.get_running_loop()
        store._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="magnetar-metadata")
        try:
            await store._loop.run_in_executor(store._executor, store._open_sync)
        except BaseException:
            store._closed = store._shut = True
            # If we were cancelled, the open may still finish on the worker;
            # queue the close behind it so the file and its lock are released.
            store._executor.submit(store._close_sync)
            store._executor.shutdown(wait=False)
            raise
        return store

    # --- worker thread -------------------------------------------------

    def _open_sync(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock_exclusive(self.path)
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, so one
            # operation is exactly one transaction.
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if mode.lower() != "wal":
                    raise MetadataError(f"{self.path}: cannot use WAL journal (got {mode})")
                conn.execute("PRAGMA synchronous=FULL")
                found = conn.execute("PRAGMA user_version").fetchone()[0]
                if found > SCHEMA_VERSION:
                    raise MetadataError(
                        f"{self.path} has metadata schema {found}; this Magnetar knows up to {SCHEMA_VERSION}"
                    )
                conn.execute("BEGIN IMMEDIATE")
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                # The file has one owner (the lock), so every session in it
                # belongs to a process that has exited.
                conn.execute("DELETE FROM kv WHERE session IS NOT NULL")
                conn.execute("COMMIT")
            except BaseException:
                conn.close()
                raise
        except BaseException:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise
        _fsync_dir(self.path.parent)  # make the new db/wal directory entries durable
        self._conn = conn

    def _close_sync(self) -> None:
        try:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def _transaction(self, body: Callable[[sqlite3.Connection], tuple[T, list[Notification]]]) -> T:
        """Run ``body`` in one write transaction; announce its notifications after commit."""
        conn = self._conn
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            result, notes = body(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # the original error is the one worth reporting
            raise
        if notes:
            # Scheduled from the worker, in commit order, before the caller's
            # result is delivered: watchers learn of the change even if the
            # caller was cancelled, and before the caller resumes.
            try:
                self._loop.call_soon_threadsafe(self._watches.dispatch, self._loop, notes)
            except RuntimeError:
                pass  # the loop is closed; nobody is left to tell
        return result

    # --- plumbing ------------------------------------------------------

    async def _submit(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._loop.run_in_executor(self._executor, fn, *args)

    def _check_open(self) -> None:
        if self._loop is None:
            raise MetadataError("store not open: use 'await SqliteMetadataStore.open(path)'")
        if self._closed:
            raise MetadataError(f"metadata store {self.path} is closed")

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        self._check_open()
        try:
            return await self._submit(fn, *args)
        except sqlite3.Error as exc:  # disk full, I/O error, locked: the store's failure, said as such
            raise MetadataError(f"metadata store {self.path}: {exc}") from exc

    # --- contract ------------------------------------------------------

    async def get(self, key: str) -> Record | None:
        check_key(key)
        return await self._run(self._get_sync, key)

    def _get_sync(self, key: str) -> Record | None:
        row = self._conn.execute("SELECT value, version, session FROM kv WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        value, version, session = row
        return Record(key, bytes(value), version, session is not None)

    async def put(self, key, value, expected_version=None, *, session=None) -> int:
        check_key(key)
        check_expected_version(expected_version)
        value = check_value(value)
        session_id = None
        if session is not None:
            if not session.alive:
                raise SessionExpired(f"session {session.id} is closed or expired")
            session_id = session.id
        return await self._run(self._transaction, lambda c: self._put_tx(c, key, value, expected_version, session_id))

    def _put_tx(self, conn, key, value, expected_version, session_id):
        # Re-checked here: the session may have ended while this job waited
        # in the queue, and an ephemeral key must never outlive its session.
        if session_id is not None and session_id not in self._live_sessions:
            raise SessionExpired(f"session {session_id} is closed or expired")
        row = conn.execute("SELECT version FROM kv WHERE key = ?", (key,)).fetchone()
        current = None if row is None else row[0]
        if expected_version == -1 and current is not None:
            raise BadVersion(f"{key} exists (version {current})")
        if expected_version is not None and expected_version >= 0:
            if current is None:
                raise KeyNotFound(key)
            if current != expected_version:
                raise BadVersion(f"{key} is at version {current}, not {expected_version}")
        version = 0 if current is None else current + 1
        conn.execute(
            "INSERT OR REPLACE INTO kv (key, value, version, session) VALUES (?, ?, ?, ?)",
            (key, value, version, session_id),
        )
        event = EventType.CREATED if current is None else EventType.MODIFIED
        return version, [Notification(event, key, version)]

    async def delete(self, key, expected_version=None) -> None:
        check_key(key)
        check_expected_version(expected_version)
        await self._run(self._transaction, lambda c: self._delete_tx(c, key, expected_version))

    def _delete_tx(self, conn, key, expected_version):
        row = conn.execute("SELECT version FROM kv WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise KeyNotFound(key)
        if expected_version is not None and expected_version != row[0]:
            raise BadVersion(f"{key} is at version {row[0]}, not {expected_version}")
        conn.execute("DELETE FROM kv WHERE key = ?", (key,))
        return None, [Notification(EventType.DELETED, key)]

    async def transaction(self, compares, writes, *, versions: bool = True) -> list[int | None]:
        compares, writes = check_transaction(compares, writes)
        found = await self._run(self._transaction, lambda c: self._transaction_tx(c, compares, writes))
        return found if versions else [None] * len(found)

    def _transaction_tx(self, conn, compares, writes):
        def version_of(key):
            row = conn.execute("SELECT version FROM kv WHERE key = ?", (key,)).fetchone()
            return -1 if row is None else row[0]

        failed = [c.key for c in compares if version_of(c.key) != c.version]
        if failed:
            raise TransactionFailed(failed)  # the caller's ROLLBACK: nothing written
        versions, notes = [], []
        for w in writes:
            current = version_of(w.key)
            if isinstance(w, Put):
                version = current + 1
                conn.execute("INSERT OR REPLACE INTO kv (key, value, version, session) VALUES (?, ?, ?, NULL)",
                             (w.key, bytes(w.value), version))
                notes.append(Notification(EventType.CREATED if current == -1 else EventType.MODIFIED, w.key, version))
                versions.append(version)
            else:
                if current != -1:
                    conn.execute("DELETE FROM kv WHERE key = ?", (w.key,))
                    notes.append(Notification(EventType.DELETED, w.key))
                versions.append(None)
        return versions, notes

    async def children(self, key: str) -> list[str]:
        check_key(key)
        prefix = key.rstrip("/") + "/"
        return await self._run(self._children_sync, prefix)

    def _children_sync(self, prefix: str) -> list[str]:
        # Keys below prefix sort between "…/" and "…0" ('0' follows '/'), in
        # SQLite's byte order too, so this is an index range scan.
        upper = prefix[:-1] + "0"
        rows = self._conn.execute("SELECT key FROM kv WHERE key > ? AND key < ?", (prefix, upper))
        return sorted({k[len(prefix):].split("/", 1)[0] for (k,) in rows})

    async def increment(self, key: str, delta: int = 1) -> int:
        check_key(key)
        check_delta(delta)
        return await self._run(self._transaction, lambda c: self._increment_tx(c, key, delta))

    def _increment_tx(self, conn, key, delta):
        row = conn.execute("SELECT value FROM counters WHERE key = ?", (key,)).fetchone()
        value = (0 if row is None else row[0]) + delta
        conn.execute("INSERT OR REPLACE INTO counters (key, value) VALUES (?, ?)", (key, value))
        return value, []

    def watch(self, prefix, callback) -> Watch:
        self._check_open()
        return self._watches.add(prefix, callback)

    async def create_session(self, ttl_s: float = 10.0) -> MetadataSession:
        if not ttl_s > 0:
            raise ValueError(f"session ttl must be > 0, not {ttl_s!r}")
        session = SqliteSession(self, ttl_s)
        # Registered through the worker so it is ordered with the writes.
        await self._run(self._live_sessions.add, session.id)
        self._sessions[session.id] = session
        session._start()
        return session

    async def _end_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        if self._shut:
            return  # the connection is gone; the next open drops the keys
        await self._submit(self._transaction, lambda c: self._end_session_tx(c, session_id))

    def _end_session_tx(self, conn, session_id):
        self._live_sessions.discard(session_id)
        keys = [k for (k,) in conn.execute("SELECT key FROM kv WHERE session = ? ORDER BY key", (session_id,))]
        conn.execute("DELETE FROM kv WHERE session = ?", (session_id,))
        return None, [Notification(EventType.DELETED, k) for k in keys]

    async def close(self) -> None:
        """Close sessions (deleting their ephemeral keys), cancel watches, close the file.

        Idempotent. Operations issued before ``close()`` complete first;
        operations issued after it raise MetadataError.
        """
        if self._closed or self._loop is None:
            self._closed = True
            return
        self._closed = True
        try:
            for session in list(self._sessions.values()):
                await session.close()
        finally:
            self._watches.clear()
            self._shut = True
            await self._submit(self._close_sync)
            # The worker is idle now (we just awaited its last job).
            self._executor.shutdown(wait=False)


def _lock_exclusive(db_path: Path) -> int:
    """Hold ``<db>.lock`` exclusively; the fd keeps the lock until closed.

    A separate file, because SQLite's own POSIX locks on the database may
    interact with flock on some systems.
    """
    fd = os.open(f"{db_path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    if fcntl is None:
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        except OSError:
            holder = ""
        os.close(fd)
        who = f"process {holder}" if holder.isdigit() else "another process"
        raise MetadataError(f"{db_path} is already open by {who} (another broker on the same data directory?): "
                            f"stop it, or give this one another --data-dir") from None
    # Who holds it, for the message another process gets.
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # not possible on every platform; SQLite syncs the files themselves
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
