"""The ``hosts`` topology of a chaos run: the deployment of docs/deploy.md on
a test bed of hosts (:mod:`magnetar_harness.host_topology`: 3 brokers on
object storage, a 3-member etcd, SeaweedFS split into a master, 3 volume
servers, a filer and an S3 gateway, a client host; no Spark), each part
run with deploy/'s unit and config, and the faults only a network between
machines has (:mod:`.host_faults`).

The workloads run on the client host: once the deployment serves,
:meth:`HostsSystem.start` moves the runner's thread into the client host's
network namespace (:mod:`.thread_netns`), so every workload thread, client
and final read made afterwards reaches the brokers by their addresses, as
a program on that host would. The nemesis's commands run on a thread left
in the machine's own namespace (:attr:`HostsSystem.home`), where the bridge
and the hosts' links are.

Two settings of deploy/broker.toml are changed for a run (and only these):
the session TTL, :data:`SESSION_TTL_S` instead of 10 s (faults that lapse a
session come every few seconds, not every 15; a soak may ask for shorter,
``session_ttl_s``, and every fault's hold shrinks with it), and 2,000
entries per ledger (rollovers happen under faults, as in every topology of
the tool).

Several nemeses (``nemeses``, the runner's lanes) may fault at once, each
on targets of its own: a fault claims the hosts it touches (and
``session`` when it lapses a broker's session) with :meth:`HostsSystem.claim`,
waiting until no other fault holds any of them, so two faults never cut
the same link, never take two etcd members (every etcd fault claims the
three), two volume servers (each volume loss claims the master, which
repairs it) or two brokers' sessions at once: together they stay within
what the deployment promises to survive. Each nemesis has a home thread of
its own.

Names: the bed's tag is ``hc<seed>`` (namespaces ``mg-hc<seed>-*``, bridge
``mghc<seed>br``), its files under ``/tmp/mg-hc<seed>``; the parts' logs are
copied into the run's ``out_dir/hosts-logs`` when it stops, and the rest is
deleted. A bed of the same tag still at work is refused (another run of the
seed).

Failure modes: :class:`HostsTopologyUnavailable` (a ValueError: the run is refused
up front) when not root or ``ip`` is missing; TopologyError (a
RuntimeError) when a part does not start.
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import threading
import time
from contextlib import contextmanager
import urllib.request
from pathlib import Path

from magnetar_harness.host_topology import (BROKERS, CLIENT, ETCD_CLIENT_PORT, ETCDS, Topology, default_base,
                                            host_topology)
from magnetar_harness.hosts import unavailable_reason

from . import thread_netns
from .faults import HOSTS, faults_of
from .systems import LEDGER_ENTRIES

#: The brokers' etcd session in a run (deploy/broker.toml says 10 s).
SESSION_TTL_S = 4.0
#: How long a part started or restarted may take to serve.
START_TIMEOUT_S = 240.0


class ClaimBusy(RuntimeError):
    """A fault's claim refused: another fault holds one of its hosts."""


class ClaimsCancelled(RuntimeError):
    """A fault's claim refused: the run is ending (:meth:`HostsSystem.cancel_claims`)."""


class HostsTopologyUnavailable(ValueError):
    """The hosts topology cannot run here (not root, no ``ip``)."""


def hosts_tag(seed: int) -> str:
    """``hc`` and the seed when it fits the bed's 8 characters, else 6 hex digits of its hash."""
    return f"hc{seed}" if 0 <= seed < 10 ** 6 else "hc" + hashlib.sha1(str(seed).encode()).hexdigest()[:6]


class HostsSystem:
    faults = faults_of(HOSTS)

    def __init__(self, out_dir: Path, faults: tuple[str, ...] | list[str] = (), seed: int = 0,
                 storage: str = "object", nemeses: int = 1, session_ttl_s: float = SESSION_TTL_S) -> None:
        if storage != "object":
            raise ValueError("the hosts topology keeps its ledgers in its object store (SeaweedFS on hosts of "
                             "its own): leave --storage out")
        if not 1 <= nemeses <= 8:
            raise ValueError(f"--nemeses {nemeses}: 1 to 8 (each fault claims the hosts it touches; more than "
                             f"the deployment has parts would only wait)")
        if not 1.0 <= session_ttl_s <= 60.0:
            raise ValueError(f"--session-ttl {session_ttl_s:g}: 1 to 60 s")
        self.nemeses = nemeses
        self.session_ttl_s = session_ttl_s
        #: Every hold is drawn for a 4 s session and scaled by this.
        self.hold_scale = session_ttl_s / SESSION_TTL_S
        #: A lapsed session is noticed up to a TTL after the heal, then bundles move.
        self.aftermath_s = session_ttl_s + 2.0
        self._claimed: set[str] = set()
        self._cancelled = False
        self._claims_changed = threading.Condition()
        self._lane = threading.local()  # on a nemesis's thread: its fault's "began" callback
        self._on_home = threading.local()  # on a home thread: the same, for the fault it runs
        self._homes: queue.Queue = queue.Queue()
        self.storage = storage
        reason = unavailable_reason()
        if reason is not None:
            raise HostsTopologyUnavailable(f"--topology hosts: {reason}")
        self.out_dir = out_dir
        self.seed = seed
        self.tag = hosts_tag(seed)
        self.base = default_base(self.tag)
        self.topo: Topology | None = None
        #: The thread left in the machine's namespace: the nemesis acts from there.
        self.home: thread_netns.HomeThread | None = None
        self._own_namespace: int | None = None
        #: A fault's own state between faults (a replaced volume server's repair, ...).
        self.notes: dict[str, object] = {}

    # -- what the runner reads --------------------------------------------------------------
    @property
    def service_url(self) -> str:
        assert self.topo is not None
        return self.topo.service_url

    @property
    def admin_url(self) -> str:
        assert self.topo is not None
        return self.topo.admin_url(BROKERS[0])

    @property
    def admin_urls(self) -> list[str]:
        assert self.topo is not None
        return [self.topo.admin_url(host) for host in BROKERS]

    # -- life -------------------------------------------------------------------------------
    def start(self) -> None:
        """The deployment, every part waited for; then this thread on the client host."""
        self.home = thread_netns.HomeThread(f"home-{self.tag}")
        self._homes.put(self.home)
        for lane in range(1, self.nemeses):
            self._homes.put(thread_netns.HomeThread(f"home-{self.tag}-{lane}"))
        self._own_namespace = thread_netns.current()
        self.topo = host_topology(self.tag, self.base)
        self.topo.broker_settings = {"cluster_session_ttl_s": f"{self.session_ttl_s:g}",
                                     "storage.max_entries_per_ledger": str(LEDGER_ENTRIES)}
        # A part restarted under a nemesis on a loaded machine (every
        # process of a run niced) may take minutes to serve: slow, not broken.
        self.topo.start_timeout_s = START_TIMEOUT_S
        self.topo.start(spark=False)
        thread_netns.enter(thread_netns.named(self.topo.bed.namespace(CLIENT)))

    def stop(self) -> None:
        """This thread back home, every process stopped, the namespaces deleted,
        the logs kept in ``out_dir/hosts-logs``. Idempotent."""
        if self._own_namespace is not None:
            thread_netns.enter(self._own_namespace)
            os.close(self._own_namespace)
            self._own_namespace = None
        if self.topo is not None:
            self.topo.stop()
            self._keep_logs()
            shutil.rmtree(self.base, ignore_errors=True)
            self.topo = None
        if self.home is not None:
            while not self._homes.empty():
                self._homes.get().close()
            self.home = None

    def _keep_logs(self) -> None:
        if not self.base.exists():
            return
        logs = self.out_dir / "hosts-logs"
        for log in self.base.glob("*/*.log"):
            target = logs / log.parent.name / log.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, target)
        if (self.base / "hosts.json").exists():
            shutil.copy(self.base / "hosts.json", logs / "hosts.json")

    def off_the_client_host(self, fn, *args):
        """``fn(*args)`` on a home thread (the nemesis's commands and checks
        must not go through the client host, which faults cut too); one
        free of the other nemeses' faults."""
        assert self.home is not None
        began = getattr(self._lane, "began", None)
        home = self._homes.get()
        try:
            return home.call(self._for_lane, began, fn, args)
        finally:
            self._homes.put(home)

    def _for_lane(self, began, fn, args):
        self._on_home.began = began
        try:
            return fn(*args)
        finally:
            self._on_home.began = None

    def on_fault_begin(self, began) -> None:
        """On a nemesis's thread: ``began()`` is called when its next fault
        has claimed its targets (the runner writes the fault's history line
        then, not while it waits for another nemesis's fault to heal)."""
        self._lane.began = began

    @contextmanager
    def claim(self, names):
        """Hold ``names`` (hosts, or ``session``) for a fault, all at once,
        and call the fault's ``began`` callback if its nemesis gave one.
        ClaimBusy, before the fault does anything, if another fault holds
        any of them (its nemesis draws again: an idle nemesis waiting for a
        volume server's minute-long repair would be no nemesis)."""
        wanted = set(names)
        with self._claims_changed:
            if self._cancelled:
                raise ClaimsCancelled("the run is ending: no fault begins")
            if wanted & self._claimed:
                raise ClaimBusy(f"{', '.join(sorted(wanted & self._claimed))} held by another fault")
            self._claimed |= wanted
        try:
            began, self._on_home.began = getattr(self._on_home, "began", None), None
            if began is not None:  # once per fault, at its first claim
                began()
            yield
        finally:
            with self._claims_changed:
                self._claimed -= wanted
                self._claims_changed.notify_all()

    def cancel_claims(self) -> None:
        """Every later claim raises ClaimsCancelled (the run ends: its
        faults under way heal, no other begins)."""
        with self._claims_changed:
            self._cancelled = True
            self._claims_changed.notify_all()

    def claimed(self, name: str) -> bool:
        """Whether a fault holds ``name`` just now."""
        with self._claims_changed:
            return name in self._claimed

    # -- what faults ask of the deployment ---------------------------------------------------
    def etcd_leader(self, among=ETCDS) -> str | None:
        """The etcd host whose member says it leads (among those that answer), or None."""
        assert self.topo is not None
        for host in among:
            try:
                request = urllib.request.Request(
                    f"http://{self.topo.address(host)}:{ETCD_CLIENT_PORT}/v3/maintenance/status",
                    data=b"{}", method="POST", headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=2) as r:
                    status = json.load(r)
            except (OSError, ValueError):
                continue
            if status.get("leader") and status.get("leader") == status.get("header", {}).get("member_id"):
                return host
        return None

    def wait(self, condition, timeout: float, what: str) -> float:
        """Seconds until ``condition()`` held; RuntimeError naming ``what`` past ``timeout``
        (a deployment that does not come back is a failed run, said in one line)."""
        start = time.monotonic()
        while not condition():
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"{what} did not happen within {timeout:g} s (bed {self.tag}, logs in "
                                   f"{self.out_dir / 'hosts-logs'})")
            time.sleep(0.2)
        return time.monotonic() - start
