"""Counts of a managed ledger's writes for the metrics: how long a write
took from its flush to the writer's answer (durable under the sync policy),
and how big its entries were, in Pulsar's buckets.

Counted per flush batch, not per entry (the publish path pays one bisect per
batch): a batch's entries share its latency, and are counted in the bucket
of their mean size. The counts only grow; the metrics turn them into rates.
"""
from __future__ import annotations

from bisect import bisect_left

#: Upper bounds (ms) of Pulsar's storage write latency buckets; a last one counts the rest.
LATENCY_BOUNDS_MS = (0.5, 1, 5, 10, 20, 50, 100, 200, 1000)
#: Upper bounds (bytes) of Pulsar's entry size buckets; a last one counts the rest.
SIZE_BOUNDS = (128, 512, 1024, 2048, 4096, 16 * 1024, 100 * 1024, 1024 * 1024)


class WriteStats:
    __slots__ = ("latency", "latency_sum_ms", "sizes", "size_sum", "entries")

    def __init__(self) -> None:
        self.latency = [0] * (len(LATENCY_BOUNDS_MS) + 1)
        self.latency_sum_ms = 0.0
        self.sizes = [0] * (len(SIZE_BOUNDS) + 1)
        self.size_sum = 0
        self.entries = 0

    def record(self, entries: int, nbytes: int, seconds: float) -> None:
        """``entries`` written together (``nbytes`` of them) in ``seconds``."""
        ms = seconds * 1000
        self.latency[bisect_left(LATENCY_BOUNDS_MS, ms)] += entries
        self.latency_sum_ms += ms * entries
        self.sizes[bisect_left(SIZE_BOUNDS, nbytes / entries)] += entries
        self.size_sum += nbytes
        self.entries += entries
