"""Object storage's publish latency and PUT bill by storage profile, beside
today's 20 ms interval, in one run (issue 41).

    .venv/bin/python -m bench.object_latency [--seconds 10] [--many-topics 10000] [--json PATH]

Runs on one broker (``LocalCluster(brokers=1, storage="object")``: its own
etcd and SeaweedFS on loopback), the official client, one producer per
topic, batching off, 100-byte messages, twice:

- ``interval``: today's scheduling, every entry gathered for 20 ms
  (``object_storage_profile = "cost"``, ``object_commit_interval_ms = 20``,
  no PUT budget);
- ``profiles``: the defaults (``latency``, a PUT budget of 250/s, ``cost``
  at 250 ms for namespaces that choose it; layout format 2);
- ``profiles-v1`` (only if asked: ``--configs profiles-v1,profiles``): the
  same with new ledgers in layout format 1, the peer of format 2.

Workloads, each on topics of their own: one topic at 1,000 msg/s; ``--many-topics``
(10,000) at 20,000 msg/s; then (``profiles`` only) ``--cost-topics`` (1,000) at
5,000 msg/s in a namespace whose policy is ``cost``. Beside each figure:
PUTs/s and metadata transactions/s of the broker (its ``/metrics``, read
every 0.5 s, or every 5 s past 1,000 topics: a scrape of 10,000 topics' broker
was a fifth of its CPU at 0.5 s, where Prometheus scrapes every 15-60 s;
``--scrape-every`` sets it; the per-topic series are off unless ``--topic-metrics``), etcd's
WAL fsyncs/s (etcd's own ``/metrics``) and the broker's fsyncs (none on
object storage), and the 1-minute load average at the start and end: the
machine is shared, compare ratios within a run.

``--sections-per-ledger N`` sets the brokers' ``object_sections_per_ledger``:
at 10,000 topics every ledger gets a section in about one commit in fifty
(~2 a second) and they all fill together, so 50-100 brings their rollovers
(and the seals and compactions after them) into a 30-90 s sending.
``--put-budget N`` sets their ``object_put_budget_per_s`` (0: none),
``--put-budget-floor N`` their ``object_put_budget_floor_per_s`` (at or
above the budget: the rate never moves while their loop is short of cores).

Each sending is also a series of 0.5 s buckets by send time (``--series-every``)
beside the broker's collections (``--gc-census``), its loop lag and commits
(``--broker-timeline``) and the machine's CPU: the buckets whose p99 is above
``--series-above`` ms are printed, all go to ``--json`` (bench/send_series.py).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

from bench import broker_timeline, gc_census, send_series, send_windows
from bench.sampling import PeriodicSampler
from bench.object_storage import commit_phases, etcd_per_topic, phase_figures
from magnetar.perf.runner import run
from magnetar.perf.spec import WorkloadSpec
from magnetar_harness.cluster import LocalCluster

CONFIGS = {
    "interval": '[storage]\nobject_storage_profile = "cost"\nobject_commit_interval_ms = 20\n'
                "object_put_budget_per_s = 0\n",
    "profiles": "[storage]\n",  # latency by default, budget 250/s, cost at 250 ms
    # The same with the ledgers' index in layout format 1 (a compare and a record per ledger per commit).
    "profiles-v1": "[storage]\nobject_layout = 1\n",
}


def storage_settings(sections_per_ledger: int = 0, collect_every: float = 0,
                     put_budget: float | None = None, put_budget_floor: float | None = None) -> str:
    """The ``[storage]`` lines the options add to a configuration's (each
    falsy or None one: the broker's default). Raises ``ValueError`` for a
    negative PUT budget (0 is the broker's "no budget")."""
    lines = ""
    # Fewer sections per ledger: the many topics' rollovers (every ~500 s at 1,000) within a short sending.
    if sections_per_ledger:
        lines += f"object_sections_per_ledger = {sections_per_ledger}\n"
    # The collector's passes (every 150-450 s by default) sooner and more often: each lands in the sending.
    if collect_every:
        lines += f"object_collect_interval_s = {collect_every}\n"
    # Fewer, larger commits than the default budget (250/s) lets happen: what commits cost the machine.
    if put_budget is not None:
        if put_budget < 0:
            raise ValueError(f"a PUT budget is 0 (none) or more PUTs a second, got {put_budget}")
        lines += f"object_put_budget_per_s = {put_budget}\n"
    # What the budget yields to while the broker's loop waits for a core (at or above it: it never yields).
    if put_budget_floor is not None:
        if put_budget_floor < 0:
            raise ValueError(f"a PUT budget's floor is 0 or more PUTs a second, got {put_budget_floor}")
        lines += f"object_put_budget_floor_per_s = {put_budget_floor}\n"
    return lines


def put_budget_arg(text: str) -> float:
    """argparse type of ``--put-budget``: a clear error, not a traceback."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of PUTs a second: {text!r}") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"a PUT budget is 0 (none) or more PUTs a second, got {text!r}")
    return value


def broker_env_arg(text: str) -> tuple[str, str]:
    """argparse type of ``--broker-env``: ``NAME=VALUE``, a clear error otherwise."""
    name, sep, value = text.partition("=")
    if not sep or not name or not name.replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (an environment variable), got {text!r}")
    return name, value


def _scrape(url: str) -> str:
    return urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()


def _value(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def _sum(text: str, name: str, having: str = "") -> float:
    """Every series of ``name`` added up (a histogram's ``_sum`` or ``_count``
    over its labels); with ``having`` (``grpc_method="Txn"``), only those whose labels hold it."""
    return sum(float(v) for labels, v in re.findall(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", text, re.M)
               if having in labels)


#: etcd's own time per operation, as (key, metric) pairs of running sums
#: and counts: per window, each ``<key>_s`` over its ``<key>_n`` is the mean
#: (bench/send_windows.py ``MEANS``).
ETCD_DURATIONS = (("etcd_fsync", "etcd_disk_wal_fsync_duration_seconds", ""),
                  ("etcd_backend", "etcd_disk_backend_commit_duration_seconds", ""),
                  ("etcd_apply", "etcd_server_apply_duration_seconds", ""),
                  # A Txn from its arrival to its answer, raft and apply included:
                  # only with etcd's extensive metrics (``--broker-env ETCD_METRICS=extensive``).
                  ("etcd_served", "grpc_server_handling_seconds", 'grpc_method="Txn"'))


def etcd_counters(etcd: str) -> dict:
    """etcd's durations (sum and count each), its snapshots, CPU seconds and database size."""
    out = {}
    for key, metric, having in ETCD_DURATIONS:
        out[f"{key}_s"], out[f"{key}_n"] = _sum(etcd, metric + "_sum", having), _sum(etcd, metric + "_count", having)
    out["etcd_snapshots"] = _value(etcd, "etcd_debugging_snap_save_total_duration_seconds_count")
    out["etcd_cpu"] = _value(etcd, "process_cpu_seconds_total")
    out["etcd_db"] = _value(etcd, "etcd_mvcc_db_total_size_in_bytes")
    return out


def counters(cluster: LocalCluster) -> dict:
    broker = _scrape(cluster.members[0].admin_url)
    etcd = _scrape(cluster.etcd_url)
    return {"t": time.monotonic(), "puts": _value(broker, "magnetar_object_puts_total"),
            "txns": _value(broker, "magnetar_object_commit_transactions_total"),
            "broker_fsyncs": _sum(broker, "magnetar_file_fsyncs_total"),
            "gets": _value(broker, "magnetar_object_gets_total"),
            "etcd_fsyncs": _value(etcd, "etcd_disk_wal_fsync_duration_seconds_count"),
            "etcd_txns": _value(etcd, "etcd_mvcc_txn_total"),
            "etcd_writes": _value(etcd, "etcd_server_proposals_committed_total"),
            "etcd_reads": _sum(etcd, "grpc_server_handled_total", 'grpc_method="Range"'),
            "rss": _value(broker, "process_resident_memory_bytes"), **etcd_counters(etcd)}


#: Sampled values that are levels or running sums, not counts to turn into rates.
NOT_RATES = ("t", "rss", "etcd_db", *(f"{key}_{part}" for key, _, _ in ETCD_DURATIONS for part in "sn"))


def rates(before: dict, after: dict, seconds: float) -> dict:
    return {f"{k}_per_s": round((after[k] - before[k]) / seconds, 1) for k in before if k not in NOT_RATES}


def create_namespace(cluster: LocalCluster, namespace: str, profile: str) -> None:
    base = cluster.members[0].admin_url + f"/admin/v2/namespaces/{namespace}"
    urllib.request.urlopen(urllib.request.Request(base, method="PUT", data=b""), timeout=60).read()
    urllib.request.urlopen(urllib.request.Request(base + "/storageProfile", method="POST",
                                                  data=json.dumps(profile).encode(),
                                                  headers={"Content-Type": "application/json"}), timeout=60).read()


def steady_rates(sampler: PeriodicSampler[dict], begin: float, end: float) -> dict:
    """Rates between the first and last samples inside ``[begin, end]``."""
    span = sampler.span(begin, end)
    return rates(span[1], span[2], span[0]) if span else {}


#: Seconds between the broker's /metrics reads, by topics (``--scrape-every`` overrides).
def scrape_every(topics: int, chosen: float | None) -> float:
    return chosen if chosen else (0.5 if topics <= 1000 else 5.0)


def py_spy(pid: int, seconds: float, path: str, rate: int = 200) -> subprocess.Popen:
    """py-spy records ``pid`` for ``seconds`` into ``path`` (collapsed stacks), ``rate`` samples a second."""
    spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if spy is None:
        raise SystemExit("--profile needs py-spy (in this venv or on PATH)")
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", str(rate),
                             "--format", "raw", "--output", path, "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def profile_windows(text: str) -> list[tuple[float, float]]:
    """``--profile-at``'s ``AT:SECONDS[,AT:SECONDS...]`` as ``(at, seconds)``
    pairs (seconds into the sending, and how long); ValueError saying what
    is wrong for anything else."""
    windows = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        at, sep, seconds = part.partition(":")
        try:
            window = (float(at), float(seconds))
        except ValueError:
            window = None
        if not sep or window is None or window[0] < 0 or window[1] < 1:
            raise ValueError(f"--profile-at: {part!r} is not AT:SECONDS (AT >= 0 seconds into the sending, "
                             f"SECONDS >= 1)")
        windows.append(window)
    if not windows:
        raise ValueError("--profile-at: no window given (AT:SECONDS[,AT:SECONDS...])")
    return windows


def process_groups(cluster: LocalCluster) -> dict[str, list[int]]:
    """The run's processes by role, for :class:`send_series.Machine`: the
    broker, etcd, SeaweedFS (``weed``), the client's workers (this
    process's children) and the rest of ``cluster up``'s."""
    broker = cluster.members[0].pid
    groups: dict[str, list[int]] = {"broker": [broker], "etcd": [], "weed": [], "up": [cluster.proc.pid]}
    for pid in send_series.children(cluster.proc.pid):
        if pid != broker:
            words = send_series.command_name(pid).split()
            name = Path(words[0]).name if words else ""
            groups["etcd" if name == "etcd" else "weed" if name == "weed" else "up"].append(pid)
    groups["clients"] = [pid for pid in send_series.children(os.getpid())
                         if "multiprocessing" in send_series.command_name(pid)]
    return groups


def profile_windows_arg(text: str) -> list[tuple[float, float]]:
    """:func:`profile_windows` for argparse (its error, not a traceback)."""
    try:
        return profile_windows(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--profile-at: ")) from None


def measure(spec: WorkloadSpec, cluster: LocalCluster, label: str, log, every: float | None = None,
            profile: str | None = None, mark: str | None = None,
            windows: list[tuple[float, float]] | None = None, rate: int = 200) -> dict:
    """One workload; ``profile``: a path to py-spy the broker into while it
    runs (``.txt`` replaced by ``-at<AT>.txt`` per window of ``windows``,
    ``(seconds into the sending, seconds)``, when given: early and late
    stretches of one sending side by side); ``mark``: a file to create when
    its sending starts (the collector census counts from then). With
    ``spec.series_s``, the machine's and the processes' CPU is read
    meanwhile (``out["machine"]``, for :func:`series_of`)."""
    phases_before = commit_phases(cluster)
    pid = cluster.members[0].pid
    spies: list[subprocess.Popen] = []
    timers: list[threading.Timer] = []
    began: list[float] = []
    machines: list[send_series.Machine] = []

    def on_start() -> None:
        began.append(time.monotonic())
        if mark:
            Path(mark).touch()
        if profile and windows:
            for at, seconds in windows:
                path = profile.removesuffix(".txt") + f"-at{at:g}.txt"
                timer = threading.Timer(at, lambda s=seconds, p=path: spies.append(py_spy(pid, s, p, rate)))
                timer.daemon = True
                timer.start()
                timers.append(timer)
        elif profile:
            spies.append(py_spy(pid, spec.duration, profile, rate))
        if spec.series_s:
            machines.append(send_series.Machine(process_groups(cluster), waiting=pid).__enter__())
    with PeriodicSampler(lambda: counters(cluster), scrape_every(spec.topics, every)) as sampler:
        try:
            result = run(spec, produce=True, consume=False, command=label, setup_timeout=1200, broker_pid=pid,
                         on_start=on_start)
        finally:
            for machine in machines:
                machine.__exit__()
        ended = time.monotonic()
    for timer in timers:
        timer.cancel()  # a window past the sending's end: not taken
    for spy in spies:
        spy.wait(60)
    p = result["produce"] or {}
    seconds = p.get("seconds") or spec.duration
    # The sending is the last ``seconds`` of the run (give or take the drain):
    # the rates are those of its middle, past the first second.
    steady = steady_rates(sampler, ended - seconds + 1.0, ended - 0.5)
    out = {"label": label, "topics": spec.topics, "rate": spec.rate, "sent_per_s": p.get("msg_per_s"),
           "messages": p.get("messages"), "errors": p.get("errors"), "latency_ms": p.get("latency_ms"),
           **{k: None for k in ("puts_per_s", "txns_per_s", "etcd_fsyncs_per_s", "broker_fsyncs_per_s")},
           **steady, "load_avg": os.getloadavg()[0], "run_errors": result["errors"],
           "broker": result.get("broker"),
           # When the clock started (not ``ended`` less the seconds: closing 10,000 producers takes a while).
           "sending": (began[0], began[0] + seconds) if began else (ended - seconds, ended),
           **{k: p[k] for k in ("series_t0", "series", "series_wide") if k in p},
           "machine": machines[0] if machines else None, "samples": sampler.samples}
    try:
        out["commit_phases"] = phase_figures(phases_before, commit_phases(cluster))
    except OSError as error:  # a broker too busy to answer (a burst of rollovers at 10,000 topics did)
        log(f"    commit phases: /metrics did not answer after the sending ({error!r})")
        out["commit_phases"] = {}
    lat = out["latency_ms"] or {}
    broker = out["broker"] or {}
    log(f"  {label}: {out['topics']} topics at {spec.rate:,.0f} msg/s: sent {out['sent_per_s'] or 0:,.0f}/s, "
        f"errors {out['errors']}, p50 {lat.get('p50')} p99 {lat.get('p99')} max {lat.get('max')} ms | "
        f"PUTs/s {out['puts_per_s']}, txns/s {out['txns_per_s']}, GETs/s {out.get('gets_per_s')}, "
        f"etcd fsyncs/s {out['etcd_fsyncs_per_s']}, "
        f"broker fsyncs/s {out['broker_fsyncs_per_s']} | broker CPU {broker.get('cpu_percent')} %, "
        f"{broker.get('cpu_us_per_message')} us/msg | load {out['load_avg']:.1f}")
    log("    commit phases, mean ms (p99 bucket): " + ", ".join(
        f"{phase} {f['mean_ms']} ({f['p99_le_ms']})" for phase, f in out["commit_phases"].items()))
    return out


class EtcdSnapshots:
    """Counts etcd's keys and bytes per topic every ``every`` seconds on a
    thread while the etcd run goes on (a run stopped early still says what
    it had reached); a count that fails (a topic not created yet) is logged
    and skipped."""

    def __init__(self, etcd_url: str, prefix: str, topics: int, every: float, log) -> None:
        self.args = (etcd_url, prefix, topics)
        self.every, self.log, self.taken = every, log, []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "EtcdSnapshots":
        self.began = time.monotonic()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join(timeout=120)

    def _loop(self) -> None:
        while not self.stopped.wait(self.every):
            try:
                found = etcd_per_topic(*self.args)
            except (OSError, KeyError, StopIteration, ValueError) as error:
                self.log(f"    etcd count failed: {error!r}")
                continue
            found.update(minutes=round((time.monotonic() - self.began) / 60, 1), load_avg=os.getloadavg()[0])
            self.taken.append(found)
            self.log(f"    etcd at {found['minutes']} min: keys/topic max {found['keys_max']} mean "
                     f"{found['keys_mean']}, bytes/topic max {found['bytes_max']:,} mean {found['bytes_mean']:,}; "
                     f"etcd holds {found['etcd_keys_total']:,} keys | load {found['load_avg']:.1f}")


def run_config(name: str, args, log, root: str | None = None, tree: str = "this tree") -> dict:
    """``name``'s workloads on a broker running ``root``'s code (None: this tree's)."""
    out: dict = {"config": name, "tree": tree, "load_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix=f"magnetar-object-latency-{name}-") as tmp:
        # The sampler reads the broker's /metrics every 0.5 s, and a scrape
        # visits every loaded topic on the event loop: at 10,000 topics those
        # scrapes would be part of the p99 measured. --topic-metrics keeps them.
        metrics = "" if args.topic_metrics else "expose_topic_level_metrics_in_prometheus = false\n"
        census = args.gc_census and f"{args.gc_census}-{name}-{tree.replace(' ', '_')}-{len(args.censuses)}.json"
        env = census and gc_census.hook_env(census, args.gc_census_counts, args.gc_census_holders,
                                            census + ".sending", args.gc_census_young, args.gc_census_young_skip)
        timeline = args.broker_timeline and str(Path(tmp) / "broker-timeline.jsonl")
        if timeline:
            env = {**(env or {}), **broker_timeline.hook_env(timeline)}
        if args.broker_env:
            env = {**(env or {}), **dict(args.broker_env)}
        sections = storage_settings(args.sections_per_ledger, args.collect_every, args.put_budget,
                                    args.put_budget_floor)
        cluster = LocalCluster(Path(tmp) / "c", brokers=1, storage="object", session_ttl=60.0,
                               broker_config=metrics + CONFIGS[name] + sections, root=root, env=env).start(timeout=180)
        try:
            log(f"[{name}, {tree}] {cluster.members[0].service_url}")
            base = WorkloadSpec(service_url=cluster.members[0].service_url, size=100, batching=False,
                                duration=args.seconds, max_pending=1000, series_s=args.series_every,
                                series_wide_s=args.windows if args.series_every else 0.0)
            if not args.skip_latency and not args.skip_one_topic:
                out["one_topic"] = measure(replace(base, topic=f"one-{name}", topics=1, rate=1000), cluster,
                                           "one topic", log, args.scrape_every)
            if args.many_topics and not args.skip_latency:
                out["many_topics"] = measure(replace(base, topic=f"many-{name}", topics=args.many_topics,
                                                     rate=args.many_rate), cluster, "many topics", log,
                                                     args.scrape_every, profile=args.profile and
                                                     f"{args.profile}-{name}-{tree.replace(' ', '_')}.txt",
                                                     mark=census and census + ".sending",
                                                     windows=args.profile_at, rate=args.profile_rate)
            if name == "profiles" and args.etcd_minutes:
                spec = replace(base, topic="kept", topics=args.etcd_topics, rate=args.etcd_rate,
                               duration=args.etcd_minutes * 60, subscriptions=["kept"],
                               initial_position="earliest", producer_workers=2, consumer_workers=2)
                with EtcdSnapshots(cluster.etcd_url, "kept", args.etcd_topics, args.etcd_every_minutes * 60,
                                   log) as snapshots:
                    result = run(spec, produce=True, consume=True, command="etcd traffic", setup_timeout=1200)
                found = etcd_per_topic(cluster.etcd_url, "kept", args.etcd_topics)
                produced = (result["produce"] or {}).get("messages")
                found.update(minutes=args.etcd_minutes, produced=produced,
                             consumed=(result["consume"] or {}).get("messages"), load_avg=os.getloadavg()[0],
                             carried_msg_per_s=round((produced or 0) / (args.etcd_minutes * 60)),
                             snapshots=snapshots.taken)
                out["etcd"] = found
                log(f"  etcd after {args.etcd_minutes} min of {args.etcd_rate:,.0f} msg/s over {args.etcd_topics} "
                    f"topics (a subscription each): keys/topic max {found['keys_max']} mean {found['keys_mean']}, "
                    f"bytes/topic max {found['bytes_max']:,} mean {found['bytes_mean']:,}; etcd holds "
                    f"{found['etcd_keys_total']:,} keys, database {found['etcd_db_in_use_bytes']:,} B in use; produced "
                    f"{found['produced']}, consumed {found['consumed']}, carried {found['carried_msg_per_s']:,} msg/s")
            if name == "profiles" and args.cost_topics and not args.skip_latency:
                create_namespace(cluster, "public/cost", "cost")
                out["cost"] = measure(replace(base, topic="persistent://public/cost/c", topics=args.cost_topics,
                                              rate=args.cost_rate), cluster, "cost profile", log,
                                              args.scrape_every)
        finally:
            cluster.stop()
        broker = broker_timeline.read(timeline) if timeline else None
    if census:
        census_of(census, out, args, log)
    series_of(out, broker, args, log)
    out["load_at_end"] = os.getloadavg()[0]
    return out


def series_of(out: dict, broker: dict | None, args, log) -> None:
    """Each workload's series (``--series-every``) with the broker's
    collections (``--gc-census``), loop lag and commits (``--broker-timeline``)
    and the machine beside it: the buckets above ``--series-above`` printed,
    all kept in ``out`` (the JSON)."""
    collections = None
    if out.get("gc_censuses") is not None:
        collections = json.loads(Path(args.censuses[-1]).read_text())["collections"]
    for key in ("one_topic", "many_topics", "cost"):
        w = out.get(key)
        if not w or not w.get("series"):
            continue
        machine = w.pop("machine", None)
        send_series.annotate(w["series"], w["series_t0"], args.series_every, collections,
                             broker and broker["lags"], broker and broker["commits"], machine,
                             broker and broker["events"])
        if broker:  # the raw records of the sending (and a second either side), for a closer look
            t0, t1 = w["series_t0"] - 1, w["series_t0"] + len(w["series"]) * args.series_every + 1
            w["broker_timeline"] = {"lags": [x for x in broker["lags"] if t0 <= x[0] <= t1],
                                    "commits": [c for c in broker["commits"] if t0 <= c["began"] <= t1],
                                    "events": [e for e in broker["events"] if t0 <= e[1] <= t1]}
            rollovers(w, args.series_every, log, out["tree"])
        if w.get("series_wide"):
            send_windows.annotate(w["series_wide"], w["series_t0"], args.windows, w.get("samples"),
                                  broker and broker["lags"], broker and broker["events"], machine)
            log(f"  [{w['label']}, {out['tree']}] by {args.windows:g} s windows of send time (ms; rates per s; "
                f"broker CPU % of a core, machine busy %):")
            for line in send_windows.table(w["series_wide"]):
                log("    " + line)
        lines = send_series.table(w["series"], -1 if args.series_all else args.series_above)
        shown = "every bucket" if args.series_all else f"the buckets whose p99 is above {args.series_above:g} ms"
        log(f"  [{w['label']}, {out['tree']}] series by send time, {args.series_every:g} s buckets, "
            f"{shown} ({len(lines) - 1 if lines else 0} of {len(w['series'])}; ms, CPU % of a core):")
        for line in lines:
            log("    " + line)
    for key in ("one_topic", "many_topics", "cost"):
        if out.get(key):
            out[key].pop("machine", None)
            out[key].pop("samples", None)


def rollovers(w: dict, width: float, log, tree: str) -> None:
    """The sending's seals and compactions (``--broker-timeline``): how many,
    from when to when, the most in one bucket; and the latency of the
    buckets they span (the worst bucket's p99, and the p99 of the buckets'
    p99s) beside the buckets before them, into ``w["rollovers"]`` and the log."""
    series = w["series"]
    seals = [i for i, b in enumerate(series) if b.get("seals")]
    found = {"seals": sum(b.get("seals", 0) for b in series),
             "compactions": sum(b.get("compactions", 0) for b in series)}
    if seals:
        first, last = seals[0], max(i for i, b in enumerate(series) if b.get("seals") or b.get("compactions"))
        during = [b["p99_ms"] for b in series[first:last + 1] if b.get("p99_ms") is not None]
        before = [b["p99_ms"] for b in series[:first] if b.get("p99_ms") is not None]
        worst = max(range(first, last + 1), key=lambda i: series[i].get("p99_ms") or 0)
        found.update(from_s=series[first]["t"], to_s=series[last]["t"] + width,
                     most_seals_in_a_bucket=max(b.get("seals", 0) for b in series),
                     most_compactions_in_a_bucket=max(b.get("compactions", 0) for b in series),
                     worst_bucket_s=series[worst]["t"], worst_bucket_p99_ms=series[worst].get("p99_ms"),
                     bucket_p99_median_during_ms=_median(during), bucket_p99_median_before_ms=_median(before))
    w["rollovers"] = found
    log(f"  [{w['label']}, {tree}] rollovers: " + ", ".join(f"{k} {v}" for k, v in found.items()))


def _median(values: list) -> float | None:
    values = sorted(values)
    return values[len(values) // 2] if values else None


def census_of(path: str, out: dict, args, log) -> None:
    """The broker's collections (``--gc-census``) during each workload's
    sending, into ``out`` and the log."""
    args.censuses.append(path)
    try:
        summary = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        log(f"  gc census {path}: not written ({error!r})")
        return
    for key in ("one_topic", "many_topics", "cost"):
        if key in out:
            out[key]["gc"] = gc_census.window(summary, *out[key]["sending"])
            log(f"  [{out[key]['label']}, {out['tree']}, sending {out[key]['sending'][0]:.1f}-"
                f"{out[key]['sending'][1]:.1f}] " + gc_census.brief(summary, *out[key]["sending"]))
    out["gc_censuses"] = summary["censuses"]
    log(f"  [{out['tree']}] whole run: " + gc_census.brief(summary).split("\n")[0] + f" (file {path})")


def ledger_objects(cluster: LocalCluster) -> dict:
    """Of the compacted ledgers in the cluster's store: how many have an
    index object (their entries stay in the commit objects) and how many
    chunk objects there are; and the commit objects (none on files)."""
    if cluster.objectstore_endpoint is None:
        return {}
    keys = cluster.object_keys("ledgers/")
    indexed = sum(1 for k in keys if k.endswith("/index"))
    return {"indexed": indexed, "chunks": len(keys) - indexed, "commit_objects": len(cluster.object_keys("data/"))}


def compacted(cluster: LocalCluster, ledgers: int, timeout: float = 60.0) -> dict:
    """:func:`ledger_objects` once at least ``ledgers`` are compacted (index
    objects or chunk objects), or at ``timeout`` (the compactions of the
    topics just unloaded: part of the write, not of the read)."""
    deadline = time.monotonic() + timeout
    while True:
        found = ledger_objects(cluster)
        if not found or found["indexed"] + found["chunks"] >= ledgers or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def after_a_crash(cluster: LocalCluster, spec: WorkloadSpec, log, storage: str, tree: str,
                  timeout: float = 900.0) -> dict:
    """kill -9 the broker, start it again, load every topic (its ledgers
    recovered: a takeover's, by the broker's new session), wait until
    their compactions are over (the broker's pending compactions at 0 twice
    in a row), then restart it cleanly (its caches empty): what a backfill
    finds once the new owner has settled. Returns :func:`ledger_objects`
    then, with the seconds it took."""
    import signal

    began = time.monotonic()
    cluster.restart_member(0, sig=signal.SIGKILL)
    restarted = time.monotonic()
    from concurrent.futures import ThreadPoolExecutor

    # Loads it: the ledger it wrote is recovered. 64 at a time, as a takeover's waves load
    # many at once (one by one, 1,000 topics took 355 s: each replays its entries for dedup).
    with ThreadPoolExecutor(64) as pool:
        list(pool.map(lambda name: _admin(cluster, f"{name}/internalStats"), spec.topic_names()))
    loaded = time.monotonic()
    settled, deadline = 0, time.monotonic() + timeout
    while settled < 2 and time.monotonic() < deadline:
        time.sleep(1.0)
        metrics = urllib.request.urlopen(cluster.members[0].admin_url + "/metrics", timeout=60).read().decode()
        pending = re.search(r"^magnetar_object_compactions_pending (\S+)$", metrics, re.M)
        settled = settled + 1 if pending is None or float(pending.group(1)) == 0 else 0
    # A backfill comes later, its caches long cold: the loads' replays (dedup reads every
    # entry) left them warm, so a clean restart empties them (it seals only the new, empty ledgers).
    cluster.restart_member(0)
    layout = ledger_objects(cluster)
    if layout:  # object storage
        layout["crash_s"] = {"restart": round(restarted - began, 1), "loads": round(loaded - restarted, 1),
                             "compactions": round(time.monotonic() - loaded, 1)}
        log(f"  kill -9 [{storage}, {tree}]: restarted in {restarted - began:.1f} s, {len(spec.topic_names())} "
            f"topics loaded in {loaded - restarted:.1f} s, their compactions over {time.monotonic() - loaded:.1f} s "
            f"later; chunk objects {layout['chunks']:,}, index objects {layout['indexed']:,}")
    return layout


def _admin(cluster: LocalCluster, path: str) -> dict:
    url = cluster.members[0].admin_url + f"/admin/v2/persistent/public/default/{path}"
    return json.loads(urllib.request.urlopen(url, timeout=60).read())


def topics_alone(cluster: LocalCluster, spec: WorkloadSpec, count: int) -> list[dict]:
    """``count`` of the written topics, spread over them: name, entries, ledger ids."""
    names = spec.topic_names()
    out = []
    for name in [names[i * len(names) // count] for i in range(count)]:
        stats = _admin(cluster, f"{name}/internalStats")
        out.append({"topic": name, "entries": stats["numberOfEntries"],
                    "ledgers": [info["ledgerId"] for info in stats["ledgers"] if info["entries"]]})
    return out


def read_alone(cluster: LocalCluster, spec: WorkloadSpec, alone: list[dict], log, storage: str,
               tree: str) -> list[dict]:
    """Each of ``alone`` read cold from the earliest by one consumer (the
    official client, in this process), nothing else read meanwhile, one after
    another: entries/s from the subscription's answer to the last entry (a
    few hundred entries read in a few ms is not a rate the perf runner's
    first-to-last receive can time), the whole read's ms from the subscribe
    (the topic's load included), GETs, and (object) whether its ledgers
    were indexed (index objects) or chunked."""
    import pulsar
    from magnetar.storage.object.ledger_index import index_object

    keys = set(cluster.object_keys("ledgers/"))
    out = []
    client = pulsar.Client(spec.service_url)
    try:
        for one in alone:
            shape = ("indexed" if any(index_object(lid) in keys for lid in one["ledgers"])
                     else "chunks") if keys else "files"
            before = counters(cluster)
            began = time.monotonic()
            consumer = client.subscribe(f"persistent://public/default/{one['topic']}", "alone",
                                        initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=5000)
            subscribed = time.monotonic()
            read = 0
            try:
                while read < one["entries"]:
                    consumer.receive(timeout_millis=60_000)
                    read += 1
            except Exception as exc:  # noqa: BLE001 (a timeout: reported as what was read)
                log(f"  cold read alone {one['topic']}: {exc!r} after {read} entries")
            done = time.monotonic()
            consumer.close()
            after = counters(cluster)
            row = {"topic": one["topic"], "entries": one["entries"], "read": read, "shape": shape,
                   "msg_per_s": round(read / (done - subscribed), 1) if done > subscribed else None,
                   "ms": round((done - began) * 1000, 1), "gets": after["gets"] - before["gets"]}
            out.append(row)
            log(f"  cold read alone [{storage}, {tree}] {row['topic']} ({shape}): {read} of {row['entries']} "
                f"entries, {row['msg_per_s'] or 0:,.0f} entries/s after the subscribe, {row['ms']} ms from it, "
                f"GETs {row['gets']:.0f}")
    finally:
        client.close()
    rates = sorted(r["msg_per_s"] or 0 for r in out)
    if rates:
        log(f"  cold read alone [{storage}, {tree}]: median {rates[len(rates) // 2]:,.0f} entries/s over "
            f"{len(rates)} topics | load {os.getloadavg()[0]:.1f}")
    return out


def cold_read(storage: str, args, log, root: str | None = None, tree: str = "this tree") -> dict:
    """``--cold-topics`` topics written together (``--cold-messages`` in all,
    100 bytes, batching off as the Python client's default, at ``--cold-rate``
    msg/s in all or the client's max rate), unloaded (their next owner's
    caches are empty; ``--cold-restart``: the broker restarted cleanly instead), then read from the earliest by one consumer each:
    entries/s and MB/s, and (object) the GETs it took and how the ledgers
    were compacted. Many topics at a modest rate (``--cold-topics 1000
    --cold-rate 10000``: ~one entry per section, a section of each topic in
    each commit object, more bytes than the writer keeps) is the shape whose
    ledgers get an index object (layout 3) and are read from the commit
    objects; a few topics at the max rate get large sections, kept by the
    writer and compacted into chunks. ``root``: a checkout whose broker runs it (None: this tree's)."""
    config = "[storage]\n" + "".join(f"{line}\n" for line in args.cold_storage) if storage == "object" else None
    with tempfile.TemporaryDirectory(prefix=f"magnetar-cold-{storage}-") as tmp:
        cluster = LocalCluster(Path(tmp) / "c", brokers=1, storage=storage, session_ttl=60.0,
                               broker_config=config, root=root).start(timeout=180)
        try:
            spec = WorkloadSpec(service_url=cluster.members[0].service_url, size=100, batching=False,
                                topic="cold", topics=args.cold_topics, messages=args.cold_messages,
                                duration=600, max_pending=1000, rate=args.cold_rate)
            written = run(spec, produce=True, consume=False, command="cold write", setup_timeout=600)
            produced = (written["produce"] or {}).get("messages", 0)
            time.sleep(2)
            # --cold-one: the topics read alone, their entries and ledgers (read before they are unloaded)
            alone = topics_alone(cluster, spec, args.cold_one) if args.cold_one else []
            if args.cold_restart:
                # A rolling restart's step: SIGTERM, then the same broker again (its caches and
                # spill empty). What the closing broker compacted is all there is till a read.
                began = time.monotonic()
                cluster.restart_member(0)
                layout = ledger_objects(cluster)
                if layout:
                    log(f"  clean restart [{storage}, {tree}]: {time.monotonic() - began:.1f} s from SIGTERM to "
                        f"serving again; then chunk objects {layout['chunks']:,}, index objects "
                        f"{layout['indexed']:,}")
            elif args.cold_kill:
                layout = after_a_crash(cluster, spec, log, storage, tree)
            else:
                for name in spec.topic_names():
                    url = cluster.members[0].admin_url + f"/admin/v2/persistent/public/default/{name}/unload"
                    urllib.request.urlopen(urllib.request.Request(url, method="PUT", data=b""), timeout=60).read()
                layout = compacted(cluster, args.cold_topics)  # a ledger per topic at least
            if args.cold_one:
                ones = read_alone(cluster, spec, alone, log, storage, tree)
                return {"storage": storage, "tree": tree, "topics": args.cold_topics, "messages": produced,
                        "alone": ones, "load_avg": os.getloadavg()[0], **layout}
            before = counters(cluster)
            reader = replace(spec, subscriptions=["cold"], initial_position="earliest", messages=produced,
                             receive_mode="batch", receiver_queue=5000,
                             # two processes (a core each), as at 8 topics: one per 4 consumers at
                             # 1,000 topics was 250 processes, whose connections timed out in setup
                             consumer_workers=min(2, args.cold_topics))
            result = run(reader, produce=False, consume=True, command="cold read", setup_timeout=600)
            after = counters(cluster)
        finally:
            cluster.stop()
    c = result["consume"] or {}
    out = {"storage": storage, "tree": tree, "topics": args.cold_topics, "messages": produced, "read": c.get("messages"),
           "msg_per_s": c.get("msg_per_s"), "mb_per_s": c.get("mb_per_s"), "gets": after["gets"] - before["gets"],
           "load_avg": os.getloadavg()[0], "errors": result["errors"], **layout}
    shape = (f" | ledgers indexed {layout['indexed']}, chunk objects {layout['chunks']}, "
             f"commit objects {layout['commit_objects']}" if layout else "")
    log(f"  cold read [{storage}, {tree}]: {out['read']:,} of {produced:,} entries over {args.cold_topics} topics: "
        f"{out['msg_per_s'] or 0:,.0f} entries/s, {out['mb_per_s']} MB/s, GETs {out['gets']:.0f}{shape} | "
        f"load {out['load_avg']:.1f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--many-topics", type=int, default=10_000)
    parser.add_argument("--many-rate", type=float, default=20_000)
    parser.add_argument("--cost-topics", type=int, default=1_000)
    parser.add_argument("--cost-rate", type=float, default=5_000)
    parser.add_argument("--etcd-minutes", type=float, default=0,
                        help="then (profiles) this long at --etcd-rate over --etcd-topics, and etcd's keys per topic")
    parser.add_argument("--etcd-topics", type=int, default=1_000)
    parser.add_argument("--etcd-rate", type=float, default=5_000)
    parser.add_argument("--etcd-every-minutes", type=float, default=10,
                        help="during the etcd run, count keys per topic this often too")
    parser.add_argument("--skip-latency", action="store_true", help="only the etcd run")
    parser.add_argument("--skip-one-topic", action="store_true", help="no one-topic workload")
    parser.add_argument("--cold-read", action="store_true", help="only the cold read, files then objects (then objects on --peer)")
    parser.add_argument("--cold-topics", type=int, default=8)
    parser.add_argument("--cold-messages", type=int, default=100_000)
    parser.add_argument("--cold-rate", type=float, default=0,
                        help="msg/s in all while the cold topics are written (0: as fast as the client sends); "
                             "many topics at a modest rate get one entry per section: indexed ledgers")
    parser.add_argument("--cold-one", type=int, default=0, metavar="K",
                        help="with --cold-read: read K of the written topics alone, one after another (each "
                             "its own consumer, nothing else read meanwhile), instead of all of them together")
    parser.add_argument("--cold-storage", action="append", default=[], metavar="LINE",
                        help="with --cold-read: a line of the object broker's [storage] table, e.g. "
                             "'object_spill_max_bytes = 0' (its sealed ledgers then get index objects, as after "
                             "a takeover); repeatable")
    parser.add_argument("--cold-restart", action="store_true",
                        help="with --cold-read: restart the broker cleanly (SIGTERM, as a rolling restart does) "
                             "instead of unloading the topics, before the read")
    parser.add_argument("--cold-kill", action="store_true",
                        help="with --cold-read: kill -9 the broker and start it again instead of unloading the "
                             "topics, load every topic (its ledgers recovered, as in a takeover) and wait for "
                             "their compactions, before the read")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--configs", default="interval,profiles")
    parser.add_argument("--json")
    parser.add_argument("--scrape-every", type=float, default=None,
                        help="seconds between the broker's /metrics reads (default 0.5, 5 past 1,000 topics)")
    parser.add_argument("--topic-metrics", action="store_true",
                        help="keep the per-topic series at /metrics (the bench scrapes it every 0.5 s)")
    parser.add_argument("--peer", metavar="ROOT",
                        help="a checkout (built: make install) whose broker runs each config too, "
                             "interleaved with this tree's (this tree first, then alternating by repeat)")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="py-spy the broker during the many-topics run into PREFIX-<config>-<tree>.txt")
    parser.add_argument("--profile-at", metavar="AT:SECONDS[,...]", type=profile_windows_arg,
                        help="with --profile: only these windows of the many-topics sending (seconds into it, "
                             "how long), each into PREFIX-<config>-<tree>-at<AT>.txt, e.g. 15:45,165:45 to set "
                             "its first minutes beside its fourth")
    parser.add_argument("--profile-rate", type=int, default=200, metavar="HZ",
                        help="with --profile: py-spy's samples a second (200; 40 disturbs a busy broker less)")
    parser.add_argument("--gc-census", metavar="PREFIX",
                        help="time every collection of the brokers' garbage collector (bench/gc_census.py) into "
                             "PREFIX-<config>-<tree>-<n>.json and print the pauses of each sending")
    parser.add_argument("--gc-census-counts", type=int, default=20,
                        help="with --gc-census: count what the first N middle/full collections of the many-topics "
                             "sending walk, by type (stalls the broker some 0.1 s each: 0 for latency figures)")
    parser.add_argument("--gc-census-holders", type=int, default=1,
                        help="with --gc-census: in the first N counts, who holds the largest kinds (seconds each)")
    parser.add_argument("--gc-census-young", type=int, default=0,
                        help="with --gc-census: count what N young collections of the many-topics sending keep "
                             "(generation 1's growth by type; holders at the last: seconds)")
    parser.add_argument("--gc-census-young-skip", type=int, default=2,
                        help="with --gc-census-young: past the sending's first N young collections")
    parser.add_argument("--series-every", type=float, default=0.5,
                        help="seconds per bucket of each sending's series by send time (0: none; bench/send_series.py)")
    parser.add_argument("--series-above", type=float, default=50.0,
                        help="print the series' buckets whose p99 is above this many ms (all are in --json)")
    parser.add_argument("--series-all", action="store_true", help="print every bucket of the series")
    parser.add_argument("--windows", type=float, default=0.0, metavar="SECONDS",
                        help="also cut each sending in windows this wide (60: per minute), each with its exact "
                             "p50/p99/max beside PUTs/s, GETs/s, transactions/s, RSS, loop lag, seals and "
                             "compactions (bench/send_windows.py)")
    parser.add_argument("--sections-per-ledger", type=int, default=0, metavar="N",
                        help="the brokers' object_sections_per_ledger (default: theirs, 1,000): at 10,000 topics "
                             "and 20,000 msg/s a ledger gets ~2 sections/s, so 50-100 rolls them within a minute")
    parser.add_argument("--put-budget", type=put_budget_arg, default=None, metavar="PUTS_PER_S",
                        help="the brokers' object_put_budget_per_s (default: theirs, 250; 0: none): fewer, "
                             "larger commits, to see what the commits' count costs a sending")
    parser.add_argument("--put-budget-floor", type=put_budget_arg, default=None, metavar="PUTS_PER_S",
                        help="the brokers' object_put_budget_floor_per_s (default: theirs, 25): the least the "
                             "budget goes down to, searching for the fastest commits while their loop waits for a "
                             "core; at or above the budget, the rate never moves (the peer of the default)")
    parser.add_argument("--collect-every", type=float, default=0, metavar="S",
                        help="the brokers' object_collect_interval_s (default: theirs, 300: a pass every 150-450 s, "
                             "so in a 300 s sending one lands at a random minute or none does)")
    parser.add_argument("--broker-timeline", action="store_true",
                        help="the broker's event-loop lag and its commits' phases in the series "
                             "(bench/broker_timeline.py: a probe callback on the broker's loop every 20 ms)")
    parser.add_argument("--broker-env", type=broker_env_arg, action="append", default=[], metavar="NAME=VALUE",
                        help="set in the brokers' environment (repeatable), e.g. "
                             "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 for another allocator")
    args = parser.parse_args()
    if args.profile_at and not args.profile:
        parser.error("--profile-at needs --profile PREFIX (where the windows' stacks go)")
    if args.profile_rate < 1:
        parser.error("--profile-rate: at least 1 sample a second")
    args.censuses = []
    log = lambda line: print(line, flush=True)  # noqa: E731
    if args.cold_read:
        peer = [("object", str(Path(args.peer).resolve()), "peer")] if args.peer else []
        results = {"cold_read": [cold_read(storage, args, log, root, tree) for _ in range(args.repeats)
                                 for storage, root, tree in [("file", None, "this tree"),
                                                             ("object", None, "this tree"), *peer]]}
    else:
        trees = [(None, "this tree")] + ([(str(Path(args.peer).resolve()), "peer")] if args.peer else [])
        results = {}
        for i in range(args.repeats):
            for name in args.configs.split(","):
                for root, tree in (trees if i % 2 == 0 else trees[::-1]):
                    results[f"{name}#{i}" + ("" if root is None else "-peer")] = run_config(name, args, log, root, tree)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))


if __name__ == "__main__":
    main()
