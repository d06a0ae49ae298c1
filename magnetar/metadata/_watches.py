"""Prefix watches shared by the backends. Used on the event loop thread only."""
from __future__ import annotations

import asyncio
import itertools
from typing import Callable, Iterable

from .store import Notification, Watch, check_key, key_matches

Callback = Callable[[Notification], None]


def check_unwatched(roots: Iterable[str]) -> tuple[str, ...]:
    """``roots`` as a tuple of keys without a trailing "/"; ValueError for a bad key or "/" itself."""
    found = []
    for root in roots:
        stripped = root.rstrip("/")
        if not stripped and root.startswith("/"):
            raise ValueError("the whole key space cannot be left unwatched")
        check_key(stripped)
        found.append(stripped)
    return tuple(found)


class WatchRegistry:
    """Registered watches and their delivery.

    ``dispatch`` picks the matching watches at the moment it is called and
    schedules each callback with ``loop.call_soon``, so a slow or failing
    callback cannot stall the writer or the other callbacks. A watch cancelled
    between dispatch and delivery is skipped: after ``cancel()`` nothing arrives.

    A backend whose changes reach it late (etcd's watch stream) passes each
    change's revision: a watch added with ``after=r`` skips changes at or
    below revision ``r``, i.e. those whose writer had already been answered.
    """

    def __init__(self, unwatched: Iterable[str] = ()) -> None:
        #: Key roots whose changes no watch hears (see ``open_store``): a watch
        #: inside one is refused, and their changes are dropped here, so every
        #: backend behaves alike whether or not its changes stream includes them.
        self.unwatched = check_unwatched(unwatched)
        self._watches: dict[int, tuple[str, Callback, int]] = {}
        #: The watches by their prefix without a trailing "/": a change is
        #: matched by looking up its key's ancestors, not by trying every
        #: watch (a broker holds one watch per managed ledger, and object
        #: storage commits a record per ledger at a time).
        self._by_prefix: dict[str, set[int]] = {}
        self._ids = itertools.count()

    def add(self, prefix: str, callback: Callback, after: int = 0) -> Watch:
        check_key(prefix)
        if self.is_unwatched(prefix):
            raise ValueError(f"cannot watch {prefix!r}: changes under {self.unwatched} are not watched in this store")
        wid = next(self._ids)
        self._watches[wid] = (prefix, callback, after)
        self._by_prefix.setdefault(prefix.rstrip("/"), set()).add(wid)
        return Watch(lambda: self._remove(wid))

    def _remove(self, wid: int) -> None:
        found = self._watches.pop(wid, None)
        if found is not None:
            base = found[0].rstrip("/")
            ids = self._by_prefix[base]
            ids.discard(wid)
            if not ids:
                del self._by_prefix[base]

    def _matching(self, key: str) -> list[int]:
        """Ids of the watches whose prefix is ``key`` or one of its ancestors, in the order added."""
        by_prefix = self._by_prefix
        found = list(by_prefix.get(key, ()))
        i = key.rfind("/")
        while i >= 0:
            found.extend(by_prefix.get(key[:i], ()))
            i = key.rfind("/", 0, i)
        return sorted(found)

    def dispatch(
        self,
        loop: asyncio.AbstractEventLoop,
        notifications: Iterable[Notification],
        revision: int | None = None,
    ) -> None:
        if not self._watches:
            return
        for note in notifications:
            if self.is_unwatched(note.key):
                continue
            for wid in self._matching(note.key):
                prefix, callback, after = self._watches[wid]
                if key_matches(prefix, note.key) and (revision is None or revision > after):
                    loop.call_soon(self._deliver, wid, callback, note)

    def _deliver(self, wid: int, callback: Callback, note: Notification) -> None:
        if wid in self._watches:
            callback(note)

    def is_unwatched(self, key: str) -> bool:
        """True if ``key`` is an unwatched root or lies under one."""
        # Checked for every change: without unwatched roots (most stores) it costs one test.
        return bool(self.unwatched) and any(key_matches(root, key) for root in self.unwatched)

    def clear(self) -> None:
        self._watches.clear()
        self._by_prefix.clear()
