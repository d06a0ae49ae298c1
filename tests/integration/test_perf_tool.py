"""``magnetar perf`` against a real broker: a short e2e run must produce a
complete JSON result with nonzero throughput on both sides, the load
generator's ceiling and the broker's CPU/RSS."""
from __future__ import annotations

import json
import socket
import subprocess
import sys


def test_perf_e2e_writes_complete_json(broker, tmp_path):
    out = tmp_path / "perf.json"
    cmd = [
        sys.executable, "-m", "magnetar.cli", "perf", "e2e",
        "--service-url", broker.service_url, "--topic", "perf-test",
        "--rate", "5000", "--duration", "2", "--size", "64",
        "--ceiling", "1", "--json", str(out), "--broker-pid", str(broker.proc.pid),
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(out.read_text())

    for side in ("produce", "consume"):
        figures = result[side]
        assert figures["messages"] > 0 and figures["msg_per_s"] > 0 and figures["mb_per_s"] > 0, figures
        assert figures["errors"] == 0
        lat = figures["latency_ms"]
        assert set(lat) >= {"p50", "p95", "p99", "p99.9", "max", "count"}
        assert lat["count"] > 0 and 0 < lat["p50"] <= lat["p99"] <= lat["max"]
        assert figures["latency_cdf"]
    # Everything produced was received: the drain waits for it.
    assert result["consume"]["messages"] == result["produce"]["messages"]
    # The rate is paced (never above the target); the receipt tail of a short
    # run on a busy machine can pull the average down, not up.
    assert 3000 <= result["produce"]["msg_per_s"] <= 5500
    assert result["ceiling"]["msg_per_s"] > 0
    assert result["broker"]["cpu_percent"] is not None and result["broker"]["rss_mb"] > 0
    assert result["generator"]["producer_workers"] == 1 and result["generator"]["consumer_workers"] == 1
    assert result["timeline"] and result["errors"] == []
    # The progress line is printed every second.
    assert "msg/s" in run.stderr and "load generator ceiling" in run.stderr


def test_perf_refuses_partitions(broker):
    cmd = [sys.executable, "-m", "magnetar.cli", "perf", "produce", "--service-url", broker.service_url,
           "--partitions", "4", "--ceiling", "0"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert run.returncode == 2
    assert "perf does not create partitioned topics" in run.stderr


def test_perf_takes_a_service_url_naming_several_brokers(broker, tmp_path):
    # Pulsar's clients accept pulsar://a:6650,b:6650; the second host here has no broker.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    url = f"{broker.service_url},127.0.0.1:{dead}"
    out = tmp_path / "perf.json"
    cmd = [sys.executable, "-m", "magnetar.cli", "perf", "produce", "-u", url, "--topic", "perf-hosts",
           "--rate", "1000", "--duration", "1", "--ceiling", "0", "--json", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    produced = json.loads(out.read_text())["produce"]
    assert produced["messages"] > 0 and produced["errors"] == 0
