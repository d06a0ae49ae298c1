"""The bench workloads, each run against every system under test.

A *system* is ``(label, factory)``: ``factory(workdir)`` returns a started
server with ``url``, ``pid`` and ``stop()`` (see :mod:`servers`). Each
workload starts a fresh server per system (fresh data directory), runs the
same :class:`WorkloadSpec` through ``magnetar.perf.runner.run`` with that
system's driver, stops the server, and returns rows::

    {"workload", "metric", "unit", "better": "higher"|"lower",
     "values": {label: number | None}, "detail": {label: perf result dict}}

A system that fails a workload gets ``None`` and its error in ``detail``:
one broken side never stops the whole bench.

With ``raw=True``, :func:`max_produce` also runs each Magnetar system with
the raw generator (:mod:`magnetar.perf.raw_driver`) and adds rows whose
metric says "raw generator"; their results sit in ``detail`` under
``"<label> (raw generator)"``. The other rows are built as without it.
"""
from __future__ import annotations

import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from magnetar.perf import procstat
from magnetar.perf.runner import run
from magnetar.perf.spec import WorkloadSpec

from bench.servers import MagnetarServer, NatsServer, create_streams, free_port, wait_port

PULSAR = "magnetar.perf.pulsar_driver"
RAW = "magnetar.perf.raw_driver"
NATS = "bench.nats_driver"
RAW_SUFFIX = " (raw generator)"


@dataclass
class System:
    label: str
    kind: str  # "magnetar" or "nats"
    sync_policy: str | None = None
    nats_binary: str | None = None
    #: Driver module replacing the system's own (the raw generator's rows).
    driver_override: str | None = None

    @property
    def driver(self) -> str:
        if self.driver_override:
            return self.driver_override
        return PULSAR if self.kind == "magnetar" else NATS

    def start(self, workdir: Path):
        if self.kind == "magnetar":
            return MagnetarServer(workdir, self.sync_policy or "always").start()
        return NatsServer(self.nats_binary, workdir).start()


@dataclass
class Timing:
    """Durations of one bench profile (full or --quick)."""

    seconds: float
    backlog: int
    cold_trials: int
    ceiling_seconds: float


FULL = Timing(seconds=15, backlog=1_000_000, cold_trials=3, ceiling_seconds=4)
QUICK = Timing(seconds=4, backlog=100_000, cold_trials=1, ceiling_seconds=2)


def _measure(system: System, spec: WorkloadSpec, log, produce: bool = True, consume: bool = True,
             prepare=None, workdir: Path | None = None) -> dict:
    """Run ``spec`` once against a fresh server of ``system``; the perf result
    (with ``error`` set instead when it failed). The server's data goes with
    it: a full bench writes tens of gigabytes."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{system.label}-", dir=workdir))
    server = None
    try:
        server = system.start(workdir)
        spec = replace(spec, service_url=server.url)
        if system.kind == "nats":
            asyncio.run(create_streams(server.url, spec.topic_names()))
        if prepare is not None:
            prepare(system, server, spec)
        result = run(spec, produce=produce, consume=consume, driver=system.driver, broker_pid=server.pid,
                     command=spec.topic)
        return result
    except Exception as exc:  # one side failing must not sink the bench
        log(f"[red]{system.label}: {spec.topic} failed: {exc}[/red]")
        return {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _value(result: dict, side: str, key: str, sub: str | None = None):
    part = (result or {}).get(side)
    if not part:
        return None
    v = part[key]
    return v[sub] if sub else v


def _row(workload, metric, unit, better, results, side, key, sub=None) -> dict:
    return {"workload": workload, "metric": metric, "unit": unit, "better": better,
            "values": {label: _value(r, side, key, sub) for label, r in results.items()}}


def _broker_row(workload, results) -> dict:
    """Throughput per broker core: msg/s divided by the broker's CPU share.

    An extrapolation, labelled as such: the load generator, not the broker,
    limits every max-rate run on a 2-core machine, so this is the best
    available estimate of what one broker core could absorb."""
    values = {}
    for label, r in results.items():
        rate = _value(r, "produce", "msg_per_s")
        cpu = ((r or {}).get("broker") or {}).get("cpu_percent")
        values[label] = round(rate / (cpu / 100)) if rate and cpu else None
    return {"workload": workload, "metric": "msg/s per broker core (extrapolated from broker CPU)",
            "unit": "msg/s", "better": "higher", "values": values}


def _cpu_rows(workload, results, per_entry: bool = False) -> list[dict]:
    """The server's CPU per message (and per entry, for unbatched runs), in µs.

    From the server process's CPU time (``/proc/<pid>/stat``: all its
    threads, user + system) over the whole run divided by the messages of
    the run: far less sensitive to a shared machine's load than throughput.
    For NATS every message is stored on its own (an entry, in Magnetar's
    words)."""
    def value(r, key):
        return ((r or {}).get("broker") or {}).get(key)

    rows = [{"workload": workload, "metric": "server CPU per message", "unit": "µs", "better": "lower",
             "values": {label: value(r, "cpu_us_per_message") for label, r in results.items()}}]
    if per_entry:
        rows.append({"workload": workload, "metric": "server CPU per entry (one message per entry)", "unit": "µs",
                     "better": "lower",
                     "values": {label: value(r, "cpu_us_per_entry") or value(r, "cpu_us_per_message")
                                for label, r in results.items()}})
    return rows


def max_produce(systems, timing, size, log, workdir, raw: bool = False) -> tuple[list, dict]:
    name = f"produce max, {size} B, batched, 1 topic"
    spec = WorkloadSpec(topic=f"w-produce-{size}", size=size, producers=2, producer_workers=2, rate=0,
                        duration=timing.seconds, batching=True, batch_max_messages=1000, batch_delay_ms=1,
                        max_pending=10_000, subscriptions=[], consumers=0)
    results = {}
    for s in systems:
        log(f"{name}: {s.label}")
        results[s.label] = _measure(s, spec, log, consume=False, workdir=workdir)
    rows = [
        _row(name, "throughput", "msg/s", "higher", results, "produce", "msg_per_s"),
        _row(name, "throughput", "MB/s", "higher", results, "produce", "mb_per_s"),
        _broker_row(name, results),
        *_cpu_rows(name, results),
        _row(name, "publish latency p99 (at max rate: queueing)", "ms", "lower", results, "produce",
             "latency_ms", "p99"),
    ]
    if raw:
        rows += _raw_rows(name, systems, spec, log, workdir, results)
    return rows, results


def _raw_rows(name, systems, spec, log, workdir, details: dict) -> list:
    """The same workload with the raw generator, for each Magnetar system:
    rows keyed by the system's own label (its column), results added to
    ``details`` under ``"<label> (raw generator)"``."""
    raw: dict = {}
    for s in systems:
        if s.kind != "magnetar":
            continue
        label = s.label + RAW_SUFFIX
        log(f"{name}: {label}")
        raw[s.label] = details[label] = _measure(replace(s, label=label, driver_override=RAW), spec, log,
                                                 consume=False, workdir=workdir)
    per_core = _broker_row(name, raw)
    per_core["metric"] = "msg/s per broker core, raw generator (extrapolated from broker CPU)"
    return [
        _row(name, "throughput, raw generator", "msg/s", "higher", raw, "produce", "msg_per_s"),
        _row(name, "throughput, raw generator", "MB/s", "higher", raw, "produce", "mb_per_s"),
        per_core,
        *[{**r, "metric": r["metric"] + ", raw generator"} for r in _cpu_rows(name, raw)],
        _row(name, "publish latency p99, raw generator (at max rate: queueing)", "ms", "lower", raw, "produce",
             "latency_ms", "p99"),
    ]


def unbatched_produce(systems, timing, log, workdir) -> tuple[list, dict]:
    """Max rate with one message per entry: every SEND (every JetStream
    publish) is stored and acknowledged on its own.

    Magnetar runs it with the raw generator (``--driver raw --no-batching``:
    one message per SEND, up to ``max_pending`` in flight, no per-message
    client cost to hide the broker's) and, in extra rows, with the official
    client (batching off). NATS: its usual publisher (one publish per
    message, up to ``max_pending`` acks outstanding)."""
    name = "produce max, 100 B, unbatched (one message per entry)"
    spec = WorkloadSpec(topic="w-unbatched", size=100, producers=2, producer_workers=2, rate=0,
                        duration=timing.seconds, batching=False, max_pending=10_000, subscriptions=[], consumers=0)
    results, official = {}, {}
    for s in systems:
        system = replace(s, driver_override=RAW) if s.kind == "magnetar" else s
        log(f"{name}: {s.label}" + (" (raw generator)" if s.kind == "magnetar" else ""))
        results[s.label] = _measure(system, spec, log, consume=False, workdir=workdir)
    for s in systems:
        if s.kind == "magnetar":
            log(f"{name}: {s.label} (official client)")
            official[s.label] = _measure(s, spec, log, consume=False, workdir=workdir)
    rows = [
        _row(name, "acknowledged entries/s (Magnetar: raw generator)", "msg/s", "higher", results, "produce",
             "msg_per_s"),
        *_cpu_rows(name, results, per_entry=True),
        _row(name, "publish latency p50 (at max rate: queueing)", "ms", "lower", results, "produce",
             "latency_ms", "p50"),
        _row(name, "publish latency p99 (at max rate: queueing)", "ms", "lower", results, "produce",
             "latency_ms", "p99"),
        _row(name, "acknowledged entries/s, official client", "msg/s", "higher", official, "produce", "msg_per_s"),
        *[{**r, "metric": r["metric"] + ", official client"} for r in _cpu_rows(name, official, per_entry=True)],
    ]
    details = {**results, **{label + " (official client)": r for label, r in official.items()}}
    return rows, details


def round_trip(systems, timing, log, workdir) -> tuple[list, dict]:
    """One producer, one message at a time: each send waits for its receipt
    (``max_pending=1``), as a synchronous ``send()`` does. Magnetar: the
    official client; NATS: its publisher with one ack outstanding."""
    name = "sync send round trip: 1 producer, 1 message in flight, 100 B"
    spec = WorkloadSpec(topic="w-roundtrip", size=100, producers=1, producer_workers=1, rate=0,
                        duration=timing.seconds, batching=False, max_pending=1, sample_every=1,
                        subscriptions=[], consumers=0)
    results = {}
    for s in systems:
        log(f"{name}: {s.label}")
        results[s.label] = _measure(s, spec, log, consume=False, workdir=workdir)
    rows = [_row(name, f"send round trip {p}", "ms", "lower", results, "produce", "latency_ms", p)
            for p in ("p50", "p99", "p99.9")]
    rows.append(_row(name, "sends/s", "msg/s", "higher", results, "produce", "msg_per_s"))
    rows += _cpu_rows(name, results, per_entry=True)
    return rows, results


def e2e_latency(systems, timing, rate, log, workdir) -> tuple[list, dict]:
    name = f"end-to-end at {rate:,} msg/s, 100 B"
    spec = WorkloadSpec(topic=f"w-e2e-{rate}", size=100, producers=1, consumers=1, rate=rate,
                        duration=timing.seconds, batching=True, batch_max_messages=1000, batch_delay_ms=1,
                        max_pending=10_000, subscriptions=["e2e"], receive_mode="single")
    results = {}
    for s in systems:
        log(f"{name}: {s.label}")
        results[s.label] = _measure(s, spec, log, workdir=workdir)
    rows = [_row(name, f"e2e latency {p}", "ms", "lower", results, "consume", "latency_ms", p)
            for p in ("p50", "p99", "p99.9")]
    rows.append(_row(name, "publish latency p99", "ms", "lower", results, "produce", "latency_ms", "p99"))
    rows.append(_row(name, "achieved rate", "msg/s", "higher", results, "consume", "msg_per_s"))
    rows += _cpu_rows(name, results)
    return rows, results


def fan_out(systems, timing, rate, log, workdir) -> tuple[list, dict]:
    name = f"fan-out: 1 producer at {rate:,} msg/s, 4 subscriptions"
    spec = WorkloadSpec(topic="w-fanout", size=100, producers=1, consumers=1, rate=rate,
                        duration=timing.seconds, subscriptions=[f"fan-{i}" for i in range(4)],
                        consumer_workers=2, batching=True, batch_delay_ms=1, receive_mode="batch")
    results = {}
    for s in systems:
        log(f"{name}: {s.label}")
        results[s.label] = _measure(s, spec, log, workdir=workdir)
    rows = [
        _row(name, "deliveries (all subscriptions)", "msg/s", "higher", results, "consume", "msg_per_s"),
        _row(name, "e2e latency p50", "ms", "lower", results, "consume", "latency_ms", "p50"),
        _row(name, "e2e latency p99", "ms", "lower", results, "consume", "latency_ms", "p99"),
        *_cpu_rows(name, results),
    ]
    return rows, results


def catch_up(systems, timing, log, workdir) -> tuple[list, dict]:
    n = timing.backlog
    name = f"catch-up read of a {n:,}-message backlog, 100 B"
    fill = WorkloadSpec(topic="w-backlog", size=100, producers=2, producer_workers=2, rate=0, duration=0,
                        messages=n, batching=True, batch_delay_ms=1, max_pending=10_000, subscriptions=[],
                        consumers=0)
    read = replace(fill, subscriptions=["catch-up"], consumers=1, producers=0, messages=n, duration=0,
                   initial_position="earliest", receive_mode="batch", receiver_queue=5000)
    results = {}
    for s in systems:
        log(f"{name}: {s.label}")
        filled = {}

        def prepare(system, server, spec, filled=filled):
            # Fill first (not timed here), then the measured run only reads.
            filled.update(run(replace(fill, service_url=server.url), produce=True, consume=False,
                              driver=system.driver, command="fill"))
        results[s.label] = _measure(s, read, log, produce=False, prepare=prepare, workdir=workdir)
        results[s.label]["fill"] = filled.get("produce")
    rows = [
        _row(name, "read throughput", "msg/s", "higher", results, "consume", "msg_per_s"),
        _row(name, "read throughput", "MB/s", "higher", results, "consume", "mb_per_s"),
        *[{**r, "metric": r["metric"] + " read (dispatch)"} for r in _cpu_rows(name, results)],
    ]
    return rows, results


# ---------------------------------------------------------------- cold start

def _cold_magnetar(system: System, workdir: Path, idle: float) -> tuple[float, int | None]:
    import pulsar

    port = free_port()
    cmd = MagnetarServer.command(workdir / "data", port, system.sync_policy or "always")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(workdir / "broker.log", "ab"))
    try:
        wait_port(port, 30, proc)
        client = pulsar.Client(f"pulsar://127.0.0.1:{port}", logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        client.create_producer("cold-start").send(b"first")
        elapsed = time.monotonic() - t0
        client.close()
        time.sleep(idle)
        return elapsed, procstat.rss_bytes(proc.pid)
    finally:
        proc.terminate()
        proc.wait(20)


def _cold_nats(system: System, workdir: Path, idle: float) -> tuple[float, int | None]:
    async def go() -> tuple[float, int | None]:
        import nats
        from nats.js.api import StorageType, StreamConfig

        server = NatsServer(system.nats_binary, workdir)
        server.write_config()
        t0 = time.monotonic()
        server.spawn()
        try:
            # Poll the port as for Magnetar: nats.connect() retries on its own clock.
            wait_port(server.port, 30, server.proc)

            async def quiet(_exc) -> None:
                pass

            nc = await nats.connect(server.url, allow_reconnect=False, error_cb=quiet)
            js = nc.jetstream()
            # JetStream has no auto-created streams: creating one is part of the path to a first ack.
            await js.add_stream(StreamConfig(name="COLD", subjects=["cold-start"], storage=StorageType.FILE))
            await js.publish("cold-start", b"first")
            elapsed = time.monotonic() - t0
            await nc.close()
            await asyncio.sleep(idle)
            return elapsed, procstat.rss_bytes(server.pid)
        finally:
            server.stop()

    return asyncio.run(go())


def cold_start(systems, timing, log, workdir) -> tuple[list, dict]:
    name = "cold start (empty data dir) and idle RSS"
    results: dict = {}
    for s in systems:
        log(f"{name}: {s.label}")
        times, rss = [], []
        try:
            for i in range(timing.cold_trials):
                d = Path(tempfile.mkdtemp(prefix=f"cold-{s.label}-{i}-", dir=workdir))
                t, r = (_cold_magnetar if s.kind == "magnetar" else _cold_nats)(s, d, idle=2.0)
                times.append(t)
                if r is not None:
                    rss.append(r)
            results[s.label] = {"trials_s": [round(t, 3) for t in times],
                                "cold_start_s": round(statistics.median(times), 3),
                                "idle_rss_mb": round(statistics.median(rss) / 1e6, 1) if rss else None}
        except Exception as exc:
            log(f"[red]{s.label}: cold start failed: {exc}[/red]")
            results[s.label] = {"error": f"{type(exc).__name__}: {exc}"}
    rows = [
        {"workload": name, "metric": "process start to first receipt (median)", "unit": "s", "better": "lower",
         "values": {k: v.get("cold_start_s") for k, v in results.items()}},
        {"workload": name, "metric": "idle RSS after first message", "unit": "MB", "better": "lower",
         "values": {k: v.get("idle_rss_mb") for k, v in results.items()}},
    ]
    return rows, results
