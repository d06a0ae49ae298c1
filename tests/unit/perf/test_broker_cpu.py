"""The broker's CPU per message and per entry in a perf result."""
from __future__ import annotations

from magnetar.perf.runner import broker_cpu_per_message


def test_unbatched_runs_report_per_entry_too():
    assert broker_cpu_per_message(2.0, 100_000, batching=False) == {
        "cpu_seconds": 2.0, "cpu_us_per_message": 20.0, "cpu_us_per_entry": 20.0}


def test_batched_runs_report_per_message_only():
    assert broker_cpu_per_message(0.5, 1_000_000, batching=True) == {"cpu_seconds": 0.5, "cpu_us_per_message": 0.5}


def test_unknown_cpu_or_no_messages():
    assert broker_cpu_per_message(None, 10, batching=False) == {"cpu_seconds": None}
    assert broker_cpu_per_message(1.0, 0, batching=False) == {"cpu_seconds": 1.0}
