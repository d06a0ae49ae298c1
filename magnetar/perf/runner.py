"""Run a workload: start worker processes, aggregate their reports, build the result.

:func:`run` is the whole life of one measurement:

1. validate the spec and cut it into worker plans (:mod:`.spec`);
2. start consumer processes and wait until every one is subscribed, then
   producer processes until every producer exists (setup is not measured);
3. release them all at once, print a progress line every second;
4. stop: producers stop themselves (``duration`` / ``messages``); consumers
   are stopped once they received everything produced (times the number of
   subscriptions) or ``drain_timeout`` after the producers finished; in a
   consume-only run, after ``duration`` or ``messages``;
5. return the result dict (see :func:`_result`), which ``--json`` saves.

Workers are *spawned*, not forked: the official client starts C++ threads
and forking a process that has threads is unsafe. The runner itself never
creates a client.

Failure modes: a worker that dies or reports an error is listed under
``errors`` in the result (and the run goes on with the others); a worker
that does not become ready within ``setup_timeout`` aborts the run with
``RuntimeError``. Ctrl-C stops the run early and still returns what was
measured.
"""
from __future__ import annotations

import importlib
import multiprocessing
import queue as queue_mod
import signal
import time
from typing import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from . import latency, procstat
from .reporting import Reporter
from .series import SeriesLog, buckets
from .spec import WorkerPlan, WorkloadSpec, plan_workers

DEFAULT_DRIVER = "magnetar.perf.pulsar_driver"
#: A worker using more than this share of one core is the bottleneck.
SATURATED_PERCENT = 90.0


def _worker_entry(driver: str, role: str, spec: WorkloadSpec, plan: WorkerPlan, q, start, stop) -> None:
    # The runner owns Ctrl-C: it sets ``stop`` and collects the final reports.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    reporter = Reporter(q, plan.index, role, series=role == "produce" and spec.series_s > 0)
    try:
        getattr(importlib.import_module(driver), role)(spec, plan, reporter, start, stop)
    except BaseException as exc:  # report, never die silently
        reporter.final(error=f"{type(exc).__name__}: {exc}")
        return
    reporter.final()


@dataclass
class _Side:
    """Totals of one role (produce or consume) over all its workers."""

    workers: int = 0
    msgs: int = 0
    bytes: int = 0
    errors: int = 0
    first: float | None = None
    last: float | None = None
    finals: int = 0
    hist: object = field(default_factory=latency.new_histogram)
    cpu_start: dict = field(default_factory=dict)
    cpu_end: dict = field(default_factory=dict)
    window_msgs: int = 0
    window_bytes: int = 0
    series: SeriesLog = field(default_factory=SeriesLog)

    def absorb(self, report: dict) -> None:
        self.msgs += report["msgs"]
        self.bytes += report["bytes"]
        self.errors += report["errors"]
        self.window_msgs += report["msgs"]
        self.window_bytes += report["bytes"]
        latency.merge_encoded(self.hist, report["hist"])
        self.series.absorb(report.get("series"))
        if report["first"] is not None and (self.first is None or report["first"] < self.first):
            self.first = report["first"]
        if report["last"] is not None and (self.last is None or report["last"] > self.last):
            self.last = report["last"]
        self.cpu_end[report["worker"]] = (report["cpu"], time.monotonic())
        if report["final"]:
            self.finals += 1

    @property
    def done(self) -> bool:
        return self.finals >= self.workers


class ProgressPrinter:
    """Prints one line per second; silent when ``console`` is None."""

    def __init__(self, console) -> None:
        self.console = console

    def line(self, elapsed: float, prod: _Side | None, cons: _Side | None, window: float) -> None:
        if self.console is None:
            return
        parts = [f"[{elapsed:5.1f} s]"]
        for name, side in (("produce", prod), ("consume", cons)):
            if side is None or not side.workers:
                continue
            rate = side.window_msgs / window if window > 0 else 0.0
            mbs = side.window_bytes / window / 1e6 if window > 0 else 0.0
            parts.append(f"{name} [bold]{rate:>11,.0f}[/bold] msg/s {mbs:8.2f} MB/s (total {side.msgs:,})")
        self.console.print("  ".join(parts), highlight=False)


#: Seconds of setup allowed per producer or consumer of the busiest worker,
#: over ``setup_timeout``: each one is a topic lookup and load on the broker.
SETUP_S_PER_CLIENT = 0.25


def run(
    spec: WorkloadSpec,
    *,
    produce: bool = True,
    consume: bool = True,
    driver: str = DEFAULT_DRIVER,
    console=None,
    broker_pid: int | None = None,
    command: str = "",
    setup_timeout: float = 60.0,
    on_start: Callable[[], None] | None = None,
    on_report: Callable[[dict], None] | None = None,
) -> dict:
    """Run ``spec`` and return the result dict. See the module docstring.
    ``setup_timeout`` grows by :data:`SETUP_S_PER_CLIENT` per producer and
    consumer a worker creates (100,000 topics take minutes to create).
    ``on_start`` runs once every worker is ready, just before the clock
    starts (a bench reads the broker's counters there). ``on_report`` sees
    each worker's stats report as it arrives (deltas, :mod:`.reporting`: a
    bench splits the latencies by what it did meanwhile)."""
    spec = replace(spec, subscriptions=list(spec.subscriptions), extra=dict(spec.extra))
    if produce and consume:
        spec.stamp = True
    spec.validate()
    prod_plans, cons_plans = plan_workers(spec)
    if not produce:
        prod_plans = []
    if not consume:
        cons_plans = []
    if not prod_plans and not cons_plans:
        raise ValueError("nothing to run: no producers and no consumers")

    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    start = ctx.Event()
    stop_prod = ctx.Event()
    stop_cons = ctx.Event()
    procs: list = []
    prod = _Side(workers=len(prod_plans))
    cons = _Side(workers=len(cons_plans))
    errors: list[str] = []
    progress = ProgressPrinter(console)

    def launch(plans: list[WorkerPlan], role: str, stop) -> None:
        for plan in plans:
            p = ctx.Process(target=_worker_entry, args=(driver, role, spec, plan, q, start, stop),
                            name=f"perf-{role}-{plan.index}", daemon=True)
            p.start()
            procs.append(p)
        side = prod if role == "produce" else cons
        most = max((len(plan.slots) for plan in plans), default=0)
        _await_ready(q, side, role, len(plans), setup_timeout + SETUP_S_PER_CLIENT * most, errors)

    try:
        # Consumers first: a subscription at "latest" must exist before the first send.
        launch(cons_plans, "consume", stop_cons)
        launch(prod_plans, "produce", stop_prod)
        if on_start is not None:
            on_start()
    except BaseException:
        stop_prod.set()
        stop_cons.set()
        start.set()
        _reap(procs)
        raise
    broker_cpu = procstat.CpuMeter(broker_pid) if broker_pid else None
    machine0 = procstat.machine_jiffies()
    if broker_cpu:
        broker_cpu.start()
    t0 = time.monotonic()
    start.set()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    timeline: list[dict] = []
    next_line = t0 + 1.0
    window_start = t0
    prod_done_at: float | None = None
    hard_deadline = t0 + (spec.duration if spec.duration > 0 else 3600) + spec.drain_timeout + 60
    interrupted = False
    expected_per_msg = len(spec.subscriptions)

    try:
        while True:
            try:
                report = q.get(timeout=0.1)
            except queue_mod.Empty:
                report = None
            if report is not None and report.get("kind") == "stats":
                side = prod if report["role"] == "produce" else cons
                side.absorb(report)
                if on_report is not None:
                    on_report(report)
                if report["error"]:
                    errors.append(f"{report['role']} worker {report['worker']}: {report['error']}")
            now = time.monotonic()
            if now >= next_line:
                window = now - window_start
                progress.line(now - t0, prod, cons, window)
                timeline.append({
                    "t": round(now - t0, 2),
                    "produce_msg_per_s": round(prod.window_msgs / window) if window else 0,
                    "consume_msg_per_s": round(cons.window_msgs / window) if window else 0,
                })
                prod.window_msgs = prod.window_bytes = cons.window_msgs = cons.window_bytes = 0
                window_start = now
                next_line = now + 1.0
            if prod.workers and prod.done and prod_done_at is None:
                prod_done_at = now
            if cons.workers and not stop_cons.is_set():
                if prod.workers:
                    drained = cons.msgs >= prod.msgs * expected_per_msg
                    if prod_done_at is not None and (drained or now - prod_done_at > spec.drain_timeout):
                        stop_cons.set()
                else:
                    timed_out = spec.duration > 0 and now - t0 >= spec.duration
                    if timed_out or (spec.messages and cons.msgs >= spec.messages):
                        stop_cons.set()
            if (not prod.workers or prod.done) and (not cons.workers or cons.done):
                break
            if now > hard_deadline or not any(p.is_alive() for p in procs):
                if not any(p.is_alive() for p in procs):
                    _drain_queue(q, prod, cons, errors)
                if (prod.workers and not prod.done) or (cons.workers and not cons.done):
                    errors.append("workers did not finish in time (or died)")
                break
    except KeyboardInterrupt:
        interrupted = True
        stop_prod.set()
        stop_cons.set()
        _collect_finals(q, prod, cons, errors, timeout=15)
    finally:
        stop_prod.set()
        stop_cons.set()
        _reap(procs)
    machine1 = procstat.machine_jiffies()
    broker = None
    if broker_cpu:
        broker = {"pid": broker_pid, "cpu_percent": broker_cpu.stop(),
                  "rss_mb": _mb(procstat.rss_bytes(broker_pid)),
                  **broker_cpu_per_message(broker_cpu.seconds, prod.msgs if prod.workers else cons.msgs,
                                           spec.batching)}
    wall = time.monotonic() - t0
    return _result(spec, command, driver, started_at, wall, t0, prod, cons, timeline, errors, broker,
                   procstat.busy_percent(machine0, machine1), interrupted)


def _await_ready(q, side: _Side, role: str, count: int, timeout: float, errors: list[str]) -> None:
    ready = 0
    deadline = time.monotonic() + timeout
    while ready < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"{count - ready} {role} worker(s) not ready after {timeout:.0f} s")
        try:
            report = q.get(timeout=left)
        except queue_mod.Empty:
            continue
        if report.get("kind") == "ready":
            side.cpu_start[report["worker"]] = report["cpu"]
            ready += 1
        elif report.get("final"):
            raise RuntimeError(f"{role} worker {report['worker']} failed during setup: {report['error']}")


def _drain_queue(q, prod: _Side, cons: _Side, errors: list[str]) -> None:
    while True:
        try:
            report = q.get(timeout=0.2)
        except queue_mod.Empty:
            return
        if report.get("kind") == "stats":
            (prod if report["role"] == "produce" else cons).absorb(report)
            if report["error"]:
                errors.append(f"{report['role']} worker {report['worker']}: {report['error']}")


def _collect_finals(q, prod: _Side, cons: _Side, errors: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (prod.workers and not prod.done) or (cons.workers and not cons.done):
        if time.monotonic() > deadline:
            return
        try:
            report = q.get(timeout=0.2)
        except (queue_mod.Empty, KeyboardInterrupt):
            continue
        if report.get("kind") == "stats":
            (prod if report["role"] == "produce" else cons).absorb(report)


def _reap(procs: list) -> None:
    for p in procs:
        p.join(timeout=30)
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(5)


def _mb(n: int | None) -> float | None:
    return None if n is None else round(n / 1e6, 1)


def _side_result(side: _Side, t0: float, from_first: bool) -> dict | None:
    if not side.workers:
        return None
    begin = side.first if from_first and side.first is not None else t0
    seconds = (side.last - begin) if side.last is not None else 0.0
    # One message in the run has no interval: rate over the run is undefined.
    rate = side.msgs / seconds if seconds > 0 else 0.0
    return {
        "messages": side.msgs,
        "bytes": side.bytes,
        "errors": side.errors,
        "seconds": round(seconds, 3),
        "msg_per_s": round(rate, 1),
        "mb_per_s": round(side.bytes / seconds / 1e6, 3) if seconds > 0 else 0.0,
        "latency_ms": latency.summary(side.hist),
        "latency_cdf": latency.cdf(side.hist),
    }


def _cpu(side: _Side, t0: float) -> list[float]:
    out = []
    for worker, cpu0 in sorted(side.cpu_start.items()):
        end = side.cpu_end.get(worker)
        if end is None or end[1] <= t0:
            continue
        out.append(round(100 * (end[0] - cpu0) / (end[1] - t0), 1))
    return out


def broker_cpu_per_message(cpu_seconds: float | None, messages: int, batching: bool) -> dict:
    """The broker's CPU seconds over the run and per message (µs).

    Messages are the produced ones (the consumed ones in a consume-only run).
    The CPU covers the whole run, the final drain included, so it is
    divided by every message of the run. Without batching every message is
    one entry, so the per-entry figure is the same; with batching the
    entry count is the client's business and is not reported.
    """
    out: dict = {"cpu_seconds": None if cpu_seconds is None else round(cpu_seconds, 3)}
    if cpu_seconds is not None and messages:
        out["cpu_us_per_message"] = round(1e6 * cpu_seconds / messages, 2)
        if not batching:
            out["cpu_us_per_entry"] = out["cpu_us_per_message"]
    return out


def _result(spec, command, driver, started_at, wall, t0, prod, cons, timeline, errors, broker,
            machine_busy, interrupted) -> dict:
    prod_cpu = _cpu(prod, t0)
    produced = _side_result(prod, t0, from_first=False)
    if produced is not None and spec.series_s:
        # By send time from the clock's start (``series_t0``, monotonic: a bench aligns its own records on it).
        produced.update(series_t0=t0, series=buckets(prod.series, t0, spec.series_s))
        if spec.series_wide_s:
            produced["series_wide"] = buckets(prod.series, t0, spec.series_wide_s)
    cons_cpu = _cpu(cons, t0)
    saturated = any(c >= SATURATED_PERCENT for c in prod_cpu + cons_cpu) or (
        machine_busy is not None and machine_busy >= 95.0)
    return {
        "tool": "magnetar perf",
        "command": command,
        "driver": driver,
        "started_at": started_at,
        "wall_seconds": round(wall, 3),
        "interrupted": interrupted,
        "spec": spec.as_dict(),
        "produce": produced,
        # Consumers may start before the first message exists: time from the first receive.
        "consume": _side_result(cons, t0, from_first=True),
        "timeline": timeline,
        "generator": {
            "producer_workers": prod.workers,
            "consumer_workers": cons.workers,
            "producer_cpu_percent": prod_cpu,
            "consumer_cpu_percent": cons_cpu,
            "machine_busy_percent": machine_busy,
            "saturated": saturated,
        },
        "broker": broker,
        "errors": errors,
    }
