"""The PUT budget's pacer: while the loop waits for a core it searches for
the rate where commits answer fastest, within its floor and the budget,
and gives the rate back once the loop runs again; and the reader of a
thread's wait it relies on reads a real wait."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from magnetar.storage.object.budget_pacer import (
    DOWN, HIGH_PRESSURE, LOW_PRESSURE, STEP, UP, BudgetPacer, step)
from magnetar.storage.object.commit_timings import Histogram
from magnetar.storage.object.core_wait import core_wait_reader, read_wait_s
from magnetar.storage.object.put_budget import PutBudget


class Loop:
    """A clock, a wait for a core and the commits' latency, moved by hand.
    ``latency(rate)`` is what a commit takes at the budget's rate."""

    def __init__(self, latency=lambda rate: 0.02) -> None:
        self.now = 0.0
        self.waited = 0.0
        self.latency = latency
        self.totals = Histogram()

    def reader(self):
        return lambda: self.waited

    def run(self, pacer: BudgetPacer, seconds: float, pressure: float, commits: int | None = None) -> None:
        """Commits begun over ``seconds`` (as many as the budget's rate, or
        ``commits``), the loop waiting ``pressure`` of the time."""
        end = self.now + seconds
        while self.now < end - 1e-9:
            gap = seconds / commits if commits else 1 / pacer.budget.rate
            self.now += gap
            self.waited += pressure * gap
            pacer.commit_begun()
            self.totals.observe(self.latency(pacer.budget.rate))


def paced(rate: float = 250, floor: float = 25, latency=lambda rate: 0.02) -> tuple[PutBudget, BudgetPacer, Loop]:
    loop = Loop(latency)
    budget = PutBudget(rate, clock=lambda: loop.now)
    pacer = BudgetPacer(budget, floor, loop.totals, reader=loop.reader, clock=lambda: loop.now)
    return budget, pacer, loop


def test_a_step_down_starts_below_what_was_begun_and_never_leaves_the_bounds():
    # The pipeline, not the budget, bounded the commits (100 begun of 250): the first step bites at once.
    assert step(250, 100, DOWN, 25, 250) == pytest.approx(100 * STEP)
    assert step(30, 30, DOWN, 25, 250) == 25
    assert step(100, 70, DOWN, 25, 250) == pytest.approx(100 * STEP)  # below the ceiling: from the rate
    assert step(100, 100, UP, 25, 250) == pytest.approx(100 / STEP)
    assert step(240, 240, UP, 25, 250) == 250


def test_a_loop_short_of_cores_finds_the_rate_where_commits_answer_fastest():
    """Latency of a commit: the wait for a token (1 / 2 rate) plus what the
    commits' CPU costs everyone (rate / 20,000 s): fastest at 100 a second."""
    budget, pacer, loop = paced(latency=lambda rate: 1 / (2 * rate) + rate / 20_000)
    rates = []
    for _ in range(60):
        loop.run(pacer, 1, pressure=0.4)
        rates.append(budget.rate)
    assert pacer.searching
    late = rates[20:]
    assert 50 <= sum(late) / len(late) <= 200, rates
    assert min(late) >= 25 and max(late) < 250, rates


def test_where_fewer_commits_only_make_batches_wait_it_goes_back_up():
    budget, pacer, loop = paced(latency=lambda rate: 1 / (2 * rate))
    rates = []
    for _ in range(40):
        loop.run(pacer, 1, pressure=0.4)
        rates.append(budget.rate)
    assert min(rates) > 100, rates  # one step down, judged slower, and back
    assert sum(rates[10:]) / 30 > 180, rates


def test_where_commits_cost_everything_it_goes_to_the_floor_and_back_once_the_loop_runs():
    budget, pacer, loop = paced(latency=lambda rate: rate / 1000)
    for _ in range(30):
        loop.run(pacer, 1, pressure=0.4)
    assert budget.rate <= 25 / STEP and pacer.pressure == pytest.approx(0.4, rel=0.05)
    assert pacer.core_wait_s == pytest.approx(0.4 * 29, rel=0.1)
    for _ in range(30):
        loop.run(pacer, 1, pressure=0.0)
    assert budget.rate == 250 and not pacer.searching


def test_a_closing_broker_gets_its_configured_rate_back_and_the_pacer_steps_no_more():
    """Its last PUTs are compactions (``ObjectBackend.close``): a rate the
    busy loop had lowered would make them the floor's."""
    budget, pacer, loop = paced(latency=lambda rate: rate / 1000)
    for _ in range(30):
        loop.run(pacer, 1, pressure=0.4)
    assert budget.rate <= 25 / STEP
    pacer.stop()
    assert budget.rate == 250
    loop.run(pacer, 5, pressure=0.4, commits=50)
    assert budget.rate == 250


def test_a_loop_that_waits_a_little_keeps_the_rate():
    budget, pacer, loop = paced()
    for _ in range(10):
        loop.run(pacer, 1, pressure=(HIGH_PRESSURE + LOW_PRESSURE) / 2)
    assert budget.rate == 250 and not pacer.searching


def test_the_rate_changes_only_every_period():
    budget, pacer, loop = paced()
    loop.run(pacer, 0.9, pressure=0.9, commits=100)  # the first commit only starts the reading
    assert budget.rate == 250
    loop.run(pacer, 0.2, pressure=0.9, commits=20)
    assert budget.rate < 250


@pytest.mark.parametrize("rate, floor", [(0, 25), (25, 25), (20, 25)])
def test_without_a_budget_or_with_the_floor_at_it_nothing_moves(rate, floor):
    budget, pacer, loop = paced(rate, floor)
    assert not pacer.active
    loop.run(pacer, 5, pressure=0.9, commits=500)
    assert budget.rate == rate


def test_where_the_wait_cannot_be_read_the_budget_stays_as_configured():
    budget = PutBudget(250)
    pacer = BudgetPacer(budget, 25, Histogram(), reader=lambda: None)
    pacer.commit_begun()
    assert not pacer.active and budget.rate == 250
    # A reader that stops reading (its thread ended) gives the configured rate back.
    loop = Loop()
    readings = iter([0.0, 1.0])
    pacer = BudgetPacer(budget, 25, Histogram(), reader=lambda: lambda: next(readings, None),
                        clock=lambda: loop.now)
    for _ in range(2):
        loop.now += 1.1
        pacer.commit_begun()
    assert pacer.active and budget.rate < 250
    loop.now += 1.1
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
    """Busy processes on the one core this thread may use: its wait grows."""
    reader = core_wait_reader()
    assert reader is not None, "Linux records each thread's wait for a core in /proc"
    was = os.sched_getaffinity(0)
    spinners = []
    try:
        os.sched_setaffinity(0, {min(was)})  # this thread only; processes started now inherit it
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        first = reader()
        deadline = time.monotonic() + 30
        while reader() - first < 0.01:
            assert time.monotonic() < deadline, "the thread never waited for its core"
            sum(range(10_000))  # runnable, sharing the core with the spinners
    finally:
        os.sched_setaffinity(0, was)
        for p in spinners:
            p.kill()
            p.wait()


def test_a_thread_that_ended_reads_none(tmp_path):
    assert read_wait_s(str(tmp_path / "missing")) is None
    (tmp_path / "odd").write_text("not numbers\n")
    assert read_wait_s(str(tmp_path / "odd")) is None
    assert core_wait_reader(tid=2**30) is None
