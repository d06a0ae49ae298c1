"""A batch of appends handed to the backend together (:class:`AppendBatch`):
its ledger, first entry id, the entries' waiters and byte count; the
entries complete together, in order, when the backend answers.

The batch is its own backend callback: ``batch(error)`` hands the answer
to its path (``BatchAnswers.on_written``: the append path, which tells the
waiters). ``failed`` marks a batch the path already failed (a later answer
is ignored there).
"""
from __future__ import annotations

import asyncio
from typing import Protocol

_Future = asyncio.Future


class BatchAnswers(Protocol):
    """Who hears a batch's answer (:class:`~.append_path.AppendPath`)."""

    def on_written(self, batch: "AppendBatch", error: BaseException | None) -> None: ...


class AppendBatch:
    """Entries handed to the backend together (one ``submit``); they
    complete together. The batch is its own backend callback
    (``batch(error)``): at 10,000 written topics about 10,000 batches are in
    flight at once, and a ``functools.partial`` per batch was four more
    objects each (the partial, its bound method, its arguments, its keywords)
    for the garbage collector to walk (docs/object-storage.md). For the same
    reason a batch whose entries share one callback (a topic's run: nearly
    every batch there) keeps that callback and the count, not a tuple."""

    __slots__ = ("path", "ledger_id", "first", "count", "waiter", "_futures", "nbytes", "failed", "started")

    def __init__(self, path: BatchAnswers, ledger_id: int, first: int, futures: list, nbytes: int,
                 started: float = 0.0) -> None:
        self.path = path
        self.started = started  # loop time of the flush (the write latency metric)
        self.ledger_id = ledger_id
        self.first = first
        self.count = n = len(futures)
        waiter = futures[0]
        if waiter.__class__ is not _Future and (n == 1 or futures.count(waiter) == n):
            self.waiter, self._futures = waiter, None  # one callback for the whole batch
        else:
            self.waiter, self._futures = None, tuple(futures)
        self.nbytes = nbytes
        self.failed = False

    @property
    def futures(self) -> tuple:
        """The waiter of each entry, in order."""
        futures = self._futures
        return futures if futures is not None else (self.waiter,) * self.count

    def __call__(self, error: BaseException | None) -> None:
        """The backend's answer: ``path.on_written(self, error)``."""
        self.path.on_written(self, error)
