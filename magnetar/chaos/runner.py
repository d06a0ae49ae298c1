"""One chaos run: a broker, the workloads, a nemesis, the final reads, the verdict.

The nemesis draws from ``seed``: every 2-5 s one fault among those asked
for (``kill``: SIGKILL then restart after 0.5-2 s; ``pause``: SIGSTOP for
1-6 s then SIGCONT; ``restart``: SIGTERM then start). When the time is up
the broker is healed (resumed, running), the workloads stop, every topic is
read from the start, and :func:`.checker.check` judges the history.

Outputs in ``out_dir``: ``history.jsonl``, ``report.json``, ``broker.log``.
"""
from __future__ import annotations

import json
import random
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .broker import StandaloneBroker
from .checker import Report, check
from .history import History
from .workloads import (ConditionalWriter, DedupProducer, ExclusiveWriter, IdempotentProducer, Workload,
                        read_log)

FAULTS = ("kill", "pause", "restart")
TOPOLOGIES = ("standalone",)
NAMESPACE = "public/default"


@dataclass
class Progress:
    elapsed: float
    operations: int
    acknowledged: int
    faults: int


def _enable_deduplication(admin_url: str) -> None:
    req = urllib.request.Request(f"{admin_url}/admin/v2/namespaces/{NAMESPACE}/deduplication", data=b"true",
                                 method="POST", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).read()


def _workloads(url: str, history: History, seed: int) -> list[Workload]:
    base = f"persistent://{NAMESPACE}/chaos-{seed}"
    return [
        DedupProducer("dedup", url, f"{base}-dedup", history, seed),
        IdempotentProducer("idempotent", url, f"{base}-idempotent", history, seed + 1),
        ExclusiveWriter("writer-a", url, f"{base}-exclusive", history, seed + 2),
        ExclusiveWriter("writer-b", url, f"{base}-exclusive", history, seed + 3),
        ConditionalWriter("conditional", url, f"{base}-conditional", history, seed + 4),
    ]


def _inject(broker: StandaloneBroker, kind: str, rng: random.Random, history: History) -> None:
    history.add("nemesis", "info", "fault", value=kind)
    if kind == "kill":
        broker.kill()
        time.sleep(rng.uniform(0.5, 2.0))  # down for a while: clients retry against nothing
        broker.start()
    elif kind == "pause":
        broker.pause()
        time.sleep(rng.uniform(1.0, 6.0))  # frozen: clients time out and resend
        broker.resume()
    elif kind == "restart":
        broker.stop()
        broker.start()
    history.add("nemesis", "info", "heal", value=kind)


def run(out_dir: Path, duration: float, faults: list[str], seed: int, topology: str = "standalone",
        on_progress: Callable[[Progress], None] | None = None) -> Report:
    """Run, judge, and write the outputs. Raises ValueError for an unknown
    fault or topology; BrokerDidNotStart if the broker will not start."""
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}; choose from {', '.join(FAULTS)}")
    if topology not in TOPOLOGIES:
        raise ValueError(f"topology {topology!r} is not available yet; choose from {', '.join(TOPOLOGIES)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    broker = StandaloneBroker(out_dir / "data")
    history = History(out_dir / "history.jsonl")
    broker.start()
    workloads: list[Workload] = []
    try:
        _enable_deduplication(broker.admin_url)
        workloads = _workloads(broker.service_url, history, seed)
        for w in workloads:
            w.start()
        start = time.monotonic()
        injected = 0
        next_fault = start + rng.uniform(2.0, 5.0)
        while time.monotonic() - start < duration:
            if faults and time.monotonic() >= next_fault:
                _inject(broker, rng.choice(faults), rng, history)
                injected += 1
                next_fault = time.monotonic() + rng.uniform(2.0, 5.0)
            if on_progress is not None:
                on_progress(Progress(time.monotonic() - start, sum(w.seq for w in workloads),
                                     sum(w.acks for w in workloads), injected))
            time.sleep(min(1.0, max(0.05, next_fault - time.monotonic())))  # the run's clock
        for w in workloads:
            w.stop()
        for w in workloads:
            w.join(SEND_GRACE_S)
        for topic in sorted({w.topic for w in workloads}):
            history.add("final", "invoke", "read", topic=topic)
            history.add("final", "ok", "read", topic=topic, log=read_log(broker.service_url, topic))
    finally:
        for w in workloads:
            w.stop()
        broker.stop()
        history.close()
    report = check(history.ops)
    failed = {w.process: repr(w.error) for w in workloads if w.error is not None}
    doc = {"seed": seed, "topology": topology, "duration": duration, "faults_asked": faults,
           "workload_errors": failed, **report.as_dict()}
    (out_dir / "report.json").write_text(json.dumps(doc, indent=2))
    if failed:
        raise RuntimeError(f"workloads died: {failed} (history in {out_dir})")
    return report


#: How long stopping workloads may take to finish their last send.
SEND_GRACE_S = 30.0
