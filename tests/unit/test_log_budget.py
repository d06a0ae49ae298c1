"""A repeated log line is written at a bounded rate and its drops are counted."""
from __future__ import annotations

import logging

import pytest

from magnetar.log_budget import LogBudget


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_is_written_then_the_rest_is_counted_and_reported_with_the_next_line(caplog):
    clock = Clock()
    budget = LogBudget(logging.getLogger("budget-test"), burst=3, window=10.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="budget-test"):
        for i in range(1000):
            budget.log(logging.INFO, "ack refused", "ack %d refused", i)
        assert [r.getMessage() for r in caplog.records] == ["ack 0 refused", "ack 1 refused", "ack 2 refused"]
        assert budget.dropped("ack refused") == 997
        clock.now += 10.0
        budget.log(logging.INFO, "ack refused", "ack %d refused", 1000)
    assert caplog.records[-1].getMessage() == "ack 1000 refused (and 997 more like it not logged)"
    assert budget.dropped("ack refused") == 0


def test_kinds_have_budgets_of_their_own(caplog):
    budget = LogBudget(logging.getLogger("budget-test"), burst=1, window=10.0, clock=Clock())
    with caplog.at_level(logging.INFO, logger="budget-test"):
        for _ in range(5):
            budget.log(logging.INFO, "a", "line a")
            budget.log(logging.INFO, "b", "line b")
    assert [r.getMessage() for r in caplog.records] == ["line a", "line b"]


def test_a_level_not_enabled_costs_nothing_and_counts_nothing(caplog):
    budget = LogBudget(logging.getLogger("budget-test"), burst=1, clock=Clock())
    with caplog.at_level(logging.WARNING, logger="budget-test"):
        for _ in range(5):
            budget.log(logging.INFO, "a", "line a")
    assert caplog.records == []
    assert budget.dropped("a") == 0


@pytest.mark.parametrize("burst, window", [(0, 10.0), (1, 0.0)])
def test_a_budget_that_could_write_nothing_is_refused(burst, window):
    with pytest.raises(ValueError, match="burst >= 1 and window > 0"):
        LogBudget(logging.getLogger("budget-test"), burst=burst, window=window)
