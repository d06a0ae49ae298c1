"""The worker side of the report protocol.

A worker process sends dicts to the runner through a multiprocessing queue:

- ``{"kind": "ready", "worker", "role", "cpu"}`` once its producers/consumers exist;
- ``{"kind": "stats", "worker", "role", "msgs", "bytes", "errors", "hist",
  "first", "last", "cpu", "final", "error"}`` at most every ``interval``
  seconds with the *deltas* since the previous one (``hist``: encoded HDR
  histogram of latencies recorded meanwhile, or None; ``series``: with
  ``series=True``, :meth:`.series.SeriesLog.take`, or None), and once more with
  ``final=True`` when the worker ends (``error``: why it stopped early, or None).

``first``/``last`` are ``time.monotonic()`` of the first and latest counted
message (system-wide on Linux, so comparable across processes): the runner
computes throughput over them, not over its own report ticks.

:class:`Reporter` is thread-safe: client callback threads and receive threads
update it while the worker's main loop calls :meth:`tick`.
"""
from __future__ import annotations

import threading
import time

from . import latency
from .series import SeriesLog


class Reporter:
    def __init__(self, queue, worker: int, role: str, interval: float = 0.5, series: bool = False) -> None:
        self.queue = queue
        self.worker = worker
        self.role = role
        self.interval = interval
        self._lock = threading.Lock()
        self._hist = latency.new_histogram()
        self._msgs = 0
        self._bytes = 0
        self._errors = 0
        self.first: float | None = None
        self.last: float | None = None
        self.last_error: str | None = None
        self._next = time.monotonic() + interval
        #: Sends, receipts and samples by time (:mod:`.series`), if asked for.
        self.series: SeriesLog | None = SeriesLog() if series else None

    def ready(self) -> None:
        self.queue.put({"kind": "ready", "worker": self.worker, "role": self.role, "cpu": time.process_time()})

    def add(self, msgs: int, nbytes: int, now: float | None = None) -> None:
        """Count ``msgs`` completed messages (acknowledged or received)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._msgs += msgs
            self._bytes += nbytes
            if self.series is not None:
                self.series.add_acked(msgs, now)
            if self.first is None:
                self.first = now
            self.last = now

    def latency_us(self, micros: int, count: int = 1, sent_at: float | None = None) -> None:
        """Record ``count`` samples of ``micros`` (entries sent and answered
        together); ``sent_at``: their send time (monotonic), for the series."""
        with self._lock:
            latency.record(self._hist, micros, count)
            if self.series is not None and sent_at is not None:
                self.series.add_sample(sent_at, micros)

    def sent(self, count: int, now: float) -> None:
        """Count ``count`` messages handed to the client at ``now`` (for the
        series only: a no-op without one)."""
        if self.series is not None:
            with self._lock:
                self.series.add_sent(count, now)

    def error(self, count: int = 1, reason: str | None = None) -> None:
        with self._lock:
            self._errors += count
            if reason:
                self.last_error = reason

    def tick(self, now: float | None = None) -> None:
        """Send the deltas if ``interval`` elapsed since the last report."""
        now = time.monotonic() if now is None else now
        if now >= self._next:
            self._next = now + self.interval
            self._send(final=False)

    def final(self, error: str | None = None) -> None:
        self._send(final=True, error=error)

    def _send(self, final: bool, error: str | None = None) -> None:
        with self._lock:
            msg = {
                "kind": "stats", "worker": self.worker, "role": self.role,
                "msgs": self._msgs, "bytes": self._bytes, "errors": self._errors,
                "hist": latency.encode(self._hist),
                "first": self.first, "last": self.last,
                "cpu": time.process_time(), "final": final,
                "error": error or (self.last_error if final else None),
                "series": self.series.take() if self.series is not None else None,
            }
            self._msgs = self._bytes = self._errors = 0
            self._hist.reset()
        self.queue.put(msg)
