"""Prefix watches shared by the backends. Used on the event loop thread only."""
from __future__ import annotations

import asyncio
import itertools
from typing import Callable, Iterable

from .store import Notification, Watch, check_key, key_matches

Callback = Callable[[Notification], None]


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

    def __init__(self) -> None:
        self._watches: dict[int, tuple[str, Callback, int]] = {}
        self._ids = itertools.count()

    def add(self, prefix: str, callback: Callback, after: int = 0) -> Watch:
        check_key(prefix)
        wid = next(self._ids)
        self._watches[wid] = (prefix, callback, after)
        return Watch(lambda: self._watches.pop(wid, None))

    def dispatch(
        self,
        loop: asyncio.AbstractEventLoop,
        notifications: Iterable[Notification],
        revision: int | None = None,
    ) -> None:
        for note in notifications:
            for wid, (prefix, callback, after) in list(self._watches.items()):
                if key_matches(prefix, note.key) and (revision is None or revision > after):
                    loop.call_soon(self._deliver, wid, callback, note)

    def _deliver(self, wid: int, callback: Callback, note: Notification) -> None:
        if wid in self._watches:
            callback(note)

    def clear(self) -> None:
        self._watches.clear()
