"""Who hears that new entries were confirmed: coalesced wake-ups.

A dispatcher waiting at the tail of a managed ledger registers a callback;
:meth:`EntryListeners.wake` (called by the append path once per completed
batch) runs every callback once on the next turn of the loop, however many
batches completed before it (one loop callback for all the managed ledgers
woken meanwhile). A callback that raises is logged; the others
still run.
"""
from __future__ import annotations

import asyncio
import itertools
import weakref
import logging
from typing import Callable

log = logging.getLogger(__name__)


class EntryListeners:
    def __init__(self, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self.name = name  # the managed ledger's, for the log
        self._loop = loop
        # Made at the first ``add``: most managed ledgers of a broker with
        # many topics have no listener (nobody follows the topic), and a dict
        # and a counter each were two more objects per loaded topic for the
        # garbage collector's first passes after a load to walk.
        self._callbacks: dict[int, Callable[[], None]] | None = None
        self._ids: "itertools.count[int] | None" = None
        self._scheduled = False

    def add(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Register ``callback``; returns the function that unregisters it."""
        if self._callbacks is None:
            self._callbacks, self._ids = {}, itertools.count()
        key = next(self._ids)
        self._callbacks[key] = callback
        return lambda: self._callbacks.pop(key, None)

    def __len__(self) -> int:
        """Callbacks registered now."""
        return len(self._callbacks) if self._callbacks is not None else 0

    def __bool__(self) -> bool:
        """Whether a callback is registered (the append path asks at each hand-over)."""
        return bool(self._callbacks)

    def wake(self) -> None:
        """New entries are confirmed: call every callback soon, once."""
        if not self._scheduled and self._callbacks:
            self._scheduled = True
            due = _due.get(self._loop)
            if due is None:
                _due[self._loop] = due = []
                self._loop.call_soon(_notify_due, self._loop)
            due.append(self)

    def _notify(self) -> None:
        self._scheduled = False
        for callback in list(self._callbacks.values()):
            try:
                callback()
            except Exception:
                log.exception("%s: entry listener failed", self.name)


#: Per event loop, the listeners woken since its last pass, in wake order:
#: one loop callback runs them all (a commit at 10,000 written topics wakes
#: thousands; a callback each was a handle and a turn of the loop per entry).
_due: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[EntryListeners]]" = weakref.WeakKeyDictionary()


def _notify_due(loop: asyncio.AbstractEventLoop) -> None:
    for listeners in _due.pop(loop, ()):
        listeners._notify()
