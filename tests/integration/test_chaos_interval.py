"""A short chaos run with the brokers on the ``interval`` sync policy
(``magnetar-chaos run --sync-policy interval``): receipts follow write(),
the fdatasync comes within 100 ms. Kills and pauses do not drop the page
cache, so nothing acknowledged may be lost, as under ``always``. Where
ptrace is allowed the run also fails the broker's fsyncs (``fsync-error``):
a failed periodic sync must fence the ledger, and the clients' resends be
stored once. About 25 s in all."""
from __future__ import annotations

import json

import pytest

from magnetar_chaos.fsync import unavailable_reason as fsync_unavailable
from magnetar_chaos.runner import run

pytestmark = pytest.mark.timeout(180)


def test_a_chaos_run_on_the_interval_sync_policy_is_clean(tmp_path):
    faults = ["kill", "pause"] + ([] if fsync_unavailable() is not None else ["fsync-error"])
    # One fault every 1-2 s after the previous heal: at least three in 20 s even
    # when a loaded machine makes each restart slow (12 s drew only two under load).
    report = run(tmp_path, duration=20, faults=faults, seed=4, interval=(1.0, 2.0), sync_policy="interval")
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["sync_policy"] == "interval"
    assert 'sync_policy = "interval"' in (tmp_path / "chaos-broker.toml").read_text()
    assert sum(report.faults.values()) >= 3, report.faults
    assert report.acknowledged > 0
    assert report.clean, report.examples
    log = (tmp_path / "broker.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    if report.faults.get("fsync-error"):
        # Only the interval policy's syncer syncs periodically: proof the
        # broker ran on it, and that its failed sync fenced the ledger.
        assert "periodic fsync of ledger" in log and "fencing it" in log, log[-3000:]
