"""Where a commit of the object backend spends its time, phase by phase.

One commit (:mod:`.commit`) goes through:

- ``gather``: from its first batch's arrival until it takes its batches
  (the commit interval, or the size bound; longer when every pipeline slot
  was busy);
- ``put``: writing its object, retries included;
- ``wait``: from the PUT's end until its transaction may begin (the
  previous commit's transaction is sent: :mod:`.commit_chain`; or, when it
  could not be chained, the previous commit has ended);
- ``transaction``: the metadata transaction(s), retries included, and the
  wait for the previous commit's receipts (receipts go in commit order);
- ``receipts``: completing its batches (the managed ledgers' callbacks);
- ``total``: first batch's arrival to the last receipt: what the slowest
  publish of the commit waited, less the client's and the network's part.

Cumulative histograms (seconds), read by ``/metrics``
(``magnetar_object_commit_phase_seconds{phase=...}``) and by the benchmark.
No I/O; observing costs a bisect.
"""
from __future__ import annotations

from bisect import bisect_left

PHASES = ("gather", "put", "wait", "transaction", "receipts", "total")
#: Upper bounds (seconds) of the buckets; the last bucket is +Inf.
BOUNDS = (0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5,
          1.0, 2.0, 5.0)


class Histogram:
    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BOUNDS) + 1)  # per bucket, not cumulative
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BOUNDS, seconds)] += 1
        self.sum += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus's buckets: ``(upper bound, count at or below it)``, +Inf last."""
        out, running = [], 0
        for bound, n in zip([*map(str, BOUNDS), "+Inf"], self.counts):
            running += n
            out.append((bound, running))
        return out


class CommitTimings:
    """One histogram per phase (``PHASES``)."""

    def __init__(self) -> None:
        self.phases = {name: Histogram() for name in PHASES}

    def observe(self, phase: str, seconds: float) -> None:
        self.phases[phase].observe(seconds)
