"""One hand-over of appends to the backend per event-loop pass, for every
managed ledger of a factory at once.

A broker writing many topics appends one entry to each of many ledgers per
pass of the event loop (10,000 topics at 20,000 msg/s: most passes append
once to each of dozens of ledgers). Handing each ledger's buffer over on its
own cost a ``call_soon`` and a backend call per ledger, that is per entry;
here the ledgers with something buffered register once (:meth:`FlushPass.add`),
one callback per pass takes every buffer (``take``, in registration order)
and the backend receives them in one ``submit_many`` call.

Contract: within a managed ledger nothing changes (its appends reach the
backend in call order, in one batch per pass); between ledgers no order is
promised, as before. A ledger may flush itself meanwhile (a rollover, a
drain): it is then registered with nothing to take, which costs nothing.
If the backend refuses at once (stopped: ``StorageError``), every batch of
the pass is told that error, as a lone ``submit`` would have told it.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from .errors import StorageError

log = logging.getLogger(__name__)

class Flushable(Protocol):
    def take(self) -> "tuple | None":
        """Its buffered appends as ``(handle, datas, nbytes, callback)`` for the
        backend's ``submit_many`` (and its registration cleared), or None."""
        ...


class FlushPass:
    """Hands the buffered appends of the registered ledgers to ``backend``
    once per pass of ``loop`` (see the module docstring)."""

    __slots__ = ("_backend", "_loop", "_dirty", "_scheduled")

    def __init__(self, backend, loop: asyncio.AbstractEventLoop) -> None:
        self._backend = backend
        self._loop = loop
        self._dirty: list[Flushable] = []
        self._scheduled = False

    def add(self, ledger: Flushable) -> None:
        """``ledger`` has appends to hand over this pass (call once per pass:
        its own flag says whether it is registered)."""
        self._dirty.append(ledger)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.run)

    def run(self) -> None:
        """Take every registered ledger's buffer and submit them together."""
        self._scheduled = False
        dirty, self._dirty = self._dirty, []
        writes = []
        for ledger in dirty:
            taken = ledger.take()
            if taken is not None:
                writes.append(taken)
        if not writes:
            return
        try:
            self._backend.submit_many(writes, self._loop)
        except StorageError as exc:  # refused at once (stopped): nothing of the pass was queued
            _tell_all(writes, exc)


def _tell_all(writes: list[tuple], error: BaseException) -> None:
    for _, _, _, callback in writes:
        try:
            callback(error)
        except Exception:
            log.exception("an append batch's callback failed")
