"""A chaos run that is itself SIGKILLed (an OOM kill, a second Ctrl-C
from a supervisor) leaves none of its processes behind: its brokers and
etcd were started to die with it (``dying_with_parent``), paused ones
included, so the next run of the seed starts clean."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(180)


def _processes_under(path: Path) -> list[int]:
    """Pids of processes whose command line names ``path`` (its brokers and etcd)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile
        if str(path) in cmdline and state != "Z" and "chaos run" not in cmdline:
            pids.append(int(entry.name))
    return pids


def test_a_killed_cluster_run_leaves_no_broker_or_etcd_running(tmp_path):
    out = tmp_path / "chaos"
    run = subprocess.Popen(
        [sys.executable, "-m", "magnetar_chaos", "run", "--topology", "cluster", "--duration", "120",
         "--faults", "pause", "--interval", "1,2", "--seed", "5", "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        history = out / "seed-5" / "history.jsonl"
        # Up, with the nemesis at work: a pause has begun (a stopped broker must die too).
        wait_for(lambda: history.exists() and '"fault"' in history.read_text(), timeout=90,
                 what="the run's first fault")
        assert len(_processes_under(out)) >= 4, "three brokers and etcd"
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    wait_for(lambda: not _processes_under(out), timeout=30, what="the brokers and etcd to die with the run")
