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
session come every few seconds, not every 15), and 2,000 entries per
ledger (rollovers happen under faults, as in every topology of the tool).

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
import shutil
import time
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


class HostsTopologyUnavailable(ValueError):
    """The hosts topology cannot run here (not root, no ``ip``)."""


def hosts_tag(seed: int) -> str:
    """``hc`` and the seed when it fits the bed's 8 characters, else 6 hex digits of its hash."""
    return f"hc{seed}" if 0 <= seed < 10 ** 6 else "hc" + hashlib.sha1(str(seed).encode()).hexdigest()[:6]


class HostsSystem:
    faults = faults_of(HOSTS)
    session_ttl_s = SESSION_TTL_S
    #: A lapsed session is noticed up to a TTL after the heal, then bundles move.
    aftermath_s = SESSION_TTL_S + 2.0

    def __init__(self, out_dir: Path, faults: tuple[str, ...] | list[str] = (), seed: int = 0,
                 storage: str = "object") -> None:
        if storage != "object":
            raise ValueError("the hosts topology keeps its ledgers in its object store (SeaweedFS on hosts of "
                             "its own): leave --storage out")
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

    # -- life -------------------------------------------------------------------------------
    def start(self) -> None:
        """The deployment, every part waited for; then this thread on the client host."""
        self.home = thread_netns.HomeThread(f"home-{self.tag}")
        self._own_namespace = thread_netns.current()
        self.topo = host_topology(self.tag, self.base)
        self.topo.broker_settings = {"cluster_session_ttl_s": f"{SESSION_TTL_S}",
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
            self.home.close()
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
        """``fn(*args)`` on the home thread (the nemesis's commands and checks
        must not go through the client host, which faults cut too)."""
        assert self.home is not None
        return self.home.call(fn, *args)

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
