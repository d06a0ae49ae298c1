"""Magnetar vs NATS JetStream: the same workloads against both, in one invocation.

    .venv/bin/python -m bench.run [--quick] [--only produce,unbatched,roundtrip,e2e,fanout,catchup,cold]
                                  [--skip-nats]
                                  [--raw-producers]
    make bench          # the full run (~10 min on 2 cores)
    make bench-quick    # a few seconds per workload

Systems: Magnetar with ``sync_policy=always`` (fdatasync before every
receipt, group commit: its default and the issue's target mode), Magnetar
with ``sync_policy=interval`` (fsync every 100 ms), and NATS JetStream with
file storage (Debian's nats-server 2.9, which acks after write() and never
fsyncs before the ack: like-for-like with Magnetar ``interval``). Each
system gets a fresh server (fresh temp data dir) per workload, on loopback.

Workloads: (1) max produce, 100 B, batched; (2) the same with 1 KiB; (1u)
max produce, unbatched (one message per entry: Magnetar's raw generator and
the official client); (1r) the synchronous send round trip (one message in
flight); (3)
end-to-end latency at 10k and 50k msg/s; (4) fan-out, 1 producer, 4
subscriptions; (5) catch-up read of a backlog (1M messages; 100k with
--quick); (6) cold start to first receipt and idle RSS. Plus the Pulsar load
generator's ceiling against a no-op sink.

``--raw-producers`` runs workloads 1 and 2 once more for each Magnetar
system with the raw generator (``magnetar perf --driver raw``: whole batches
encoded without the official client's per-message cost) and adds them as
extra rows ("raw generator"), plus that generator's ceiling.

Output: a table with the ratio Magnetar/NATS for every figure, and under
``bench/results/`` (or ``--out``): ``results.json`` (every figure, every
perf result, the machine), ``throughput.png`` and ``latency_cdf.png``.
Every workload also reports each server's CPU per message (from its
process's CPU time), and the durability setting of every column is printed
under the table.
The machine is shared with whatever else runs: the background CPU load is
sampled before each workload and saved with the results.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.table import Table

from magnetar.perf import procstat
from magnetar.perf.ceiling import measure_ceiling
from magnetar.perf.spec import WorkloadSpec

from bench import plots
from bench import workloads as wl
from bench.servers import ensure_nats_server, nats_version

HERE = Path(__file__).resolve().parent

WORKLOADS = ("produce", "unbatched", "roundtrip", "e2e", "fanout", "catchup", "cold")
NATS_LABEL = "nats"
console = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 150)


def log(msg: str) -> None:
    console.print(f"[dim]{datetime.now():%H:%M:%S}[/dim] {msg}", highlight=False)


def background_busy(seconds: float = 1.0) -> float | None:
    """Share of the machine's CPUs busy while the bench itself is idle."""
    before = procstat.machine_jiffies()
    time.sleep(seconds)
    return procstat.busy_percent(before, procstat.machine_jiffies())


def fsync_probe(directory: Path, count: int = 200) -> dict:
    """Latency of append + fdatasync of 8 KiB in ``directory`` (the disk under
    test): the floor of a receipt under sync_policy=always."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    times = []
    try:
        for _ in range(count):
            os.write(fd, b"\0" * 8192)
            t = time.perf_counter()
            os.fdatasync(fd)
            times.append((time.perf_counter() - t) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    times.sort()
    return {"count": count, "p50_ms": round(times[count // 2], 3), "p99_ms": round(times[int(count * 0.99) - 1], 3),
            "max_ms": round(times[-1], 3)}


def ratio(row: dict, label: str) -> float | None:
    a, b = row["values"].get(label), row["values"].get(NATS_LABEL)
    if a is None or not b:
        return None
    return round(a / b, 2)


def print_table(report: dict) -> None:
    labels = report["systems"]
    mags = [label for label in labels if label != NATS_LABEL]
    table = Table(title="Magnetar vs NATS JetStream", show_lines=False)
    table.add_column("workload", max_width=44)
    table.add_column("metric", max_width=40)
    for label in labels:
        table.add_column(label, justify="right")
    if NATS_LABEL in labels:
        for label in mags:
            table.add_column(f"{label}/nats", justify="right")
    for row in report["rows"]:
        cells = []
        for label in labels:
            v = row["values"].get(label)
            cells.append("-" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:,.3g}")
        if NATS_LABEL in labels:
            cells += ["-" if (r := ratio(row, label)) is None else f"{r:g}" for label in mags]
        table.add_row(row["workload"], f"{row['metric']} ({row['unit']}, {row['better']} is better)", *cells)
    console.print(table)
    for label in labels:
        console.print(f"{label}: {report['durability'].get(label, '?')}", highlight=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few seconds per workload")
    parser.add_argument("--only", default=",".join(WORKLOADS), help=f"comma-separated subset of {WORKLOADS}")
    parser.add_argument("--skip-nats", action="store_true", help="Magnetar only")
    parser.add_argument("--no-interval", action="store_true", help="skip the Magnetar sync_policy=interval runs")
    parser.add_argument("--raw-producers", action="store_true",
                        help="workloads 1 and 2 also with the raw generator for Magnetar (extra rows)")
    parser.add_argument("--out", default=str(HERE / "results"), help="directory for results.json and PNGs")
    args = parser.parse_args(argv)
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = set(only) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    timing = wl.QUICK if args.quick else wl.FULL

    systems = [wl.System("magnetar", "magnetar", "always")]
    if not args.no_interval:
        systems.append(wl.System("magnetar-interval", "magnetar", "interval"))
    nats_bin = None if args.skip_nats else ensure_nats_server()
    if nats_bin:
        systems.append(wl.System(NATS_LABEL, "nats", nats_binary=nats_bin))
    elif not args.skip_nats:
        log("[yellow]NATS side skipped: nats-server unavailable[/yellow]")

    import pulsar  # noqa: F401  (fail early, before any server starts)

    report: dict = {
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.run", *(argv if argv is not None else sys.argv[1:])]),
        "quick": args.quick,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "nats_server": nats_version(nats_bin) if nats_bin else None},
        "systems": [s.label for s in systems],
        "durability": {
            "magnetar": "sync_policy=always: fdatasync before every receipt, group commit",
            "magnetar-interval": "sync_policy=interval: receipt after write(), fsync every 100 ms",
            "nats": "JetStream file store, nats-server 2.9 defaults: PubAck after write(), no fsync before "
                    "the ack (2.9 has no sync_interval option; verified with strace: pwrite64 per message, "
                    "no fsync)",
        },
        "rows": [], "details": {}, "background_busy_percent": {}, "latency_cdfs": {},
    }
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="magnetar-bench-"))
    try:
        report["fsync_probe"] = fsync_probe(workdir)
        log(f"fdatasync of 8 KiB on the bench disk: {report['fsync_probe']}")

        def step(key: str, fn, *a) -> None:
            report["background_busy_percent"][key] = background_busy()
            rows, details = fn(systems, timing, *a, log, workdir)
            report["rows"].extend(rows)
            report["details"][key] = details

        if "produce" in only:
            spec = WorkloadSpec(topic="ceiling", size=100, producers=2, producer_workers=2, batch_max_messages=1000,
                                batch_delay_ms=1, max_pending=10_000, subscriptions=[], consumers=0)
            for size in (100, 1024):
                log(f"load generator ceiling (pulsar-client, 2 processes, {size} B) against a no-op sink")
                c = measure_ceiling(WorkloadSpec(**{**spec.as_dict(), "size": size}), timing.ceiling_seconds)
                report.setdefault("ceiling", {})[str(size)] = c
                if args.raw_producers:
                    log(f"load generator ceiling (raw generator, 2 processes, {size} B) against a no-op sink")
                    c = measure_ceiling(WorkloadSpec(**{**spec.as_dict(), "size": size}), timing.ceiling_seconds,
                                        driver=wl.RAW)
                    report.setdefault("ceiling_raw", {})[str(size)] = c
            produce = functools.partial(wl.max_produce, raw=args.raw_producers)
            step("produce-100", produce, 100)
            step("produce-1024", produce, 1024)
        if "unbatched" in only:
            step("unbatched", wl.unbatched_produce)
        if "roundtrip" in only:
            step("roundtrip", wl.round_trip)
        if "e2e" in only:
            for rate in (10_000, 50_000):
                step(f"e2e-{rate}", wl.e2e_latency, rate)
                report["latency_cdfs"][f"e2e at {rate:,} msg/s"] = {
                    label: (r.get("consume") or {}).get("latency_cdf", [])
                    for label, r in report["details"][f"e2e-{rate}"].items()}
        if "fanout" in only:
            step("fanout", wl.fan_out, 20_000)
        if "catchup" in only:
            step("catchup", wl.catch_up)
        if "cold" in only:
            step("cold", wl.cold_start)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)  # tens of gigabytes of servers' data
    report["wall_seconds"] = round(time.monotonic() - started, 1)

    print_table(report)
    for size, c in report.get("ceiling", {}).items():
        console.print(f"load generator ceiling, {size} B (pulsar-client, 2 processes, no-op sink): "
                      f"{c['msg_per_s']:,.0f} msg/s, CPU per process {c['producer_cpu_percent']}"
                      + (" (sink-bound)" if c["sink_bound"] else ""), highlight=False)
    for size, c in report.get("ceiling_raw", {}).items():
        console.print(f"load generator ceiling, {size} B (raw generator, 2 processes, no-op sink): "
                      f"{c['msg_per_s']:,.0f} msg/s, CPU per process {c['producer_cpu_percent']}"
                      + (" (sink-bound)" if c["sink_bound"] else ""), highlight=False)
    console.print(f"background CPU load before each workload (%): {report['background_busy_percent']}",
                  highlight=False)
    console.print(f"fdatasync latency on the bench disk (8 KiB appends): {report['fsync_probe']}", highlight=False)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for row in report["rows"]:
        row["ratio_vs_nats"] = {label: ratio(row, label) for label in report["systems"] if label != NATS_LABEL}
    (out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    written = [out / "results.json", *plots.plot(report, out)]
    console.print(f"wall time {report['wall_seconds']} s; wrote {', '.join(str(p) for p in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
