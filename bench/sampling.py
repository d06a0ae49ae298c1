"""A reading taken every half second on a thread while a workload runs, so
that rates cover its steady part only (a run's set-up creates topics and
ledgers, whose writes are not the steady state's)."""
from __future__ import annotations

import threading
import time
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class PeriodicSampler(Generic[T]):
    """``with PeriodicSampler(read) as s: ...`` keeps ``(monotonic time,
    read())`` pairs in ``s.samples``; a read that raises OSError (a broker
    restarting, a scrape refused) is skipped, not fatal."""

    def __init__(self, read: Callable[[], T], interval: float = 0.5) -> None:
        self.read = read
        self.interval = interval
        self.samples: list[tuple[float, T]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "PeriodicSampler[T]":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), self.read()))
            except OSError:
                pass
            self._stop.wait(self.interval)

    def span(self, begin: float, end: float) -> tuple[float, T, T] | None:
        """(seconds, first, last) of the samples taken inside ``[begin,
        end]``; None with fewer than two."""
        inside = [s for s in self.samples if begin <= s[0] <= end]
        if len(inside) < 2:
            return None
        (t0, first), (t1, last) = inside[0], inside[-1]
        return t1 - t0, first, last
