"""The ``clock-jump`` fault (magnetar_chaos/clock.py) in a real run: ~20 s
of the standalone workloads while the broker's wall clock steps forward and
back every 1-2 s; at least one jump happens and the checker finds nothing.
Skipped only where libfaketime is missing and cannot be installed (not root:
the harness installs it as root)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from magnetar_chaos.clock import find_library

pytestmark = pytest.mark.skipif(
    find_library() is None and os.geteuid() != 0,
    reason="libfaketime is not installed and this is not root (apt-get install -y libfaketime)")


def test_a_short_run_jumps_the_brokers_clock_and_finds_no_anomaly(tmp_path):
    out = tmp_path / "chaos"
    result = subprocess.run(
        [sys.executable, "-m", "magnetar_chaos", "run", "--duration", "15", "--interval", "1,2",
         "--faults", "clock-jump", "--seed", "4", "--out", str(out)],
        capture_output=True, text=True, timeout=240)
    run_dir = out / "seed-4"
    assert (run_dir / "report.json").exists(), f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    report = json.loads((run_dir / "report.json").read_text())
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert report["clean"], report
    assert report["faults"].get("clock-jump", 0) >= 1, report["faults"]
    heals = [json.loads(line)["value"] for line in (run_dir / "history.jsonl").read_text().splitlines()
             if '"heal"' in line]
    assert any(h.startswith("clock-jump broker: ") for h in heals), heals
    log = (run_dir / "broker.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
