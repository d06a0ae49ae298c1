"""A run's sending as a series of fixed-width buckets by send time.

With ``WorkloadSpec.series_s`` set, each producer worker keeps, beside its
histogram, what :class:`SeriesLog` holds: messages sent and acknowledged
per :data:`SLOT_S` slot of the system's monotonic clock (the same clock in
every process on Linux), and each latency sample as ``(send time, µs)``.
It ships them in its stats reports (``"series"``, deltas like the rest);
the runner adds them up (:meth:`SeriesLog.absorb`) and :func:`buckets`
cuts them into buckets of ``series_s`` seconds from the run's start:
messages sent, the latency of the samples *sent* in each (p50, p99, max:
exact, from the samples), and how many sampled receipts *arrived* in each
(``answered``, beside ``samples`` sent: a stall of the receipts is a dip,
then a burst). Acknowledged counts per slot are kept too (``acked``), but
they come with the sampled receipts (a receipt proves its producer's
earlier sends): with thousands of producers at a few messages a second
each, they lag the receipts by seconds.

Failure modes: none of its own; an empty bucket has ``None`` latencies.
"""
from __future__ import annotations

import bisect
import math

#: Width of the slots workers count sends and receipts in (seconds).
SLOT_S = 0.1
#: Each bucket counts its samples above these latencies (ms): ``over_50``, ``over_100``.
OVER_MS = (50, 100)


def slot_of(t: float) -> int:
    return math.floor(t / SLOT_S + 1e-6)  # 5.1 s is slot 51, not 50.99999


class SeriesLog:
    """Sent and acknowledged counts per slot, and latency samples with
    their send times. Not thread-safe: the worker's :class:`..reporting.Reporter`
    holds its lock around every call."""

    __slots__ = ("sent", "acked", "samples")

    def __init__(self) -> None:
        self.sent: dict[int, int] = {}
        self.acked: dict[int, int] = {}
        self.samples: list[tuple[float, int]] = []

    def add_sent(self, count: int, now: float) -> None:
        slot = slot_of(now)
        self.sent[slot] = self.sent.get(slot, 0) + count

    def add_acked(self, count: int, now: float) -> None:
        slot = slot_of(now)
        self.acked[slot] = self.acked.get(slot, 0) + count

    def add_sample(self, sent_at: float, micros: int) -> None:
        self.samples.append((sent_at, micros))

    def take(self) -> dict | None:
        """What was logged since the last take (None if nothing), and reset."""
        if not (self.sent or self.acked or self.samples):
            return None
        out = {"sent": self.sent, "acked": self.acked, "samples": self.samples}
        self.sent, self.acked, self.samples = {}, {}, []
        return out

    def absorb(self, delta: dict | None) -> None:
        """Add a worker's :meth:`take` (after a trip through a queue)."""
        if not delta:
            return
        for mine, theirs in ((self.sent, delta["sent"]), (self.acked, delta["acked"])):
            for slot, n in theirs.items():
                mine[int(slot)] = mine.get(int(slot), 0) + n
        self.samples.extend(tuple(s) for s in delta["samples"])


def bucket_index(t: float, begin: float, width: float) -> int:
    """The bucket of ``width`` seconds from ``begin`` that ``t`` falls in
    (the bench's broker-side columns use it too, so both sides agree)."""
    return math.floor((t - begin) / width + 1e-6)


def nearest_rank(ordered: list[int], q: float) -> int:
    """The ``q`` quantile (0..1) of sorted ``ordered`` by nearest rank."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def buckets(log: SeriesLog, begin: float, width: float, end: float | None = None) -> list[dict]:
    """``log`` in buckets of ``width`` seconds from ``begin`` (monotonic):
    ``{"t": start (s from begin), "sent", "acked", "samples", "answered",
    "p50_ms", "p99_ms", "max_ms", "over_50", "over_100"}``, through the last bucket holding anything (or
    ``end``). Slots and samples before ``begin`` are left out; a slot goes to
    the bucket its start falls in (the counts may be a slot, 0.1 s, early:
    the samples' latencies are not)."""
    def index(t: float) -> int:
        return bucket_index(t, begin, width)

    times = [slot * SLOT_S for slot in (*log.sent, *log.acked)] + [t for t, _ in log.samples]
    last = max((index(t) for t in times if t >= begin), default=-1)
    if end is not None:
        last = max(last, math.ceil((end - begin) / width - 1e-6) - 1)
    out = [{"t": round(i * width, 3), "sent": 0, "acked": 0, "samples": 0, "answered": 0} for i in range(last + 1)]
    latencies: list[list[int]] = [[] for _ in out]
    for key, counts in (("sent", log.sent), ("acked", log.acked)):
        for slot, n in counts.items():
            i = index(slot * SLOT_S)
            if 0 <= i <= last:
                out[i][key] += n
    for t, micros in log.samples:
        i = index(t)
        if 0 <= i <= last:
            latencies[i].append(micros)
        i = index(t + micros / 1e6)
        if 0 <= i <= last:
            out[i]["answered"] += 1
    for bucket, values in zip(out, latencies):
        values.sort()
        bucket["samples"] = len(values)
        for name, q in (("p50_ms", 0.5), ("p99_ms", 0.99), ("max_ms", 1.0)):
            bucket[name] = round(nearest_rank(values, q) / 1000, 3) if values else None
        # Where a run's tail sits: the samples above each bound (a bucket of 0.5 s is 3 % of 15 s).
        for bound_ms in OVER_MS:
            bucket[f"over_{bound_ms}"] = len(values) - bisect.bisect_right(values, bound_ms * 1000)
    return out
