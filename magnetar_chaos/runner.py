"""One chaos run: a system (:mod:`.systems`), the workloads, a nemesis, the
final reads, the verdict.

The nemesis draws from ``seed``: every 2-5 s (``interval``) one fault among
those asked for, done and healed before the next. When the time is up the workloads
stop, every topic is read from the start, and :func:`.checker.check` judges
the history.

Outputs in ``out_dir``: ``history.jsonl``, ``report.json``, ``latency.svg``
(:mod:`.plot`), the brokers' logs.
"""
from __future__ import annotations

import inspect
import json
import random
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .faults import inject as inject_fault
from .checker import Report, check
from .history import History
from .plot import write_svg
from .hosts_system import ClaimBusy, ClaimsCancelled, HostsSystem
from .regions import RegionsSystem
from .systems import SYSTEMS as _SYSTEMS
from .consumers import SubscriptionConsumer, TopicReader, Receiver
from .workloads import (ConditionalWriter, DedupProducer, ExclusiveWriter, IdempotentProducer, OffsetProbe, Workload,
                        read_log)

NAMESPACE = "public/default"
#: Every topology: those of :mod:`.systems`, and ``regions`` and ``hosts``,
#: registered here because :mod:`.regions` and :mod:`.hosts_system` build on
#: :mod:`.systems` (an import back from there would be a circle).
SYSTEMS = {**_SYSTEMS, "regions": RegionsSystem, "hosts": HostsSystem}


@dataclass
class Progress:
    elapsed: float
    operations: int
    acknowledged: int
    faults: int


def _prepare_namespace(admin_url: str) -> None:
    """Deduplication on (the dedup producer relies on it), and infinite
    retention: what consumers acknowledge stays for the final reads."""
    for path, body in (("deduplication", b"true"),
                       ("retention", b'{"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}')):
        req = urllib.request.Request(f"{admin_url}/admin/v2/namespaces/{NAMESPACE}/{path}", data=body,
                                     method="POST", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()


def _workloads(url: str, history: History, seed: int) -> list[Workload]:
    base = f"persistent://{NAMESPACE}/chaos-{seed}"
    return [
        DedupProducer("dedup", url, f"{base}-dedup", history, seed),
        IdempotentProducer("idempotent", url, f"{base}-idempotent", history, seed + 1),
        ExclusiveWriter("writer-a", url, f"{base}-exclusive", history, seed + 2),
        ExclusiveWriter("writer-b", url, f"{base}-exclusive", history, seed + 3),
        ExclusiveWriter("leader-a", url, f"{base}-leader", history, seed + 9, access_mode="WaitForExclusive"),
        ExclusiveWriter("leader-b", url, f"{base}-leader", history, seed + 10, access_mode="WaitForExclusive"),
        ConditionalWriter("conditional", url, f"{base}-conditional", history, seed + 4),
        SubscriptionConsumer("consumer", url, f"{base}-dedup", history, seed + 5, consumer_type="Shared"),
        SubscriptionConsumer("failover", url, f"{base}-dedup", history, seed + 6, consumer_type="Failover"),
        SubscriptionConsumer("key-shared", url, f"{base}-idempotent", history, seed + 7, consumer_type="KeyShared"),
        TopicReader("reader", url, f"{base}-conditional", history, seed + 8),
        OffsetProbe("offsets", url, [f"{base}-{name}" for name in ("dedup", "idempotent", "exclusive", "leader",
                                                                   "conditional")], history, seed + 14),
    ]


def _inject(system, kind: str, rng: random.Random, history: History) -> None:
    history.add("nemesis", "info", "fault", value=kind)
    done = inject_fault(system, kind, rng)
    history.add("nemesis", "info", "heal", value=done, aftermath=getattr(system, "aftermath_s", 0.0))


class _Nemeses:
    """Several nemeses at once (a system with ``on_fault_begin`` and claims:
    the hosts topology), each a thread drawing from its own generator
    (``seed`` and its number) a fault every ``interval`` after its last
    heal (or after a draw whose hosts another fault held: ClaimBusy, no
    fault); its history lines are its own process's (``nemesis-<n>``), the
    fault's written once the fault has claimed its hosts. The first fault
    that fails stops them all (those under way heal, no other begins);
    :meth:`join` raises it."""

    def __init__(self, system, count: int, faults: list[str], seed: int, interval: tuple[float, float],
                 history: History) -> None:
        self.system, self.faults, self.interval, self.history = system, faults, interval, history
        self.injected = 0
        self.busy = 0  # draws whose hosts another fault held
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(n, random.Random(f"{seed}-nemesis-{n}")),
                                          name=f"nemesis-{n}", daemon=True) for n in range(count)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _run(self, n: int, rng: random.Random) -> None:
        process = f"nemesis-{n}"
        try:
            while not self._stop.wait(rng.uniform(*self.interval)):
                kind = rng.choice(self.faults)
                self.system.on_fault_begin(lambda: self.history.add(process, "info", "fault", value=kind))
                try:
                    done = inject_fault(self.system, kind, rng)
                except ClaimBusy:  # its hosts are another fault's: draw again
                    with self._lock:
                        self.busy += 1
                    continue
                self.history.add(process, "info", "heal", value=done,
                                 aftermath=getattr(self.system, "aftermath_s", 0.0))
                with self._lock:
                    self.injected += 1
        except BaseException as exc:  # handed to join(): the run fails in one line
            if self._stop.is_set() and isinstance(exc, ClaimsCancelled):
                return  # the run ends: this nemesis's next fault never began
            with self._lock:
                self.error = self.error or exc
            self._stop.set()
            self.system.cancel_claims()  # the others' next faults do not begin either

    @property
    def failed(self) -> bool:
        return self.error is not None

    def join(self) -> None:
        """Stop drawing; wait for every fault under way to heal; raise the first failure."""
        self._stop.set()
        self.system.cancel_claims()
        for t in self._threads:
            t.join()
        if self.error is not None:
            raise self.error


def run(out_dir: Path, duration: float, faults: list[str], seed: int, topology: str = "standalone",
        on_progress: Callable[[Progress], None] | None = None,
        interval: tuple[float, float] = (2.0, 5.0), sync_policy: str = "always", storage: str = "file",
        nemeses: int = 1, session_ttl_s: float | None = None) -> Report:
    """Run, judge, and write the outputs. Every broker of the run stores
    with ``sync_policy`` (``always`` or ``interval``: see
    :data:`.systems.SYNC_POLICIES`) on ``storage`` (``file``, or ``object``:
    the cluster topology only), both recorded in ``report.json``.
    ``nemeses`` > 1 (the hosts topology): that many faults at once on
    disjoint targets (:class:`_Nemeses`); ``session_ttl_s`` (the hosts
    topology): the brokers' session, every hold scaled with it. Raises
    ValueError for an unknown fault, topology or sync policy, or for a fault
    this machine cannot do (PartitionUnavailable); BrokerDidNotStart if the
    broker will not start."""
    if topology not in SYSTEMS:
        raise ValueError(f"topology {topology!r} is not available; choose from {', '.join(SYSTEMS)}")
    unknown = set(faults) - set(SYSTEMS[topology].faults)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)} for {topology}; "
                         f"choose from {', '.join(SYSTEMS[topology].faults)}")
    # Made before anything is written: a fault this machine cannot do (a
    # partition without root) is refused with nothing left behind.
    # Passed only when not the default, so a system that knows no policy
    # (always syncs) still runs the default.
    policy = {"sync_policy": sync_policy} if sync_policy != "always" else {}
    if policy and "sync_policy" not in inspect.signature(SYSTEMS[topology]).parameters:
        raise ValueError(f"the {topology} topology runs its brokers on the always sync policy only; "
                         f"leave --sync-policy out")
    if storage != "file":
        if "storage" not in inspect.signature(SYSTEMS[topology]).parameters:
            raise ValueError(f"the {topology} topology keeps its ledgers in files only; --storage object needs "
                             f"--topology cluster")
        policy["storage"] = storage
    for name, value, default in (("nemeses", nemeses, 1), ("session_ttl_s", session_ttl_s, None)):
        if value != default:
            if name not in inspect.signature(SYSTEMS[topology]).parameters:
                raise ValueError(f"--{name.replace('_s', '').replace('_', '-')} needs --topology hosts")
            policy[name] = value
    system = SYSTEMS[topology](out_dir, faults=faults, seed=seed, **policy)
    storage = getattr(system, "storage", storage)  # a topology on object storage only says so
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    history = History(out_dir / "history.jsonl")
    workloads: list[Workload] = []
    try:
        system.start()
        _prepare_namespace(system.admin_url)
        workloads = _workloads(system.service_url, history, seed)
        if hasattr(system, "extra_workloads"):  # the regions topology's replicated subscription
            workloads += system.extra_workloads(workloads, history, seed)
        if hasattr(system, "topics"):  # the cluster's move and split faults act on their bundles
            system.topics = sorted({w.topic for w in workloads})
        for w in workloads:
            w.start()
        start = time.monotonic()
        injected = 0
        if nemeses > 1 and faults:
            lanes = _Nemeses(system, nemeses, faults, seed, interval, history)
            lanes.start()
            while time.monotonic() - start < duration and not lanes.failed:
                if on_progress is not None:
                    on_progress(Progress(time.monotonic() - start, sum(w.seq for w in workloads),
                                         sum(w.acks for w in workloads), lanes.injected))
                time.sleep(min(10.0, max(0.05, duration - (time.monotonic() - start))))
            lanes.join()
        next_fault = start + rng.uniform(*interval)
        while nemeses == 1 and time.monotonic() - start < duration:
            if faults and time.monotonic() >= next_fault:
                _inject(system, rng.choice(faults), rng, history)
                injected += 1
                next_fault = time.monotonic() + rng.uniform(*interval)
            if on_progress is not None:
                on_progress(Progress(time.monotonic() - start, sum(w.seq for w in workloads),
                                     sum(w.acks for w in workloads), injected))
            time.sleep(min(1.0, max(0.05, next_fault - time.monotonic())))  # the run's clock
        # Writers first: a send still in flight at the end (held up by the
        # last fault) may be acknowledged seconds later, and a reader that
        # began draining at the same time could have called the topic quiet
        # and left before it (seen as a false "missed by consumers").
        writers = [w for w in workloads if not isinstance(w, Receiver)]
        for group in (writers, [w for w in workloads if isinstance(w, Receiver)]):
            for w in group:
                w.stop()
            for w in group:
                # A receiver drains for up to its DRAIN_MAX_S (a consumer in
                # the replica region waits for replication to catch up).
                w.join(max(SEND_GRACE_S, getattr(w, "DRAIN_MAX_S", 0.0) + 5.0))
        if hasattr(system, "settle"):  # the regions topology: what B acknowledged reaches A first
            system.settle(sorted({w.topic for w in workloads}))
        for topic in sorted({w.topic for w in workloads}):
            history.add("final", "invoke", "read", topic=topic)
            try:
                log = read_log(system.service_url, topic)
            except Exception as exc:
                # A topic nobody serves at the end (a bundle left without an
                # owner): a failed run, said in one line, not a traceback.
                raise RuntimeError(f"the final read of {topic} failed: {exc!r}; its bundle may have no owner "
                                   f"(see the nemesis's heal lines in the history and the brokers' logs); "
                                   f"{bundle_views(system)}") from exc
            history.add("final", "ok", "read", topic=topic, log=log)
        if hasattr(system, "read_replicas"):  # the regions topology: each topic's copy in the other region
            system.read_replicas(history, sorted({w.topic for w in workloads}))
    finally:
        for w in workloads:
            w.stop()
        system.stop()
        # After an interruption the workloads are still in their last call:
        # give their clients a moment to close, since an official client
        # still running when the interpreter exits aborts the process.
        deadline = time.monotonic() + CLOSE_GRACE_S
        for w in workloads:
            w.join(max(0.0, deadline - time.monotonic()))
        history.close()
    report = check(history.ops)
    failed = {w.process: repr(w.error) for w in workloads if w.error is not None}
    doc = {"seed": seed, "topology": topology, "sync_policy": sync_policy, "storage": storage, "duration": duration,
           "faults_asked": faults, "nemeses": nemeses, **({"session_ttl_s": session_ttl_s} if session_ttl_s else {}),
           "workload_errors": failed, **report.as_dict()}
    (out_dir / "report.json").write_text(json.dumps(doc, indent=2))
    write_svg(history.ops, out_dir / "latency.svg")
    if failed:
        raise RuntimeError(f"workloads died: {failed} (history in {out_dir})")
    return report


def bundle_views(system, timeout_s: float = 5.0) -> str:
    """Each broker's view of the workloads' namespace's bundles (state and
    owner), in one line, for a failed final read's message: CI keeps only the
    tail of the output, not the brokers' logs. Never raises."""
    urls = getattr(system, "admin_urls", None) or [system.admin_url]
    views = []
    for url in urls:
        try:
            with urllib.request.urlopen(f"{url}/admin/v2/namespaces/{NAMESPACE}/bundles", timeout=timeout_s) as answer:
                doc = json.loads(answer.read())
            states = ", ".join(f"{rng} {state}" + (f" on {doc['owners'].get(rng)}" if state == "Owned" else "")
                               for rng, state in sorted(doc.get("states", {}).items()))
            views.append(f"{url.removeprefix('http://')} sees {states}")
        except Exception as exc:  # a broker that does not answer says as much
            views.append(f"{url.removeprefix('http://')} did not answer ({exc!r})")
    return "bundles as each broker sees them: " + "; ".join(views)


#: How long stopping workloads may take to finish their last send.
SEND_GRACE_S = 30.0
#: How long, in all, an interrupted run waits for its workloads' clients to close.
CLOSE_GRACE_S = 15.0
