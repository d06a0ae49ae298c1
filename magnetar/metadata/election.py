"""Leader election on the MetadataStore contract alone.

The leader is whoever holds the ephemeral key ``path``: a contender creates it
with ``expected_version=-1`` under its session, and the store lets only one
create succeed. Losers watch the key and try again when it is deleted (the
leader released it or its session ended). A periodic retry (``retry_s``)
backs the watch up and notices a contender's own session ending while it
waits.

Usage::

    election = LeaderElection(store, "/leaders/load-manager", b"broker-1", session)
    await election.acquire()          # returns once we lead
    ...                               # check election.is_leader before acting
    await election.release()

Leadership is lost when the key is deleted or overwritten by someone else, or
when the session closes or expires (the session's end hook, so at once even
if the store cannot reach its server); ``is_leader`` turns False and
``wait_lost()`` returns. As in any lease-based scheme, a leader must still
fence the resources it writes (topic epochs, ledger fencing): a paused process
can believe it leads for a moment after it stopped.
"""
from __future__ import annotations

import asyncio

from .store import (
    BadVersion,
    EventType,
    MetadataStore,
    KeyNotFound,
    Notification,
    MetadataSession,
    SessionExpired,
    Watch,
    check_key,
)


class LeaderElection:
    """One contender for the leadership held by the key ``path``."""

    def __init__(
        self,
        store: MetadataStore,
        path: str,
        value: bytes,
        session: MetadataSession,
        *,
        retry_s: float = 1.0,
    ) -> None:
        check_key(path)
        self.path = path
        self._store = store
        self._value = value
        self._session = session
        self._retry_s = retry_s
        self._version: int | None = None  # the version we created, while we lead
        self._guard: Watch | None = None
        self._hooked = False
        self._lost = asyncio.Event()
        self._lost.set()

    @property
    def is_leader(self) -> bool:
        return self._version is not None and self._session.alive

    async def try_acquire(self) -> bool:
        """One attempt: True if we lead now (or already did), False if someone else does.

        Raises SessionExpired if the session is closed or expired.
        """
        if self.is_leader:
            return True
        try:
            version = await self._store.put(self.path, self._value, -1, session=self._session)
        except BadVersion:
            return False
        self._version = version
        self._lost.clear()
        if not self._hooked:
            # A lost session ends leadership at once, even when the store
            # cannot tell us of our key's deletion (etcd unreachable).
            self._hooked = True
            self._session.on_end(lambda _session: self._step_down())
        # Registered after our put returned, so it cannot see that put or any
        # earlier change; every event it gets is about our key (contract).
        self._guard = self._store.watch(self.path, self._on_guard_event)
        return True

    async def acquire(self) -> None:
        """Wait until we lead. Raises SessionExpired if the session ends first.

        Cancelling the call leaves us not leading (unless the create had
        already succeeded, in which case ``is_leader`` is True).
        """
        deleted = asyncio.Event()

        def on_event(note: Notification) -> None:
            if note.key == self.path and note.type is EventType.DELETED:
                deleted.set()

        # Watch before trying, and clear before each try, so a delete that
        # lands between a failed try and the wait is not missed.
        watch = self._store.watch(self.path, on_event)
        try:
            while True:
                if not self._session.alive:
                    raise SessionExpired(f"session {self._session.id} ended before {self.path} was won")
                deleted.clear()
                if await self.try_acquire():
                    return
                try:
                    await asyncio.wait_for(deleted.wait(), self._retry_s)
                except TimeoutError:
                    pass
        finally:
            watch.cancel()

    async def release(self) -> None:
        """Stop leading and delete our key. Safe to call when not leading."""
        version = self._version
        self._step_down()
        if version is None or not self._session.alive:
            return  # nothing held, or the session's end removes the key
        try:
            await self._store.delete(self.path, expected_version=version)
        except (KeyNotFound, BadVersion):
            pass  # already gone, or no longer ours

    async def wait_lost(self) -> None:
        """Return once we do not lead (at once if we do not)."""
        await self._lost.wait()

    async def leader(self) -> bytes | None:
        """The current leader's value, or None if nobody leads."""
        record = await self._store.get(self.path)
        return None if record is None else record.value

    def _on_guard_event(self, note: Notification) -> None:
        if note.key == self.path and note.type in (EventType.DELETED, EventType.MODIFIED):
            self._step_down()

    def _step_down(self) -> None:
        self._version = None
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None
        self._lost.set()
