"""How long something took, counted in fixed buckets (seconds) for the
metrics: lookups, bundle transfers. Cheap to record (one bisect); the
counts only grow and the metrics expose them as a Prometheus histogram."""
from __future__ import annotations

from bisect import bisect_left

#: Upper bounds in seconds; a last bucket counts the rest (+Inf).
BOUNDS_S = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0)


class DurationCounts:
    __slots__ = ("buckets", "total_s", "count")

    def __init__(self) -> None:
        self.buckets = [0] * (len(BOUNDS_S) + 1)
        self.total_s = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect_left(BOUNDS_S, seconds)] += 1
        self.total_s += seconds
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus buckets: (upper bound, count at or below it), +Inf last."""
        out, running = [], 0
        for bound, n in zip([*map(str, BOUNDS_S), "+Inf"], self.buckets):
            running += n
            out.append((bound, running))
        return out
