"""Many *written* topics on one broker on files: publish latency and fsyncs/s,
the journal beside per-segment syncs, in one run (issue 41).

    .venv/bin/python -m bench.written_topics [--topics 1,1000,10000] [--rate 5000]
                                             [--seconds 15] [--repeats 1] [--json PATH]
                                             [--storage "max_open_ledger_files = 16384"] [--topic-metrics]

For each topic count, and for each write path of the file backend, in turn
(A/B in the same session, alternating which goes first):

- ``journal`` (the default): one journal fdatasync per group commit, segment
  files synced by the background checkpoint;
- ``segments`` (``journal = false``): an fdatasync per segment file written
  per group commit, what files did before the journal;

it starts a standalone broker on a fresh data directory (``sync_policy =
"always"``, this tree's code; :class:`bench.many_topics.MeasuredBroker`) and
runs ``magnetar perf``'s runner against it: the official client, one
producer per topic, batching off, 100-byte messages, ``--rate`` msg/s spread
evenly over the topics for ``--seconds``. Reported per run: publish latency
p50 / p99 / max, msg/s, errors; fsyncs/s (journal and segment apart) and
group commits/s from the broker's ``/metrics`` counters over the run; the
load average (the machine may be shared). The counters are read twice,
when every producer is ready and after the run, never during it: a
scrape of ``/metrics`` holds the event loop (all its collectors visit
every topic), and the 0.5 s readings of earlier versions were much of the
p99 they reported (1,000 and 10,000 topics). The per-topic series are off
in these brokers; ``--topic-metrics`` keeps them. With ``--repeats`` > 1 the table
shows medians. A benchmark, not a test: figures go to bench/README.md with
this command line.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.many_topics import MeasuredBroker
from magnetar.perf.runner import run
from magnetar.perf.spec import WorkloadSpec

PATHS = {"journal": "journal = true", "segments": "journal = false"}
_SERIES = re.compile(r'^(magnetar_file_fsyncs_total\{kind="(\w+)"\}|magnetar_file_(group_commits|reopens)_total) '
                     r'([0-9.e+]+)$')


def file_counters(admin_port: int) -> dict[str, float]:
    """The broker's fsync and group-commit counters from ``/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=60) as answer:
        text = answer.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SERIES.match(line)
        if m:
            out[f"{m.group(2)}_fsyncs" if m.group(2) else m.group(3)] = float(m.group(4))
    return out


def counter_rates(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """Per-second rates of :func:`file_counters` between two readings."""
    if seconds <= 0:
        return {}
    return {k: round((after[k] - before.get(k, 0)) / seconds, 1) for k in after}


def one_run(path: str, topics: int, args, log) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"written-topics-{path}-"))
    # Off by default: the per-topic series make each scrape hold the event
    # loop longer (about 15 ms at 1,000 topics); --topic-metrics keeps them
    # (the broker's default).
    metrics = "" if args.topic_metrics else "expose_topic_level_metrics_in_prometheus = false\n"
    config = f'topic_idle_unload_s = 0.0\n{metrics}[storage]\nsync_policy = "always"\n{PATHS[path]}\n'
    for line in args.storage:
        config += line + "\n"
    broker = MeasuredBroker(work / "data", config)
    try:
        broker.start()
        spec = WorkloadSpec(service_url=broker.url, topic=f"wt-{path}-{topics}", topics=topics, size=100,
                            rate=args.rate, batching=False, duration=args.seconds,
                            producer_workers=args.workers, max_pending=1000)
        load_before = os.getloadavg()[0]
        # The counters are read twice: when every producer is ready, just
        # before the clock starts, and after the run. A scrape holds the
        # broker's event loop (its collectors visit every topic: ~60 ms at
        # 10,000 topics on a loaded machine), so reading it during the run
        # (every 0.5 s, as before) measured the scrapes.
        readings: list[dict[str, float]] = []
        result = run(spec, produce=True, consume=False, command=f"produce {spec.topic}",
                     broker_pid=broker.proc.pid, setup_timeout=max(60.0, topics * 0.05),
                     on_start=lambda: readings.append(file_counters(broker.admin)))
        readings.append(file_counters(broker.admin))
        p = result["produce"] or {}
        lat = p.get("latency_ms") or {}
        # The runner's clock starts once every producer is ready; its wall time ends at its return.
        rates = counter_rates(readings[0], readings[-1], result["wall_seconds"]) if len(readings) == 2 else {}
        figures = {"path": path, "topics": topics, "msg_per_s": round(p.get("msg_per_s", 0)),
                   "errors": p.get("errors"), "p50_ms": lat.get("p50"), "p99_ms": lat.get("p99"),
                   "max_ms": lat.get("max"), "fsyncs_per_s": round(sum(v for k, v in rates.items()
                                                                       if k.endswith("_fsyncs")), 1),
                   "journal_fsyncs_per_s": rates.get("journal_fsyncs", 0.0),
                   "segment_fsyncs_per_s": rates.get("segment_fsyncs", 0.0),
                   "group_commits_per_s": rates.get("group_commits", 0.0),
                   "reopens_per_s": rates.get("reopens", 0.0),
                   "broker_cpu_percent": (result.get("broker") or {}).get("cpu_percent"),
                   "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
        log(f"  {path:8} {topics:>6} topics: {figures['msg_per_s']:>6,} msg/s  p50 {figures['p50_ms']} "
            f"p99 {figures['p99_ms']} max {figures['max_ms']} ms  fsyncs/s {figures['fsyncs_per_s']} "
            f"(journal {figures['journal_fsyncs_per_s']}, segment {figures['segment_fsyncs_per_s']})  "
            f"group commits/s {figures['group_commits_per_s']}  reopens/s {figures['reopens_per_s']}  broker CPU {figures['broker_cpu_percent']} %  "
            f"errors {figures['errors']}  "
            f"load {figures['load_average']}")
        return figures
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def median_of(runs: list[dict], key: str):
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 2) if values else None


def table(results: list[dict]) -> list[str]:
    lines = ["| topics | path | msg/s | p50 ms | p99 ms | max ms | fsyncs/s | group commits/s | load avg |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    keys = sorted({(r["topics"], r["path"]) for r in results})
    for topics, path in keys:
        runs = [r for r in results if r["topics"] == topics and r["path"] == path]
        loads = [r["load_average"][0] for r in runs]
        lines.append(f"| {topics:,} | {path} | {median_of(runs, 'msg_per_s'):,.0f} | {median_of(runs, 'p50_ms')} | "
                     f"{median_of(runs, 'p99_ms')} | {median_of(runs, 'max_ms')} | "
                     f"{median_of(runs, 'fsyncs_per_s')} | {median_of(runs, 'group_commits_per_s')} | "
                     f"{min(loads):.1f}-{max(loads):.1f} |")
    for topics in sorted({r["topics"] for r in results}):
        j = median_of([r for r in results if r["topics"] == topics and r["path"] == "journal"], "p99_ms")
        s = median_of([r for r in results if r["topics"] == topics and r["path"] == "segments"], "p99_ms")
        if j and s:
            lines.append(f"- {topics:,} topics: p99 segments / journal = {s / j:.1f}x")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", default="1,1000,10000", help="comma-separated topic counts")
    ap.add_argument("--rate", type=float, default=5000.0, help="total msg/s over all topics")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--paths", default="journal,segments", help="which write paths (journal, segments)")
    ap.add_argument("--workers", type=int, default=0, help="producer processes (0: one per core)")
    ap.add_argument("--segments-max-topics", type=int, default=1000,
                    help="run the segments path only up to this many topics (past it its queue grows for minutes)")
    ap.add_argument("--storage", action="append", default=[], metavar="LINE",
                    help='a [storage] setting for every run, e.g. "max_open_ledger_files = 16384" (repeatable)')
    ap.add_argument("--topic-metrics", action="store_true",
                    help="keep the per-topic series at /metrics (the bench scrapes it every 0.5 s)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    paths = args.paths.split(",")
    results = []
    started = time.time()
    for repeat in range(args.repeats):
        for topics in (int(t) for t in args.topics.split(",")):
            order = paths if (repeat + topics) % 2 == 0 else list(reversed(paths))
            for path in order:
                if path == "segments" and topics > args.segments_max_topics:
                    continue
                results.append(one_run(path, topics, args, log))
    doc = {"command": " ".join(sys.argv), "cpus": os.cpu_count(), "started": started, "runs": results,
           "table": table(results)}
    print("\n".join(doc["table"]))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
