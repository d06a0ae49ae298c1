"""Publish latency across hosts, through a slowed link and straight, beside
the same on loopback, in one run.

    sudo .venv/bin/python -m bench.hosts_latency [--seconds 10] [--rates 5000 20000]
        [--repeat 3] [--delay-ms 0.5] [--tag hbench] [--json PATH]

First the deployment of docs/deploy.md on the test bed of hosts
(magnetar_harness/host_topology.py, no Spark: 3 brokers on object storage,
a 3-member etcd, SeaweedFS split over 6 hosts); ``magnetar perf produce``
runs on the client host (the official client, 100-byte messages, batching
on, ``--topics`` topics spread over the brokers, the three brokers in its
service URL) at each rate, in two places taken in turn in each repeat:

- ``hosts``: the client reaches the brokers straight over the bridge;
- ``hosts+proxy``: through a DegradingProxy (magnetar_chaos/host_links.py)
  adding ``--delay-ms`` each way between the client host and the brokers'
  6650 and 6651 (the proxy's own CPU is recorded);

then ``magnetar cluster up --brokers 3 --storage object`` on loopback (one
etcd, one ``weed mini``) and the same command (``loopback``). Before each
place's runs, 200 PING/PONG round trips to one broker from where the
client runs (bench/pulsar_ping.py): the link's own cost, storage aside. Prints each
run (msg/s, p50, p99, max, the load average before and after, the proxy's
CPU) and the median of the repeats per place and rate. Root only
(namespaces). A benchmark, not a test: record results with the command line
in docs/deploy.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from magnetar_chaos.host_links import HostLink
from magnetar_chaos.link_proxy import LinkSettings
from magnetar_harness.cluster import LocalCluster
from magnetar_harness.host_topology import BROKER_PORT, BROKER_TLS_PORT, BROKERS, CLIENT, default_base, host_topology
from bench.servers import require_compiled

TAG = "hbench"
PLACES = ("hosts", "hosts+proxy", "loopback")


def perf_command(url: str, rate: int, seconds: float, topics: int, out: Path, topic: str) -> list[str]:
    return [sys.executable, "-m", "magnetar.cli", "perf", "produce", "-u", url, "-t", topic, "--topics", str(topics),
            "--rate", str(rate), "--duration", str(seconds), "--size", "100", "--json", str(out)]


def ping_command(url: str) -> list[str]:
    """PING/PONG round trips to one broker (bench/pulsar_ping.py): the link's
    own cost, without the storage."""
    return [sys.executable, "-m", "bench.pulsar_ping", url, "--count", "200"]


def figures(path: Path, load_before: float, load_after: float, proxy_cpu_s: float | None = None,
            seconds: float = 0.0, proxy_mb: float | None = None) -> dict:
    result = json.loads(path.read_text())
    side = result["produce"]
    lat = side["latency_ms"]
    out = {"msg_per_s": side["msg_per_s"], "p50": lat["p50"], "p99": lat["p99"], "max": lat["max"],
           "errors": side["errors"], "load": load_before, "load_after": load_after}
    if proxy_cpu_s is not None:
        out["proxy_cpu_pct"] = 100.0 * proxy_cpu_s / seconds
        out["proxy_mb"] = proxy_mb  # what crossed it: the run did go through the proxy
    return out


def on_hosts(args, work: Path) -> dict:
    topo = host_topology(args.tag, default_base(args.tag))
    out: dict = {"hosts": {}, "hosts+proxy": {}}
    try:
        topo.start(spark=False)
        url = topo.service_url
        targets = [(topo.address(b), port) for b in BROKERS for port in (BROKER_PORT, BROKER_TLS_PORT)]
        for r in range(args.repeat):
            for place in [p for p in ("hosts", "hosts+proxy") if p in args.places]:
                link = None
                if place == "hosts+proxy":
                    link = HostLink(topo.bed, CLIENT, targets, LinkSettings(delay_s=args.delay_ms / 1000)).up()
                try:
                    ping = json.loads(topo.bed.run(CLIENT, ping_command(f"pulsar://{topo.address(BROKERS[0])}:6650"),
                                                   timeout=120).stdout)
                    for rate in args.rates:
                        path = work / f"{place}-{rate}-{r}.json"
                        load = os.getloadavg()[0]
                        before = link.proxy.stats() if link else None
                        began = time.monotonic()
                        topo.bed.run(CLIENT, perf_command(url, rate, args.seconds, args.topics, path,
                                                          f"{place.replace('+', '-')}-{rate}-{r}"),
                                     timeout=args.seconds * 10 + 120)
                        cpu = mb = None
                        if link:
                            after = link.proxy.stats()
                            cpu = after.cpu_s - before.cpu_s
                            mb = (after.bytes_forward + after.bytes_back - before.bytes_forward
                                  - before.bytes_back) / 1e6
                        f = figures(path, load, os.getloadavg()[0], cpu, time.monotonic() - began, mb)
                        f.update(ping)
                        out[place].setdefault(rate, []).append(f)
                        report(place, rate, f)
                finally:
                    if link is not None:
                        link.down()
    finally:
        topo.stop()
    return out


def on_loopback(args, work: Path) -> dict:
    # The session TTL of deploy/broker.toml (10 s), as on the hosts.
    cluster = LocalCluster(work / "loopback", brokers=3, storage="object", session_ttl=10.0).start()
    out: dict = {}
    try:
        url = ",".join(m.service_url for m in cluster.members).replace(",pulsar://", ",")
        for r in range(args.repeat):
            ping = json.loads(subprocess.run(ping_command(cluster.members[0].service_url), check=True,
                                             capture_output=True, text=True, timeout=120).stdout)
            for rate in args.rates:
                path = work / f"loopback-{rate}-{r}.json"
                load = os.getloadavg()[0]
                subprocess.run(perf_command(url, rate, args.seconds, args.topics, path, f"loop-{rate}-{r}"),
                               check=True, capture_output=True, timeout=args.seconds * 10 + 120)
                f = figures(path, load, os.getloadavg()[0])
                f.update(ping)
                out.setdefault(rate, []).append(f)
                report("loopback", rate, f)
    finally:
        cluster.stop()
    return {"loopback": out}


def report(place: str, rate: int, f: dict) -> None:
    proxy = (f" proxy {f['proxy_cpu_pct']:.1f}% of a core, {f['proxy_mb']:.1f} MB through it"
             if "proxy_cpu_pct" in f else "")
    print(f"{place:<12} {rate:>7} {f['msg_per_s']:>8.0f} msg/s  p50 {f['p50']:>7.1f}  p99 {f['p99']:>7.1f}  "
          f"max {f['max']:>7.1f} ms  ping min/p50 {f['min_us']}/{f['p50_us']} us  "
          f"load {f['load']:.1f} -> {f['load_after']:.1f}{proxy}", flush=True)


def medians(results: dict) -> dict:
    """Per place and rate: the median of each figure over the repeats."""
    return {place: {rate: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
                    for rate, runs in by_rate.items()} for place, by_rate in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rates", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--topics", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3, help="runs per place and rate; medians are printed")
    parser.add_argument("--delay-ms", type=float, default=0.5, help="the proxy's delay each way (hosts+proxy)")
    parser.add_argument("--tag", default=TAG, help="the test bed's tag (its namespaces are mg-TAG-*)")
    parser.add_argument("--places", nargs="+", choices=PLACES, default=list(PLACES))
    parser.add_argument("--json")
    args = parser.parse_args()
    require_compiled()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.seconds:g} s per run, "
          f"{args.repeat} repeats, proxy delay {args.delay_ms} ms each way", flush=True)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="hosts-bench-") as tmp:
        work = Path(tmp)
        if {"hosts", "hosts+proxy"} & set(args.places):
            results.update(on_hosts(args, work))
        if "loopback" in args.places:
            results.update(on_loopback(args, work))
    results = {place: by_rate for place, by_rate in results.items() if place in args.places}
    summary = medians(results)
    print(f"medians of {args.repeat}:")
    print(f"{'place':<12} {'rate':>7} {'msg/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'ping us':>8} {'load':>5}")
    for place, by_rate in summary.items():
        for rate, f in by_rate.items():
            print(f"{place:<12} {rate:>7} {f['msg_per_s']:>8.0f} {f['p50']:>8.1f} {f['p99']:>8.1f} {f['max']:>8.1f} "
                  f"{f['p50_us']:>8.0f} {f['load']:>5.1f}" + (f"  proxy {f['proxy_cpu_pct']:.1f}% CPU" if "proxy_cpu_pct" in f else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": results, "medians": summary}, indent=2))


if __name__ == "__main__":
    main()
