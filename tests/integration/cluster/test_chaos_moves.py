"""A short chaos run on a cluster with bundle moves (``--faults move``):
at least one bundle holding a workload topic moved between brokers while
the clients worked, and the checker found nothing wrong."""
from __future__ import annotations

import pytest

from magnetar.chaos.history import read_history
from magnetar.chaos.runner import run

pytestmark = pytest.mark.timeout(240)


def test_a_chaos_run_with_bundle_moves_is_clean(tmp_path):
    # One fault every 1-2 s after the previous heal: five or more in 20 s.
    report = run(tmp_path, duration=20, faults=["move"], seed=3, topology="cluster", interval=(1.0, 2.0))
    heals = [op["value"] for op in read_history(tmp_path / "history.jsonl")
             if op.get("f") == "heal" and op.get("process") == "nemesis"]
    moved = [h for h in heals if " -> " in h and ":" not in h]  # a refusal reads "move ...: refused (...)"
    assert report.faults["move"] >= 1 and moved, heals
    assert report.acknowledged > 0
    assert report.clean, report.examples
