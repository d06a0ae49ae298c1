"""In-memory MetadataStore: the reference backend for unit tests.

Nothing survives the process. Sessions never expire on their own (there is no
other process to lose contact with); ``close()`` removes their ephemeral keys.

Construct with ``MemoryMetadataStore()`` or, like the durable backends,
``await MemoryMetadataStore.open()``.
"""
from __future__ import annotations

import asyncio
import itertools

from ._watches import WatchRegistry
from .store import (
    BadVersion,
    EventType,
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

_session_ids = itertools.count(1)


class MemorySession(MetadataSession):
    def __init__(self, store: "MemoryMetadataStore") -> None:
        super().__init__()
        self.id = f"mem-{next(_session_ids)}"
        self._store = store
        self._alive = True

    @property
    def alive(self) -> bool:
        return self._alive

    async def close(self) -> None:
        if self._alive:
            self._alive = False
            self._store._drop_session(self.id)
            self._mark_ended(expired=False)


class MemoryMetadataStore(MetadataStore):
    def __init__(self, *, unwatched: tuple[str, ...] = ()) -> None:
        self._data: dict[str, Record] = {}
        self._owner: dict[str, str] = {}
        self._counters: dict[str, int] = {}
        self._watches = WatchRegistry(unwatched)
        self._sessions: list[MemorySession] = []

    @classmethod
    async def open(cls, *, unwatched: tuple[str, ...] = ()) -> "MemoryMetadataStore":
        """Same as ``MemoryMetadataStore()``; mirrors the durable backends' ``open``."""
        return cls(unwatched=unwatched)

    async def get(self, key: str) -> Record | None:
        check_key(key)
        return self._data.get(key)

    async def put(self, key, value, expected_version=None, *, session=None) -> int:
        check_key(key)
        check_expected_version(expected_version)
        value = check_value(value)
        if session is not None and not session.alive:
            raise SessionExpired(f"session {session.id} is closed")
        current = self._data.get(key)
        if expected_version is not None:
            if expected_version == -1 and current is not None:
                raise BadVersion(f"{key} exists (version {current.version})")
            if expected_version >= 0:
                if current is None:
                    raise KeyNotFound(key)
                if current.version != expected_version:
                    raise BadVersion(f"{key} is at version {current.version}, not {expected_version}")
        version = 0 if current is None else current.version + 1
        self._data[key] = Record(key, value, version, session is not None)
        if session is not None:
            self._owner[key] = session.id
        else:
            self._owner.pop(key, None)
        self._notify(EventType.CREATED if current is None else EventType.MODIFIED, key, version)
        return version

    async def delete(self, key, expected_version=None) -> None:
        check_key(key)
        check_expected_version(expected_version)
        current = self._data.get(key)
        if current is None:
            raise KeyNotFound(key)
        if expected_version is not None and expected_version != current.version:
            raise BadVersion(f"{key} is at version {current.version}, not {expected_version}")
        self._remove(key)

    def _remove(self, key: str) -> None:
        del self._data[key]
        self._owner.pop(key, None)
        self._notify(EventType.DELETED, key)

    async def transaction(self, compares, writes, *, versions: bool = True) -> list[int | None]:
        compares, writes = check_transaction(compares, writes)
        failed = []
        for c in compares:
            current = self._data.get(c.key)
            if (current.version if current is not None else -1) != c.version:
                failed.append(c.key)
        if failed:
            raise TransactionFailed(failed)
        found: list[int | None] = []
        for w in writes:  # no await in here: atomic on the loop
            current = self._data.get(w.key)
            if isinstance(w, Put):
                version = 0 if current is None else current.version + 1
                self._data[w.key] = Record(w.key, bytes(w.value), version, False)
                self._owner.pop(w.key, None)
                self._notify(EventType.CREATED if current is None else EventType.MODIFIED, w.key, version)
                found.append(version)
            else:
                if current is not None:
                    self._remove(w.key)
                found.append(None)
        return found if versions else [None] * len(found)

    async def children(self, key: str) -> list[str]:
        check_key(key)
        prefix = key.rstrip("/") + "/"
        # k != prefix: for key "/" the root record itself is not its own child
        names = {k[len(prefix):].split("/", 1)[0] for k in self._data if k.startswith(prefix) and k != prefix}
        return sorted(names)

    async def increment(self, key: str, delta: int = 1) -> int:
        check_key(key)
        check_delta(delta)
        value = self._counters.get(key, 0) + delta
        self._counters[key] = value
        return value

    def watch(self, prefix, callback) -> Watch:
        return self._watches.add(prefix, callback)

    def _notify(self, type_: EventType, key: str, version: int | None = None) -> None:
        self._watches.dispatch(asyncio.get_running_loop(), [Notification(type_, key, version)])

    async def create_session(self, ttl_s: float = 10.0) -> MetadataSession:
        if not ttl_s > 0:
            raise ValueError(f"session ttl must be > 0, not {ttl_s!r}")
        session = MemorySession(self)
        self._sessions.append(session)
        return session

    def _drop_session(self, session_id: str) -> None:
        self._sessions = [s for s in self._sessions if s.id != session_id]
        for key in [k for k, owner in self._owner.items() if owner == session_id]:
            self._remove(key)

    async def close(self) -> None:
        for session in list(self._sessions):
            await session.close()
        self._watches.clear()
