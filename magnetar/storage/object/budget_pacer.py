"""The PUT budget yields while the broker's loop is short of cores.

Each commit has a fixed cost beside its bytes: the broker wakes the
object store's and etcd's client threads, and the store and etcd spend
CPU of their own (measured on a 2-core machine: about 2.5 ms in SeaweedFS
and 1.2 ms in etcd a commit). With commits at once (the ``latency``
profile), a broker of thousands of written topics makes as many commits
as its pipeline allows, and on a machine it shares that fixed cost is
paid out of the cores its loop then waits for: every receipt is late by
that wait. Fewer, bigger commits give those cores back.

So :class:`BudgetPacer` watches how long the loop waited for a core
(:mod:`.core_wait`) and sets the budget's rate (:mod:`.put_budget`):

- every ``every_s`` (read when a commit begins, so an idle broker reads
  nothing), the wait over the time since the last reading is the
  *pressure*, a fraction of that time;
- at ``HIGH_PRESSURE`` or more, the rate drops to ``DECREASE`` times the
  lower of itself and the commits actually begun (so the first step
  bites even where the pipeline, not the budget, was the bound), never
  below ``floor``;
- at ``LOW_PRESSURE`` or less, it grows by ``INCREASE`` (and one PUT a
  second, so it leaves a low rate) up to the configured rate, the
  ceiling; in between it holds.

The floor bounds what yielding costs a receipt: at 25 commits a second, a
batch waits 20 ms on average for the next one. A floor at or above the
ceiling, or no reader (another system), leaves the budget as configured.
No I/O but the reader's; the clock is ``time.monotonic`` unless given.
"""
from __future__ import annotations

import time
from typing import Callable

from .core_wait import CoreWait, core_wait_reader
from .put_budget import PutBudget

#: Seconds between two readings of the loop's wait.
EVERY_S = 0.5
#: The loop waiting for a core this share of the time or more: yield.
HIGH_PRESSURE = 0.2
#: This share or less: give the rate back.
LOW_PRESSURE = 0.08
DECREASE = 0.7
INCREASE = 1.15


class BudgetPacer:
    """Sets ``budget.rate`` between ``floor`` and its configured rate from
    the loop's wait for a core (see the module docstring). ``reader``
    makes the reader, on the first commit (so it reads the thread the
    commits begin on, the loop's)."""

    def __init__(self, budget: PutBudget, floor: float, *,
                 reader: Callable[[], CoreWait | None] = core_wait_reader,
                 clock: Callable[[], float] = time.monotonic, every_s: float = EVERY_S) -> None:
        self.budget = budget
        self.ceiling = budget.rate
        self.floor = max(0.0, floor)
        self.every_s = every_s
        self._make_reader = reader
        self._clock = clock
        self._wait: CoreWait | None = None
        self._began = 0  # commits begun since the last reading
        self._at = 0.0
        self._waited = 0.0
        self.active = budget.limited and self.floor < self.ceiling
        #: The loop's wait for a core in all (seconds, for /metrics), and the last pressure read.
        self.core_wait_s = 0.0
        self.pressure = 0.0

    def commit_begun(self) -> None:
        """Count a commit; once ``every_s`` passed, read the wait and set the rate."""
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
        self._at, self._waited, self._began = now, waited, 0
        self.budget.set_rate(next_rate(self.budget.rate, begun, self.pressure, self.floor, self.ceiling))


def next_rate(rate: float, begun: float, pressure: float, floor: float, ceiling: float) -> float:
    """The budget's next rate, from its rate now, the commits begun a second
    and the pressure (the share of time the loop waited for a core)."""
    if pressure >= HIGH_PRESSURE:
        return max(floor, min(rate, begun) * DECREASE)
    if pressure <= LOW_PRESSURE:
        return min(ceiling, rate * INCREASE + 1)
    return rate
