"""The systems a chaos run can target, and the faults each one takes.

- ``standalone``: one ``magnetar standalone`` process, its clients
  connected through a proxy (:mod:`.proxy`). Faults: ``kill`` (SIGKILL, down
  0.5-2 s, restart on the same data), ``pause`` (SIGSTOP 1-6 s),
  ``restart`` (SIGTERM, start), ``cut`` (every client connection cut, two to
  five times over 0.5-2 s: frames lost mid-way, clients reconnect),
  ``disk-full`` (the data directory, a 512 MB tmpfs, filled for 1-3 s:
  see :mod:`.disk`; needs root).
- ``cluster``: an etcd and three ``magnetar broker`` processes on shared
  storage (session TTL 3 s). The same faults hit a broker other than the
  first (the clients' service URL), so its bundles move to the others; a
  pause may outlast the session (a zombie owner comes back). Also
  ``kill-etcd`` (SIGKILL, restart on the same data after 1-3 s) and
  ``pause-etcd`` (SIGSTOP 1-4 s).

Each ``inject`` returns once the system is healed (restarted, resumed).
"""
from __future__ import annotations

import random
import time
from pathlib import Path

from .broker import BrokerProcess, cluster_broker, standalone_broker
from .disk import SmallDisk
from .proxy import CutProxy

SESSION_TTL_S = 3.0


def _hit(broker: BrokerProcess, kind: str, rng: random.Random, longest_pause: float) -> None:
    if kind == "kill":
        broker.kill()
        time.sleep(rng.uniform(0.5, 2.0))  # down for a while: clients retry against nothing
        broker.start()
    elif kind == "pause":
        broker.pause()
        time.sleep(rng.uniform(1.0, longest_pause))  # frozen: clients time out and resend
        broker.resume()
    elif kind == "restart":
        broker.stop()
        broker.start()


class StandaloneSystem:
    faults = ("kill", "pause", "restart", "cut", "disk-full")

    def __init__(self, out_dir: Path, faults: tuple[str, ...] | list[str] = ()) -> None:
        self.broker = standalone_broker(out_dir / "data")
        self.proxy: CutProxy | None = None
        #: The data directory on a small tmpfs, for the disk-full fault only.
        self.disk = SmallDisk(out_dir / "data") if "disk-full" in faults else None

    @property
    def service_url(self) -> str:
        """Where the clients connect: through the proxy once started."""
        return self.proxy.url if self.proxy is not None else self.broker.service_url

    @property
    def admin_url(self) -> str:
        return self.broker.admin_url

    def start(self) -> None:
        if self.disk is not None:
            self.disk.mount()
        self.broker.start()
        self.proxy = CutProxy(self.broker.port)

    def inject(self, kind: str, rng: random.Random) -> str:
        if kind == "cut":
            assert self.proxy is not None
            cut = 0
            for _ in range(rng.randint(2, 5)):
                cut += self.proxy.cut()
                time.sleep(rng.uniform(0.1, 0.4))
            return f"cut {cut} connections"
        if kind == "disk-full":
            assert self.disk is not None
            taken = self.disk.fill()
            time.sleep(rng.uniform(1.0, 3.0))  # writes fail with ENOSPC meanwhile
            self.disk.free()
            return f"disk-full ({taken >> 20} MB taken)"
        _hit(self.broker, kind, rng, longest_pause=6.0)
        return kind

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        self.broker.stop()
        if self.disk is not None:
            self.disk.free()
            self.disk.unmount()


class ClusterSystem:
    faults = ("kill", "pause", "restart", "kill-etcd", "pause-etcd")
    #: How long a fault's effects go on after its heal: a lapsed session is
    #: noticed up to a TTL later, then its bundles move (the checker widens
    #: the fault's window by this much).
    aftermath_s = SESSION_TTL_S + 2.0

    def __init__(self, out_dir: Path, faults: tuple[str, ...] | list[str] = (), brokers: int = 3) -> None:
        from magnetar.metadata.etcd_server import EtcdServer

        self.base = out_dir / "cluster"
        self.etcd = EtcdServer(self.base / "etcd")
        self.count = brokers
        self.brokers: list[BrokerProcess] = []

    @property
    def service_url(self) -> str:
        return self.brokers[0].service_url

    @property
    def admin_url(self) -> str:
        return self.brokers[0].admin_url

    def start(self) -> None:
        self.etcd.start()
        store_url = self.etcd.store_url("chaos")
        self.brokers = [cluster_broker(self.base, k, store_url, SESSION_TTL_S) for k in range(self.count)]
        for broker in self.brokers:
            broker.start()

    def inject(self, kind: str, rng: random.Random) -> str:
        if kind == "kill-etcd":
            self.etcd.kill()
            time.sleep(rng.uniform(1.0, 3.0))
            self.etcd.start()
            return kind
        if kind == "pause-etcd":
            self.etcd.pause()
            time.sleep(rng.uniform(1.0, 4.0))
            self.etcd.resume()
            return kind
        victim = rng.randrange(1, self.count)  # broker 0 is the clients' way in
        _hit(self.brokers[victim], kind, rng, longest_pause=2 * SESSION_TTL_S + 2)
        return f"{kind} broker-{victim}"

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()
        if self.etcd.running:
            self.etcd.stop()


SYSTEMS = {"standalone": StandaloneSystem, "cluster": ClusterSystem}
