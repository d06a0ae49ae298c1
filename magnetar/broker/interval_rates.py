"""Rates over the last stats interval, measured as Pulsar's brokers measure them.

Pulsar samples the counters of every topic, producer, subscription and
consumer once per ``statsUpdateFrequencyInSecs`` and reports, until the next
sample, the per-second rates of the interval that just ended. An
:class:`IntervalRates` is one object's sampler: the stats round
(``topics/stats_sampling.py``) hands it the object's growing counters each
interval, and readers (admin stats) take :attr:`IntervalRates.rates`, 0.0 until the first
sample. The counters start at 0 when the object is made, so the first
interval runs from then (what a new consumer took before the first sample
counts, as in Pulsar). Nothing here schedules work: the caller samples.
"""
from __future__ import annotations

import time


class IntervalRates:
    """Per-second rates of ``n`` growing counters between the last two samples."""

    __slots__ = ("_before", "_at", "rates")

    def __init__(self, n: int, now: float | None = None) -> None:
        self._before: tuple[int, ...] = (0,) * n
        self._at = time.monotonic() if now is None else now
        #: The rates of the last interval, in the counters' order (0.0 before the first sample).
        self.rates: tuple[float, ...] = (0.0,) * n

    def sample(self, counters: tuple[int, ...], now: float) -> None:
        """Take the counters' values at ``now`` (monotonic seconds). A counter
        that went down (an object replaced) counts as no traffic, not negative."""
        if now > self._at:
            elapsed = now - self._at
            self.rates = tuple(max(0, c - b) / elapsed for c, b in zip(counters, self._before))
        self._before, self._at = counters, now
