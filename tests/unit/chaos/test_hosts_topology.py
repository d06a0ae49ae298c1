"""The hosts topology of a chaos run: its faults come from the registry and
run off the client host, its names carry the seed, and a machine that
cannot make namespaces is refused before anything starts."""
from __future__ import annotations

import os
import random
import threading

import pytest

from magnetar_chaos import faults, host_faults, thread_netns
from magnetar_chaos.hosts_system import HostsSystem, HostsTopologyUnavailable, hosts_tag
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


def test_a_replaced_volume_servers_repair_applies_until_nothing_is_under_replicated(tmp_path, monkeypatch):
    """Without -apply, volume.fix.replication only says what it would do: a
    second volume server lost after such a "repair" lost the volumes only the
    first one's partner held (seed 177 of the bounded run)."""
    import subprocess

    answers = iter([
        "volume 11 replication 001, but under replicated +1\nvolume 12 replication 001, but under replicated +1\n",
        "replicating volume 11 001 from a to b ...\nreplicating volume 12 001 from a to b ...\n",
        "volume 12 replication 001, but under replicated +1\n",  # not registered yet: another pass
        "replicating volume 12 001 from a to b ...\n",
        "Running in simulation mode.\n",
    ])
    asked = []

    class Bed:
        def run(self, host, argv, *, timeout, check, input):
            asked.append(input)
            return subprocess.CompletedProcess(argv, 0, next(answers), "")

    class Topo:
        bed = Bed()

        def address(self, host):
            return "10.0.0.1"

        def root(self, host):
            (tmp_path / host).mkdir(exist_ok=True)
            return tmp_path / host

    class System:
        topo = Topo()

    monkeypatch.setattr(host_faults.time, "sleep", lambda s: None)
    assert host_faults.fix_replication(System()) == "3 volume copies made in 2 passes, none under replicated"
    applied = [a for a in asked if "-apply" in a]
    assert len(applied) == 2 and all(a.startswith("lock\nvolume.fix.replication -apply\nunlock") for a in applied)
    assert "under replicated" in (tmp_path / "weed-master" / "fix-replication.log").read_text()
