"""When the object backend's next commit is due (profiles) and the PUT
budget's token bucket, on a clock of our own (no I/O)."""
from __future__ import annotations

import asyncio
import time

import pytest

from magnetar.storage.object.profiles import Gathering, check_profile, gather_s
from magnetar.storage.object.put_budget import PutBudget


def test_latency_is_due_at_arrival_and_cost_an_interval_later_unless_something_goes_sooner():
    g = Gathering()
    assert g.due() == float("inf")
    assert g.arrived(gather_s("cost", 0.25), 10.0)
    assert g.due() == 10.25
    assert not g.arrived(gather_s("cost", 0.25), 10.1)  # a later cost batch changes nothing
    assert g.arrived(gather_s("latency", 0.25), 10.2)  # a latency batch: due now, cost rides along
    assert g.due() == 10.2 and g.oldest() == 10.0
    g.clear()
    assert g.due() == float("inf")


def test_a_profile_not_known_is_refused():
    with pytest.raises(ValueError, match="latency, cost"):
        check_profile("fast")


def test_the_budget_gives_its_burst_then_one_token_per_period():
    now = [0.0]
    b = PutBudget(4, burst=2, clock=lambda: now[0])
    for _ in range(2):
        assert b.delay() == 0
        b.take()
    assert b.delay() == pytest.approx(0.25)
    now[0] += 0.25
    assert b.delay() == 0
    b.take()
    now[0] += 10  # idle: no more than the burst is saved up
    b.take(), b.take()
    assert b.delay() > 0


def test_no_budget_never_waits():
    b = PutBudget(0)
    assert not b.limited
    asyncio.run(b.acquire())
    assert b.delay() == 0


def test_background_puts_wait_in_line_within_their_share_and_leave_the_commits_most_of_the_budget(monkeypatch):
    """Before, every compaction polled the bucket: 2,000 of them woke at
    every token due and took ~all of it, the committer one poller among them."""
    from magnetar.storage.object import put_budget

    async def run() -> tuple[int, int, int]:
        budget = PutBudget(200)  # burst 20
        background = [0]

        async def compaction() -> None:
            await budget.acquire_background()
            background[0] += 1
        tasks = [asyncio.ensure_future(compaction()) for _ in range(2000)]
        commits = 0
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # the committer: a commit per token it gets
            await budget.acquire()
            commits += 1
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return commits, background[0]

    wakes = [0]
    real_sleep = asyncio.sleep

    async def counting_sleep(delay, *args):
        wakes[0] += 1
        return await real_sleep(delay, *args)
    monkeypatch.setattr(asyncio, "sleep", counting_sleep)

    commits, background = asyncio.run(run())
    share = 200 * put_budget.BACKGROUND_SHARE
    assert background <= share * 1.0 + 2  # its own bucket: ~40 a second (+ one of burst)
    assert commits >= 200 - share - 10 and commits + background <= 200 + 20 + 2  # the bound holds
    assert wakes[0] < 2000  # one background taker polls at a time (before: ~2,000 per token)


def test_a_closing_broker_gives_its_background_puts_the_whole_rate():
    """``share_all`` (a clean close: no commit will come): background takers
    get the budget's whole rate, not their share; the bill's bound stays."""
    async def taken_in(budget: PutBudget, seconds: float) -> int:
        taken = [0]

        async def compaction() -> None:
            await budget.acquire_background()
            taken[0] += 1
        tasks = [asyncio.ensure_future(compaction()) for _ in range(500)]
        await asyncio.sleep(seconds)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return taken[0]

    async def run() -> tuple[int, int]:
        shared = PutBudget(100)
        before = await taken_in(shared, 0.5)
        closing = PutBudget(100)
        await closing.acquire_background()  # its line exists: share_all must reach it too
        closing.share_all()
        return before, await taken_in(closing, 0.5)

    before, after = asyncio.run(run())
    assert before <= 100 * 0.2 * 0.5 + 2  # ~10 in 0.5 s within their share
    assert 30 <= after <= 100 * 0.5 + 10 + 5  # ~50 in 0.5 s (+ the burst): all of it, never more
