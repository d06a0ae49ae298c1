"""Publish latency across hosts beside the same on loopback, in one run.

    sudo .venv/bin/python -m bench.hosts_latency [--seconds 10] [--rates 5000 20000] [--json PATH]

First the deployment of docs/deploy.md on the test bed of hosts
(magnetar_harness/host_topology.py, no Spark: 3 brokers on object storage,
a 3-member etcd, SeaweedFS split over 6 hosts), ``magnetar perf produce``
run on the client host (the official client, 100-byte messages, batching on,
``--topics`` topics spread over the brokers) at each rate; then
``magnetar cluster up --brokers 3 --storage object`` on loopback (one etcd,
one ``weed mini``) and the same command. Prints msg/s, p50, p99 and max per
rate and place, and the load average before each run. Root only (namespaces).
A benchmark, not a test: record results with the command line in
docs/deploy.md.

Not measured yet: a link degraded by a delaying proxy (the brief's 0.5 ms
each way) and Spark on the standalone cluster.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from magnetar_harness.cluster import LocalCluster
from magnetar_harness.host_topology import CLIENT, default_base, host_topology

TAG = "hbench"


def perf_command(url: str, rate: int, seconds: float, topics: int, out: Path, topic: str) -> list[str]:
    return [sys.executable, "-m", "magnetar.cli", "perf", "produce", "-u", url, "-t", topic, "--topics", str(topics),
            "--rate", str(rate), "--duration", str(seconds), "--size", "100", "--json", str(out)]


def figures(path: Path, load: float) -> dict:
    result = json.loads(path.read_text())
    side = result["produce"]
    lat = side["latency_ms"]
    return {"msg_per_s": side["msg_per_s"], "p50": lat["p50"], "p99": lat["p99"], "max": lat["max"],
            "errors": side["errors"], "load": load}


def on_hosts(args, work: Path) -> dict:
    topo = host_topology(TAG, default_base(TAG))
    out = {}
    try:
        topo.start(spark=False)
        for rate in args.rates:
            path = work / f"hosts-{rate}.json"
            load = os.getloadavg()[0]
            # One broker's URL (perf takes one host); lookups send each topic to its owner.
            url = f"pulsar://{topo.address('broker-1')}:6650"
            topo.bed.run(CLIENT, perf_command(url, rate, args.seconds, args.topics, path,
                                              f"hosts-{rate}"), timeout=args.seconds * 10 + 120)
            out[rate] = figures(path, load)
    finally:
        topo.stop()
    return out


def on_loopback(args, work: Path) -> dict:
    cluster = LocalCluster(work / "loopback", brokers=3, storage="object").start()
    out = {}
    try:
        url = cluster.members[0].service_url
        for rate in args.rates:
            path = work / f"loopback-{rate}.json"
            load = os.getloadavg()[0]
            subprocess.run(perf_command(url, rate, args.seconds, args.topics, path, f"loop-{rate}"), check=True,
                           capture_output=True, timeout=args.seconds * 10 + 120)
            out[rate] = figures(path, load)
    finally:
        cluster.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rates", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--topics", type=int, default=6)
    parser.add_argument("--json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hosts-bench-") as tmp:
        work = Path(tmp)
        results = {"hosts": on_hosts(args, work), "loopback": on_loopback(args, work)}
    print(f"{'place':<9} {'rate':>7} {'msg/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'load':>5}")
    for place, by_rate in results.items():
        for rate, f in by_rate.items():
            print(f"{place:<9} {rate:>7} {f['msg_per_s']:>8.0f} {f['p50']:>8.1f} {f['p99']:>8.1f} {f['max']:>8.1f} "
                  f"{f['load']:>5.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
