"""Counts of a managed ledger's reads for the metrics: how long each read
took (tail cache or file), how many entries reads returned, and how many
reads had to go to the file behind the cache.

A read is one ``read_entries`` call that returned entries, whatever their
number (a dispatcher's or a replicator's batch): the latency buckets count
reads, in the bounds of the write latency buckets (:mod:`.write_stats`),
so the two histograms read side by side. The counts only grow; the metrics
turn them into rates.
"""
from __future__ import annotations

from bisect import bisect_left

from .write_stats import LATENCY_BOUNDS_MS


class ReadStats:
    __slots__ = ("latency", "latency_sum_ms", "reads", "entries", "misses")

    def __init__(self) -> None:
        self.latency = [0] * (len(LATENCY_BOUNDS_MS) + 1)
        self.latency_sum_ms = 0.0
        self.reads = 0
        self.entries = 0
        #: Reads that went to the file (part of the range was not in the tail cache).
        self.misses = 0

    def record(self, entries: int, seconds: float) -> None:
        """One read returned ``entries`` entries in ``seconds``."""
        ms = seconds * 1000
        self.latency[bisect_left(LATENCY_BOUNDS_MS, ms)] += 1
        self.latency_sum_ms += ms
        self.reads += 1
        self.entries += entries
