"""The partition fault's pure logic: names, the subnet drawn from the seed,
the address plan, which neighbour entries each mode sets, the fault's draw."""
from __future__ import annotations

import ipaddress
import random

import pytest

from magnetar_chaos.netns import MODES, Names, Plan, choose_subnet, cuts, run_tag, used_networks
from magnetar_chaos.systems import ClusterSystem, draw_partition

ADDR = """\
1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\\       valid_lft forever
7: docker0    inet 10.71.99.1/24 scope global docker0
"""
ROUTE = """\
default via 192.0.2.1 dev eth0
10.40.0.0/16 via 192.0.2.1 dev eth0
10.9.9.9 dev eth0 scope link
blackhole 10.200.0.0/16
"""


def test_names_fit_linux_interface_names_and_match_only_their_own_tag():
    for seed in (0, 1, 12345678, 10 ** 8, -3, 2 ** 63):
        names = Names(run_tag(seed))
        assert len(names.bridge) <= 15 and len(names.host_veth(9)) <= 15
        assert names.is_link(names.bridge) and names.is_link(names.host_veth(2))
        assert names.is_namespace(names.namespace(2))
    names = Names(run_tag(1))
    assert names.namespace(0) == "mgc-1-b0" and names.host_veth(2) == "mgc1b2" and names.bridge == "mgc1br"
    # Seed 12's leftovers, the host's own links and namespaces: never ours.
    for other in ("mgc12br", "mgc12b0", "mgc1b0x", "eth0", "mgc1", "docker0"):
        assert not names.is_link(other)
    for other in ("mgc-12-b0", "mgc-1-b", "mgc-1-b0-x", "netns1"):
        assert not names.is_namespace(other)


def test_used_networks_reads_addresses_and_routes():
    nets = {str(n) for n in used_networks(ADDR, ROUTE)}
    assert {"127.0.0.0/8", "192.0.2.0/24", "10.71.99.0/24", "10.40.0.0/16", "10.9.9.9/32",
            "10.200.0.0/16"} <= nets
    assert "0.0.0.0/0" not in nets  # the default route does not forbid every subnet


def test_the_subnet_is_drawn_from_the_seed_and_avoids_what_is_used():
    first = choose_subnet(1, [])
    assert first == choose_subnet(1, []) and first.prefixlen == 24
    assert first.subnet_of(ipaddress.ip_network("10.0.0.0/8"))
    assert {choose_subnet(s, []) for s in range(20)}.__len__() > 15  # seeds spread out
    moved = choose_subnet(1, [first])
    assert moved != first and not moved.overlaps(first)
    assert not choose_subnet(1, used_networks(ADDR, ROUTE)).overlaps(ipaddress.ip_network("10.40.0.0/16"))


def test_no_free_subnet_is_an_error_not_a_clash():
    from magnetar_chaos.netns import NetworkError

    with pytest.raises(NetworkError):
        choose_subnet(1, [ipaddress.ip_network("10.0.0.0/8")], tries=50)


def test_the_plan_gives_clients_etcd_and_each_broker_its_own_address():
    plan = Plan(ipaddress.ip_network("10.1.2.0/24"))
    assert (plan.gateway, plan.etcd, plan.broker(0), plan.broker(2)) == \
        ("10.1.2.1", "10.1.2.2", "10.1.2.10", "10.1.2.12")
    with pytest.raises(ValueError):
        plan.broker(-1)


def test_etcd_mode_cuts_only_the_victim_from_etcd():
    plan = Plan(ipaddress.ip_network("10.1.2.0/24"))
    assert cuts("etcd", 1, 3, plan) == [(1, "10.1.2.2")]


def test_zombie_mode_cuts_the_victim_from_etcd_and_every_broker_both_ways_but_not_from_clients():
    plan = Plan(ipaddress.ip_network("10.1.2.0/24"))
    entries = set(cuts("zombie", 2, 3, plan))
    assert entries == {(2, "10.1.2.2"), (2, "10.1.2.10"), (2, "10.1.2.11"), (0, "10.1.2.12"), (1, "10.1.2.12")}
    assert all(address != plan.gateway for _, address in entries)
    with pytest.raises(ValueError):
        cuts("isolate", 2, 3, plan)  # a link goes down instead


def test_partitions_hit_every_broker_outlast_the_session_and_repeat_with_the_seed():
    draws = [draw_partition(random.Random(7), 3, 3.0) for _ in range(2)]
    assert draws[0] == draws[1]
    rng = random.Random(1)
    many = [draw_partition(rng, 3, 3.0) for _ in range(300)]
    # Broker 0 too, isolated or not: the clients' service URL names every broker.
    assert {p.victim for p in many if p.mode == "isolate"} == {0, 1, 2}
    assert {p.victim for p in many if p.mode != "isolate"} == {0, 1, 2}
    assert {p.mode for p in many} == set(MODES)
    # Past the 3 s session by 1-4 s; a clients cut (no session lapses) up to
    # 16 s, past the workloads' 10 s send timeout about half the time.
    assert all(4.0 <= p.hold_s <= 7.0 for p in many if p.mode != "clients")
    clients = [p.hold_s for p in many if p.mode == "clients"]
    assert all(4.0 <= hold <= 16.0 for hold in clients) and max(clients) > 10.0


def test_partition_is_refused_up_front_when_not_root(monkeypatch, tmp_path):
    from magnetar_chaos import netns

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    with pytest.raises(ValueError, match="needs root"):
        ClusterSystem(tmp_path, faults=["kill", "partition"])
    ClusterSystem(tmp_path, faults=["kill"])  # the other faults need nothing
