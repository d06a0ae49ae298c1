"""Who hears that new entries were confirmed: coalesced wake-ups.

A dispatcher waiting at the tail of a managed ledger registers a callback;
:meth:`EntryListeners.wake` (called by the append path once per completed
batch) runs every callback once on the next turn of the loop, however many
batches completed before it. A callback that raises is logged; the others
still run.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Callable

log = logging.getLogger(__name__)


class EntryListeners:
    def __init__(self, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self.name = name  # the managed ledger's, for the log
        self._loop = loop
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._scheduled = False

    def add(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Register ``callback``; returns the function that unregisters it."""
        key = next(self._ids)
        self._callbacks[key] = callback
        return lambda: self._callbacks.pop(key, None)

    def wake(self) -> None:
        """New entries are confirmed: call every callback soon, once."""
        if not self._scheduled and self._callbacks:
            self._scheduled = True
            self._loop.call_soon(self._notify)

    def _notify(self) -> None:
        self._scheduled = False
        for callback in list(self._callbacks.values()):
            try:
                callback()
            except Exception:
                log.exception("%s: entry listener failed", self.name)
