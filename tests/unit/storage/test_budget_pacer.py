"""The PUT budget's pacer: it yields while the loop waits for a core, never
below its floor, and gives the rate back once the loop runs again; and the
reader of a thread's wait it relies on reads a real wait."""
from __future__ import annotations

import os
import threading
import time

import pytest

from magnetar.storage.object.budget_pacer import (
    DECREASE, HIGH_PRESSURE, LOW_PRESSURE, BudgetPacer, next_rate)
from magnetar.storage.object.core_wait import core_wait_reader, read_wait_s
from magnetar.storage.object.put_budget import PutBudget


class Loop:
    """A clock and a wait for a core that the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waited = 0.0

    def reader(self):
        return lambda: self.waited

    def run(self, pacer: BudgetPacer, seconds: float, commits: int, pressure: float) -> None:
        """``commits`` begun, evenly over ``seconds``, the loop waiting ``pressure`` of the time."""
        for _ in range(commits):
            self.now += seconds / commits
            self.waited += pressure * seconds / commits
            pacer.commit_begun()


def paced(rate: float = 250, floor: float = 25) -> tuple[PutBudget, BudgetPacer, Loop]:
    loop = Loop()
    budget = PutBudget(rate, clock=lambda: loop.now)
    return budget, BudgetPacer(budget, floor, reader=loop.reader, clock=lambda: loop.now), loop


def test_high_pressure_cuts_below_what_was_begun_never_below_the_floor():
    # The pipeline, not the budget, bounded the commits (100 begun of 250): the first cut bites at once.
    assert next_rate(250, 100, HIGH_PRESSURE, 25, 250) == pytest.approx(100 * DECREASE)
    assert next_rate(30, 30, 0.9, 25, 250) == 25
    assert next_rate(250, 300, 0.5, 25, 250) == pytest.approx(250 * DECREASE)


def test_low_pressure_gives_the_rate_back_up_to_the_ceiling_and_between_it_holds():
    assert next_rate(25, 0, LOW_PRESSURE, 25, 250) > 25
    assert next_rate(249, 249, 0.0, 25, 250) == 250
    middle = (HIGH_PRESSURE + LOW_PRESSURE) / 2
    assert next_rate(100, 100, middle, 25, 250) == 100


def test_a_loop_short_of_cores_brings_the_rate_to_the_floor_and_back_once_it_runs():
    budget, pacer, loop = paced()
    assert pacer.active and budget.rate == 250
    loop.run(pacer, 10, 1000, pressure=0.4)
    assert budget.rate == 25 and pacer.pressure == pytest.approx(0.4)
    assert pacer.core_wait_s == pytest.approx(0.4 * 10, rel=0.1)
    loop.run(pacer, 30, 1500, pressure=0.0)
    assert budget.rate == 250


def test_the_rate_changes_only_every_half_second():
    budget, pacer, loop = paced()
    loop.run(pacer, 0.4, 100, pressure=0.9)  # the first commit only starts the reading
    assert budget.rate == 250
    loop.run(pacer, 0.2, 50, pressure=0.9)
    assert budget.rate < 250


@pytest.mark.parametrize("rate, floor", [(0, 25), (25, 25), (20, 25)])
def test_without_a_budget_or_with_the_floor_at_it_nothing_moves(rate, floor):
    budget, pacer, loop = paced(rate, floor)
    assert not pacer.active
    loop.run(pacer, 5, 500, pressure=0.9)
    assert budget.rate == rate


def test_where_the_wait_cannot_be_read_the_budget_stays_as_configured():
    budget = PutBudget(250)
    pacer = BudgetPacer(budget, 25, reader=lambda: None)
    pacer.commit_begun()
    assert not pacer.active and budget.rate == 250
    # A reader that stops reading (its thread ended) gives the configured rate back.
    loop = Loop()
    readings = iter([0.0, 1.0])
    pacer = BudgetPacer(budget, 25, reader=lambda: lambda: next(readings, None), clock=lambda: loop.now)
    for _ in range(2):
        loop.now += 0.6
        pacer.commit_begun()
    assert pacer.active and budget.rate < 250
    loop.now += 0.6
    pacer.commit_begun()
    assert not pacer.active and budget.rate == 250


def test_a_new_rate_keeps_the_burst_in_proportion_and_the_background_share():
    now = [0.0]
    budget = PutBudget(200, clock=lambda: now[0])  # burst 20
    budget.set_rate(50)
    assert (budget.rate, budget.burst) == (50, 5)
    for _ in range(5):
        assert budget.delay() == 0
        budget.take()
    assert budget.delay() == pytest.approx(1 / 50)
    budget.set_rate(200)
    assert budget.burst == 20  # back where it was, not drifted by the clamp at 1
    budget.set_rate(0)
    assert budget.rate == 200  # 0 would mean "no budget": ignored
    unlimited = PutBudget(0)
    unlimited.set_rate(50)
    assert not unlimited.limited


def test_background_puts_keep_their_share_of_a_new_rate():
    import asyncio

    async def run() -> float:
        budget = PutBudget(100)
        await budget.acquire_background()  # makes the background bucket
        budget.set_rate(10)
        return budget._background.rate

    from magnetar.storage.object.put_budget import BACKGROUND_SHARE
    assert asyncio.run(run()) == pytest.approx(10 * BACKGROUND_SHARE)


def test_the_reader_reads_a_real_wait_for_a_core():
    """Busy threads on the one core this thread may use: its wait grows."""
    reader = core_wait_reader()
    assert reader is not None, "Linux records each thread's wait for a core in /proc"
    cpu = min(os.sched_getaffinity(0))
    before_affinity = os.sched_getaffinity(0)
    stop = threading.Event()
    spinners = []
    try:
        os.sched_setaffinity(0, {cpu})  # this thread only; threads started now inherit it

        def spin() -> None:
            while not stop.is_set():
                pass

        spinners = [threading.Thread(target=spin, daemon=True) for _ in range(2)]
        for t in spinners:
            t.start()
        first = reader()
        deadline = time.monotonic() + 20
        while reader() - first < 0.01:
            assert time.monotonic() < deadline, "the thread never waited for its core"
            sum(range(10_000))  # runnable, sharing the core with the spinners
    finally:
        stop.set()
        for t in spinners:
            t.join()
        os.sched_setaffinity(0, before_affinity)


def test_a_thread_that_ended_reads_none(tmp_path):
    assert read_wait_s(str(tmp_path / "missing")) is None
    (tmp_path / "odd").write_text("not numbers\n")
    assert read_wait_s(str(tmp_path / "odd")) is None
    assert core_wait_reader(tid=2**30) is None
