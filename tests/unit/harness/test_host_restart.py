"""The test bed restarts a broker that exits while it starts, as its unit's
Restart=on-failure would (a broker that met etcd electing a leader at its
start exited 1 and failed a soak); a part that exits 0, or too often,
still fails the wait."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from magnetar_harness import host_topology
from magnetar_harness.host_topology import Part, Topology, TopologyError
from magnetar_harness.hosts import Process


def _part(tmp_path: Path, code: str) -> Part:
    log = tmp_path / "broker-1.log"
    popen = subprocess.Popen([sys.executable, "-c", code])
    if "SystemExit" in code:
        popen.wait(10)
    return Part("broker-1", "broker-1", "10.0.0.1", {}, Process("broker-1", "broker-1", [], log, popen))


def test_a_part_that_exits_while_it_starts_is_restarted_as_systemd_would(tmp_path, monkeypatch):
    monkeypatch.setattr(host_topology, "RESTART_SEC", 0.0)
    topo = Topology(bed=None, base=tmp_path, start_timeout_s=10.0)
    topo.parts = [_part(tmp_path, "raise SystemExit(1)")]
    started = []

    def restart():
        started.append(1)
        topo.parts = [_part(tmp_path, "import time; time.sleep(30)")]
    try:
        topo._wait("broker-1", lambda: bool(started), restart=restart)
        assert started == [1]
    finally:
        topo.parts[0].process.kill()


def test_a_part_that_keeps_exiting_or_exits_0_fails_the_wait(tmp_path, monkeypatch):
    monkeypatch.setattr(host_topology, "RESTART_SEC", 0.0)
    topo = Topology(bed=None, base=tmp_path, start_timeout_s=10.0)
    topo.parts = [_part(tmp_path, "raise SystemExit(1)")]

    def restart():
        topo.parts = [_part(tmp_path, "raise SystemExit(1)")]
    with pytest.raises(TopologyError, match="exited"):
        topo._wait("broker-1", lambda: False, restart=restart)
    topo.parts = [_part(tmp_path, "raise SystemExit(0)")]
    with pytest.raises(TopologyError, match=r"exited \(0\)"):
        topo._wait("broker-1", lambda: False, restart=restart)
