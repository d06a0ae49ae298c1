"""What Prometheus scrapes of ``/metrics`` cost the publishers of many
written topics: publish latency with scrapes beside without, and how long
the broker's event loop stalls during a scrape (issue 41's shape).

    .venv/bin/python -m bench.scrape_stalls [--topics 10000] [--rate 5000] [--phase 10]
                                            [--phases 4] [--every 5] [--peer-commit REV]
                                            [--no-topic-metrics] [--json PATH]

For this tree, and with ``--peer-commit REV`` for that commit too (a
detached worktree of it, this tree's compiled hot paths copied in when
their sources are the same; the two alternate which goes first), it starts
a standalone broker on a fresh data directory (``sync_policy = "always"``,
the journal, the per-topic series on as by default: ``--no-topic-metrics``
turns them off) and runs ``magnetar perf``'s runner against it: the
official client, one producer per topic, batching off, 100-byte messages,
``--rate`` msg/s spread evenly over the topics. The run is cut in
``--phases`` phases of ``--phase`` seconds after a 3 s warm-up, alternately
*quiet* and *scraped*: in a scraped phase ``/metrics`` is read at its start
and every ``--every`` seconds (as Prometheus would, at a shorter interval),
never in its last 2 s. Publish latencies are split by the phase their
worker's report arrived in (reports every 0.5 s), and merged per kind.

The loop's stall: while each scrape runs, a probe thread asks the broker's
``/admin/v2/brokers/version`` every 2 ms on one kept-alive connection;
an answer waits for the loop, so the longest probe answer is about the
longest stall (short by at most the pause). The same probe runs for the same time at the same moments
of the quiet phases: the peer figure (the loop's longest turn under the
traffic alone). Reported per tree: publish p50 / p99 / p99.9 / max quiet
and scraped, the probe's longest answer during scrapes and during quiet
probes (medians over scrapes and the max), scrape seconds and bytes, the
load average. A benchmark, not a test: figures go to docs/operations.md
with this command line.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.many_topics import ROOT, MeasuredBroker
from magnetar.perf import latency
from magnetar.perf.runner import run
from magnetar.perf.spec import WorkloadSpec

WARMUP_S = 3.0
#: Between two probe requests: the probe's own cost to the loop stays small; a
#: stall is measured short by at most this.
PROBE_PAUSE_S = 0.002
#: The broker's compiled hot paths' sources: a peer commit with the same ones gets this tree's builds.
HOT_SOURCES = ["magnetar/protocol/_hot.c", "magnetar/storage/file/_round.c", "magnetar/protocol/_crc32c.h"]


class Probe:
    """Asks a cheap admin path over and over while :meth:`during` runs; the longest answer."""

    def __init__(self, port: int) -> None:
        self.port = port

    def during(self, work) -> tuple[float, object]:
        stop = threading.Event()
        longest = [0.0]

        def ask() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            try:
                while not stop.is_set():
                    t0 = time.perf_counter()
                    conn.request("GET", "/admin/v2/brokers/version")
                    conn.getresponse().read()
                    longest[0] = max(longest[0], time.perf_counter() - t0)
                    time.sleep(PROBE_PAUSE_S)
            finally:
                conn.close()

        thread = threading.Thread(target=ask, daemon=True)
        thread.start()
        time.sleep(0.05)  # the probe's connection is up before the work starts
        try:
            result = work()
        finally:
            stop.set()
            thread.join(60)
        return longest[0], result


def scrape(port: int) -> tuple[float, int]:
    """One read of ``/metrics``: (seconds, bytes). By ``curl`` when there is
    one: in a process of its own, reading tens of MB here would hold this
    process's GIL, and the probe beside it would measure that."""
    url = f"http://127.0.0.1:{port}/metrics"
    if shutil.which("curl"):
        done = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{time_total} %{size_download}", url],
                              capture_output=True, text=True, timeout=120, check=True)
        seconds, size = done.stdout.split()
        return float(seconds), int(size)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        t0 = time.perf_counter()
        conn.request("GET", "/metrics")
        size = len(conn.getresponse().read())
        return time.perf_counter() - t0, size
    finally:
        conn.close()


class Phases:
    """The run's timetable: warm-up, then quiet and scraped phases in turn."""

    def __init__(self, phase_s: float, phases: int) -> None:
        self.phase_s, self.phases = phase_s, phases
        self.t0 = time.monotonic()

    def kind_at(self, t: float) -> str | None:
        """``quiet``, ``scraped`` or None (warm-up, after the last phase) at monotonic ``t``."""
        i = int((t - self.t0 - WARMUP_S) // self.phase_s)
        if t - self.t0 < WARMUP_S or i >= self.phases:
            return None
        return "quiet" if i % 2 == 0 else "scraped"

    @property
    def seconds(self) -> float:
        return WARMUP_S + self.phase_s * self.phases


def one_tree(label: str, root: Path, args, log) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"scrape-stalls-{label}-"))
    metrics = "" if args.topic_metrics else "expose_topic_level_metrics_in_prometheus = false\n"
    config = f'topic_idle_unload_s = 0.0\n{metrics}[storage]\nsync_policy = "always"\n'
    broker = MeasuredBroker(work / "data", config, root=root)
    hists = {"quiet": latency.new_histogram(), "scraped": latency.new_histogram()}
    stalls: dict[str, list[float]] = {"quiet": [], "scraped": []}
    scrapes: list[tuple[float, int]] = []
    phases: list[Phases] = []

    def on_report(report: dict) -> None:
        if report.get("role") != "produce" or not phases:
            return
        kind = phases[0].kind_at(time.monotonic() - 0.25)  # the report's latencies: the last 0.5 s
        if kind is not None:
            latency.merge_encoded(hists[kind], report["hist"])

    def scraper() -> None:
        timetable = phases[0]
        probe = Probe(broker.admin)
        for i in range(args.phases):
            start = timetable.t0 + WARMUP_S + i * args.phase
            kind = "quiet" if i % 2 == 0 else "scraped"
            at = start + 0.5
            while at <= start + args.phase - 2.0:
                time.sleep(max(0.0, at - time.monotonic()))
                if kind == "scraped":
                    longest, result = probe.during(lambda: scrape(broker.admin))
                    scrapes.append(result)
                else:  # the peer: the probe alone, as long as a scrape took
                    took = statistics.median(s for s, _ in scrapes) if scrapes else 1.0
                    longest, _ = probe.during(lambda: time.sleep(took))
                stalls[kind].append(longest)
                at += args.every

    try:
        broker.start()
        # Which code the broker runs: its compiled hot path is mapped from that tree.
        if f"{root}/magnetar/" not in Path(f"/proc/{broker.proc.pid}/maps").read_text():
            raise SystemExit(f"the {label} broker does not run {root}'s code")
        spec = WorkloadSpec(service_url=broker.url, topic=f"ss-{label}", topics=args.topics, size=100,
                            rate=args.rate, batching=False, duration=WARMUP_S + args.phase * args.phases,
                            producer_workers=args.workers, max_pending=1000)
        load_before = os.getloadavg()[0]

        def on_start() -> None:
            phases.append(Phases(args.phase, args.phases))
            threading.Thread(target=scraper, daemon=True).start()

        result = run(spec, produce=True, consume=False, command=f"produce {spec.topic}",
                     broker_pid=broker.proc.pid, setup_timeout=max(60.0, args.topics * 0.05),
                     on_start=on_start, on_report=on_report)
        p = result["produce"] or {}
        quiet, scraped = latency.summary(hists["quiet"]), latency.summary(hists["scraped"])
        figures = {
            "tree": label, "topics": args.topics, "msg_per_s": round(p.get("msg_per_s", 0)), "errors": p.get("errors"),
            "quiet": quiet, "scraped": scraped,
            "stall_ms_scrapes": _ms(stalls["scraped"]), "stall_ms_quiet": _ms(stalls["quiet"]),
            "scrape_s": [round(s, 3) for s, _ in scrapes], "scrape_bytes": scrapes[-1][1] if scrapes else 0,
            "broker_cpu_percent": (result.get("broker") or {}).get("cpu_percent"),
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
        log(f"  {label:8} {args.topics:>6} topics {figures['msg_per_s']:,} msg/s  "
            f"quiet p99 {quiet['p99']} p99.9 {quiet['p99.9']} max {quiet['max']} ms | "
            f"scraped p99 {scraped['p99']} p99.9 {scraped['p99.9']} max {scraped['max']} ms | "
            f"longest probe answer: scrapes {figures['stall_ms_scrapes']} quiet {figures['stall_ms_quiet']} | "
            f"scrapes {figures['scrape_s']} s {figures['scrape_bytes']:,} B  load {figures['load_average']}")
        return figures
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def _ms(values: list[float]) -> dict:
    if not values:
        return {}
    return {"median": round(statistics.median(values) * 1000, 1), "max": round(max(values) * 1000, 1),
            "n": len(values)}


def peer_tree(rev: str, log) -> Path:
    """A detached worktree of ``rev``, with this tree's compiled hot paths when their sources match."""
    path = Path(tempfile.mkdtemp(prefix="scrape-stalls-peer-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(path), rev],
                   check=True, capture_output=True)
    same = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", rev, "--", *HOT_SOURCES]).returncode == 0
    if not same:
        log(f"  {rev}: its compiled sources differ from this tree's; it runs their pure-Python twins")
        return path
    for built in ROOT.glob("magnetar/**/*.so"):
        target = path / built.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)
    return path


def table(results: list[dict]) -> list[str]:
    lines = ["| tree | topics | msg/s | quiet p99 / p99.9 / max ms | scraped p99 / p99.9 / max ms | "
             "longest loop wait during a scrape (median / max ms) | same, quiet | scrape s | load |",
             "|---|---:|---:|---|---|---|---|---|---|"]
    for r in results:
        q, s = r["quiet"], r["scraped"]
        lines.append(f"| {r['tree']} | {r['topics']:,} | {r['msg_per_s']:,} | {q['p99']} / {q['p99.9']} / {q['max']} | "
                     f"{s['p99']} / {s['p99.9']} / {s['max']} | {r['stall_ms_scrapes'].get('median')} / "
                     f"{r['stall_ms_scrapes'].get('max')} | {r['stall_ms_quiet'].get('median')} / "
                     f"{r['stall_ms_quiet'].get('max')} | "
                     f"{round(statistics.median(r['scrape_s']), 3) if r['scrape_s'] else '-'} | "
                     f"{r['load_average'][0]}-{r['load_average'][1]} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=5000.0, help="total msg/s over all topics")
    ap.add_argument("--phase", type=float, default=10.0, help="seconds of each quiet or scraped phase")
    ap.add_argument("--phases", type=int, default=4, help="phases, alternately quiet and scraped")
    ap.add_argument("--every", type=float, default=5.0, help="seconds between two scrapes in a scraped phase")
    ap.add_argument("--workers", type=int, default=0, help="producer processes (0: one per core)")
    ap.add_argument("--peer-commit", help="also run this commit's broker (e.g. the one before a change)")
    ap.add_argument("--no-topic-metrics", dest="topic_metrics", action="store_false",
                    help="turn the per-topic series off (expose_topic_level_metrics_in_prometheus = false)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    trees = [("this", ROOT)]
    peer = None
    if args.peer_commit:
        peer = peer_tree(args.peer_commit, log)
        trees.append((args.peer_commit[:10], peer))
        if int(time.time()) % 2:
            trees.reverse()
    started = time.time()
    try:
        results = [one_tree(label, root, args, log) for label, root in trees]
    finally:
        if peer is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(peer)], capture_output=True)
    doc = {"command": " ".join(sys.argv), "cpus": os.cpu_count(), "started": started, "runs": results,
           "table": table(results)}
    print("\n".join(doc["table"]))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
