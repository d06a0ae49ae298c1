"""The PUT budget searches for the commit rate that answers fastest while
the broker's loop is short of cores.

Each commit has a fixed cost beside its bytes: the broker wakes the
object store's and etcd's client threads, and the store and etcd spend
CPU of their own (measured on a 2-core machine: about 2.5 ms in SeaweedFS
and 1.2 ms in etcd a commit). With commits at once (the ``latency``
profile), a broker of many written topics makes as many commits as its
pipeline allows; on a machine it shares, that cost is paid out of the
cores its loop then waits for, and every receipt is late by the wait.
Fewer, bigger commits give cores back, but each batch then waits longer
for its commit (at 25 commits a second, 20 ms on average). Which wins
depends on the machine and the load (measured 2026-12-02: at 10,000
topics and 10,000 msg/s, 25 commits a second halved the loop's wait on
one machine and doubled p50 on a faster one), so :class:`BudgetPacer` does not guess:

- every ``every_s``, when a commit begins (an idle broker reads nothing),
  it reads how long the loop waited for a core (:mod:`.core_wait`): the
  share of the time since the last reading is the *pressure*;
- from the configured rate (the ceiling), it starts searching once the
  pressure reaches ``HIGH_PRESSURE``: each period it steps the budget's
  rate (:mod:`.put_budget`) by ``STEP`` in its direction, down first
  (the first step from the lower of the rate and the commits actually
  begun, so it bites even where the pipeline was the bound), and turns
  round when the commits' mean latency (first batch's arrival to the
  last receipt, :mod:`.commit_timings`) came out higher than in the
  period before (going up, ``UP_MARGIN`` higher: where the rate makes no
  clear difference, the machine's noise must not walk it down): it climbs
  towards the fastest rate and stays around it;
- once the pressure is at ``LOW_PRESSURE`` or less, it gives the rate
  back (``INCREASE``, and one PUT a second) up to the ceiling.

Never below ``floor``. A floor at or above the ceiling, or no reader
(another system), leaves the budget as configured. No I/O but the
reader's; the clock is ``time.monotonic`` unless given.
"""
from __future__ import annotations

import time
from typing import Callable

from .commit_timings import Histogram
from .core_wait import CoreWait, core_wait_reader
from .put_budget import PutBudget

#: Seconds between two readings (and steps): a second holds 25 commits or more at any floor worth having.
EVERY_S = 1.0
#: The loop waiting for a core this share of the time or more: start searching.
HIGH_PRESSURE = 0.2
#: This share or less: give the rate back.
LOW_PRESSURE = 0.08
#: A step down multiplies the rate by it, a step up divides.
STEP = 0.8
INCREASE = 1.15
#: Going up, turn round only when commits came out this much slower (a bias to the configured rate).
UP_MARGIN = 0.1
DOWN, UP = -1, 1


class BudgetPacer:
    """Sets ``budget.rate`` between ``floor`` and its configured rate (see
    the module docstring). ``latency`` is the histogram of the commits'
    whole time (``CommitTimings.phases["total"]``); ``reader`` makes the
    reader of the loop's wait, on the first commit (so it reads the thread
    commits begin on, the loop's)."""

    def __init__(self, budget: PutBudget, floor: float, latency: Histogram, *,
                 reader: Callable[[], CoreWait | None] = core_wait_reader,
                 clock: Callable[[], float] = time.monotonic, every_s: float = EVERY_S) -> None:
        self.budget = budget
        self.ceiling = budget.rate
        self.floor = max(0.0, floor)
        self.every_s = every_s
        self._latency = latency
        self._make_reader = reader
        self._clock = clock
        self._wait: CoreWait | None = None
        self._began = 0  # commits begun since the last reading
        self._at = 0.0
        self._waited = 0.0
        self._seen = (0.0, 0)  # the latency histogram's sum and count at the last reading
        self._judged: float | None = None  # the commits' mean latency in the period of the last step
        self.active = budget.limited and self.floor < self.ceiling
        self.searching = False
        self.direction = DOWN
        #: The loop's wait for a core in all (seconds, for /metrics), and the last pressure read.
        self.core_wait_s = 0.0
        self.pressure = 0.0

    def commit_begun(self) -> None:
        """Count a commit; once ``every_s`` passed, read the wait and step the rate."""
        if not self.active:
            return
        self._began += 1
        now = self._clock()
        if self._wait is None:
            self._wait = self._make_reader()
            waited = self._wait() if self._wait is not None else None
            if waited is None:  # nothing to read here: the budget stays as configured
                self.active = False
                return
            self._at, self._waited, self._began = now, waited, 0
            self._seen = (self._latency.sum, self._latency.count)
            return
        elapsed = now - self._at
        if elapsed < self.every_s:
            return
        waited = self._wait()
        if waited is None:
            self.active = False
            self.budget.set_rate(self.ceiling)
            return
        self.core_wait_s += waited - self._waited
        self.pressure = (waited - self._waited) / elapsed
        begun = self._began / elapsed
        seen = (self._latency.sum, self._latency.count)
        ended = seen[1] - self._seen[1]
        mean = (seen[0] - self._seen[0]) / ended if ended > 0 else None
        self._at, self._waited, self._began, self._seen = now, waited, 0, seen
        self.budget.set_rate(self._next_rate(begun, mean))

    def stop(self) -> None:
        """The configured rate again, and no more steps (the broker is
        closing: its last PUTs are compactions, and no commit competes)."""
        self.active = False
        self.budget.set_rate(self.ceiling)

    def _next_rate(self, begun: float, mean: float | None) -> float:
        rate = self.budget.rate
        if self.pressure <= LOW_PRESSURE or not (self.searching or self.pressure >= HIGH_PRESSURE):
            self.searching, self.direction, self._judged = False, DOWN, None
            return min(self.ceiling, rate * INCREASE + 1) if self.pressure <= LOW_PRESSURE else rate
        if self.searching and mean is not None and self._judged is not None:
            # The last step made commits slower: back. Up needs to be clearly slower (the
            # machine's noise alone would otherwise walk the rate down from where it was set).
            if mean > self._judged * (1 + UP_MARGIN if self.direction == UP else 1):
                self.direction = -self.direction
        self.searching = True
        if mean is not None:
            self._judged = mean
        return step(rate, begun, self.direction, self.floor, self.ceiling)


def step(rate: float, begun: float, direction: int, floor: float, ceiling: float) -> float:
    """One step of the search, within ``floor`` and ``ceiling``: up, or
    down; down from the ceiling, from the lower of it and the commits
    begun a second (where the pipeline, not the budget, was the bound).
    Below the ceiling a step down is as long as a step up: the commits
    begun fall short of the rate (a bucket refilling, a pipeline full),
    and stepping from them would drift the search down."""
    if direction == DOWN:
        return max(floor, (min(rate, begun) if rate >= ceiling else rate) * STEP)
    return min(ceiling, rate / STEP)
