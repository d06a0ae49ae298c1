"""bench/host_speed.py: the probe of the host's speed a sending's windows
are read beside."""
from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

from bench.host_speed import HostSpeed, probe, unit

ROOT = Path(__file__).resolve().parents[3]


def test_a_unit_takes_longer_with_more_loops():
    assert min(unit(200_000) for _ in range(3)) > min(unit(2_000) for _ in range(3))


def test_the_probe_prints_a_monotonic_time_and_the_fastest_unit():
    out = io.StringIO()
    before = time.monotonic()
    probe(0.01, out, count=3)
    lines = [line.split() for line in out.getvalue().splitlines()]
    assert len(lines) == 3
    times = [float(t) for t, _ in lines]
    assert before <= times[0] <= times[1] <= times[2] <= time.monotonic()
    assert all(float(us) > 0 for _, us in lines)


def test_host_speed_reads_its_child_s_readings_on_the_bench_s_clock():
    began = time.monotonic()
    with HostSpeed(every=0.05) as host:
        deadline = time.monotonic() + 30
        while len(host.samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert len(host.samples) >= 3
    assert all(began <= t <= time.monotonic() for t, _ in host.samples)
    assert host.between(began, time.monotonic()) > 0
    assert host.between(0, began - 1) is None
    assert host._proc.poll() is not None  # the child is gone with the block


def test_the_command_line_refuses_a_bad_interval():
    done = subprocess.run([sys.executable, "-m", "bench.host_speed", "--every", "0"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--every must be a positive" in done.stderr
    assert "Traceback" not in done.stderr
