"""When the object backend's next commit is due (profiles) and the PUT
budget's token bucket, on a clock of our own (no I/O)."""
from __future__ import annotations

import asyncio

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
