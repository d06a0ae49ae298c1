"""Geo-replication between regions, end to end: ``magnetar geo up``, the
official client in every region, messages published everywhere at once."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
from collections import defaultdict

import pulsar
import pytest

from magnetar import client as magnetar_client
from tests.helpers import wait_for

from magnetar_harness.regions import LocalRegions, replicated_namespace

pytestmark = pytest.mark.timeout(600)
PER_REGION = 10_000


@pytest.fixture
def regions(tmp_path):
    r = LocalRegions(tmp_path / "geo", regions=3).start()
    yield r
    r.stop()


def _replicated_namespace(regions, namespace: str) -> None:
    replicated_namespace(regions, namespace)
    names = [r.name for r in regions.regions]
    for r in regions.regions:  # the configuration store is shared: every region sees it at once
        assert sorted(r.admin(f"/admin/v2/namespaces/{namespace}/replication")) == sorted(names)


def _drain(consumer, want: int, deadline_s: float) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < deadline:
        try:
            msg = consumer.receive(1000)
        except pulsar.Timeout:
            continue
        got.append(msg.data().decode())
        consumer.acknowledge(msg)
    return got


def test_every_region_gets_every_message_once_in_order_per_origin(regions):
    _replicated_namespace(regions, "acme/orders")
    topic = "persistent://acme/orders/events"
    clients = {r.name: pulsar.Client(r.service_url, operation_timeout_seconds=60) for r in regions.regions}
    try:
        consumers = {name: c.subscribe(topic, "audit", initial_position=pulsar.InitialPosition.Earliest)
                     for name, c in clients.items()}
        errors: list[BaseException] = []

        def publish(name: str) -> None:
            try:
                producer = clients[name].create_producer(topic, batching_enabled=True,
                                                         batching_max_publish_delay_ms=5,
                                                         block_if_queue_full=True)
                for i in range(PER_REGION):
                    producer.send_async(f"{name}:{i}".encode(), None)
                producer.flush()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=publish, args=(name,)) for name in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        total = PER_REGION * len(clients)
        for name, consumer in consumers.items():
            got = _drain(consumer, total, 180)
            assert len(got) == total, f"{name} received {len(got)} of {total}"
            assert len(set(got)) == total, f"{name} received duplicates"
            last: dict[str, int] = defaultdict(lambda: -1)
            for body in got:
                origin, i = body.split(":")
                assert int(i) > last[origin], f"{name}: {origin}'s messages out of order at {i}"
                last[origin] = int(i)
        for r in regions.regions:
            stats = r.admin("/admin/v2/persistent/acme/orders/events/stats")
            # Stored once: a replicated entry is never forwarded again, so nothing comes back.
            assert stats["msgInCounter"] == total, (r.name, stats["msgInCounter"])
            others = {o.name for o in regions.regions} - {r.name}
            assert set(stats["replication"]) == others
            wait_for(lambda: all(v["replicationBacklog"] == 0 for v in
                                 r.admin("/admin/v2/persistent/acme/orders/events/stats")["replication"].values()),
                     30, what=f"{r.name}'s replication backlog drained")
            assert all(v["msgOutCounter"] == PER_REGION for v in stats["replication"].values()), stats["replication"]
    finally:
        for c in clients.values():
            c.close()


def test_removing_a_cluster_stops_replication_to_it_and_drops_its_cursor(regions):
    _replicated_namespace(regions, "acme/audit")
    a, b, c = regions.regions
    topic = "persistent://acme/audit/log"
    path = "/admin/v2/persistent/acme/audit/log"
    client_a, client_c = pulsar.Client(a.service_url), pulsar.Client(c.service_url)
    try:
        reader_c = client_c.subscribe(topic, "r", initial_position=pulsar.InitialPosition.Earliest)
        producer = client_a.create_producer(topic)
        producer.send(b"before")
        assert _drain(reader_c, 1, 60) == ["before"]
        a.admin("/admin/v2/namespaces/acme/audit/replication", "POST", [a.name, b.name])
        wait_for(lambda: f"pulsar.repl.{c.name}" not in a.admin(f"{path}/internalStats")["cursors"], 30,
                 what="the replicator cursor to the removed cluster deleted")
        assert set(a.admin(f"{path}/stats")["replication"]) == {b.name}
        producer.send(b"after")
        wait_for(lambda: b.admin(f"{path}/stats")["msgInCounter"] == 2, 30, what="b still replicated")
        # c is out: what a publishes now never reaches it (b got it; c's count stays).
        assert c.admin(f"{path}/stats")["msgInCounter"] == 1
    finally:
        client_a.close()
        client_c.close()


def test_a_partitioned_topic_replicates_partition_by_partition(regions):
    _replicated_namespace(regions, "acme/parts")
    a, b, _ = regions.regions
    topic = "persistent://acme/parts/p"
    a.admin("/admin/v2/persistent/acme/parts/p/partitions", "PUT", 3)
    # The partition count lives in the shared configuration store: b sees it at once.
    assert b.admin("/admin/v2/persistent/acme/parts/p/partitions")["partitions"] == 3
    client_a, client_b = pulsar.Client(a.service_url), pulsar.Client(b.service_url)
    try:
        consumer = client_b.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client_a.create_producer(topic, message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
                                            batching_enabled=False)
        for i in range(300):
            producer.send(f"m{i}".encode(), partition_key=f"k{i}")
        got = _drain(consumer, 300, 60)
        assert sorted(got) == sorted(f"m{i}" for i in range(300))
        stored = [b.admin(f"/admin/v2/persistent/acme/parts/p-partition-{k}/internalStats")["nextOffset"]
                  for k in range(3)]
        assert sum(stored) == 300 and all(stored), stored  # each partition copied into its twin
    finally:
        client_a.close()
        client_b.close()


def test_a_topic_level_list_overrides_the_namespaces(regions):
    _replicated_namespace(regions, "acme/mixed")
    a, b, c = regions.regions
    topic = "persistent://acme/mixed/pair"
    path = "/admin/v2/persistent/acme/mixed/pair"
    a.admin(f"{path}/replication", "POST", [a.name, b.name])
    # Shared by the regions like every policy; `applied` falls back to the namespace's.
    assert c.admin(f"{path}/replication") == sorted([a.name, b.name])
    assert sorted(c.admin("/admin/v2/persistent/acme/mixed/other/replication?applied=true")) == \
        sorted(r.name for r in regions.regions)
    client = pulsar.Client(a.service_url)
    try:
        producer = client.create_producer(topic)
        producer.send(b"first")
        wait_for(lambda: b.admin(f"{path}/stats")["msgInCounter"] == 1 if _loaded(b, path) else False, 30,
                 what="b got it")
        assert set(a.admin(f"{path}/stats")["replication"]) == {b.name}
        assert f"pulsar.repl.{c.name}" not in a.admin(f"{path}/internalStats")["cursors"]
        assert not _loaded(c, path)  # c never heard of it
        # Removed: the namespace's three apply again and c catches up from the start.
        a.admin(f"{path}/replication", "DELETE")
        wait_for(lambda: _loaded(c, path) and c.admin(f"{path}/internalStats")["nextOffset"] == 1, 30,
                 what="c replicated once the topic's own list was removed")
    finally:
        client.close()


def _loaded(region, path: str) -> bool:
    try:
        region.admin(f"{path}/stats")
        return True
    except Exception:  # 404: the topic does not exist there
        return False


def test_deleting_a_replicated_topic_follows_pulsars_rules(regions):
    """The other regions' replicators are producers on the topic: a plain
    delete is refused (412), a forced one deletes it in that region only, and
    the next message from another region brings it back."""
    _replicated_namespace(regions, "acme/gone")
    a, b, _ = regions.regions
    path = "/admin/v2/persistent/acme/gone/t"
    client_b = pulsar.Client(b.service_url)
    try:
        producer = client_b.create_producer("persistent://acme/gone/t")
        producer.send(b"one")
        wait_for(lambda: _loaded(a, path) and a.admin(f"{path}/internalStats")["nextOffset"] == 1, 30,
                 what="a has it")
        with pytest.raises(urllib.error.HTTPError) as refused:
            a.admin(path, "DELETE")
        assert refused.value.code == 412
        a.admin(f"{path}?force=true", "DELETE")
        assert _loaded(b, path)  # b keeps its copy
        producer.send(b"two")
        wait_for(lambda: _loaded(a, path) and a.admin(f"{path}/internalStats")["nextOffset"] >= 1, 30,
                 what="b's replicator recreating it in a")
    finally:
        client_b.close()


def test_a_region_outside_the_replication_clusters_refuses_the_namespace(regions):
    """Pulsar's rule: a namespace is served only in its replication clusters.
    A client of a region outside them is refused at once (NotAllowed, with a
    message naming the clusters) instead of writing a copy nobody replicates;
    the listed regions serve and replicate as usual, and adding the region
    back makes it serve again."""
    a, b, c = regions.regions
    replicated_namespace(regions, "acme/pair")
    a.admin("/admin/v2/namespaces/acme/pair/replication", "POST", [a.name, b.name])
    topic = "persistent://acme/pair/t"
    path = "/admin/v2/persistent/acme/pair/t"
    official = pulsar.Client(c.service_url, operation_timeout_seconds=30)
    ours = magnetar_client.Client(c.service_url)
    client_a = pulsar.Client(a.service_url)
    try:
        started = time.monotonic()
        with pytest.raises(pulsar.exceptions.NotAllowedError):
            official.create_producer(topic)
        with pytest.raises(pulsar.exceptions.NotAllowedError):
            official.subscribe(topic, "s")
        assert time.monotonic() - started < 10, "refused at once, not retried until a timeout"
        with pytest.raises(magnetar_client.NotAllowedError, match=f"not served in cluster {c.name}"):
            ours.create_producer(topic)
        assert not _loaded(c, path)  # nothing was created in c
        with pytest.raises(urllib.error.HTTPError) as http_lookup:
            c.admin("/lookup/v2/topic/persistent/acme/pair/t")
        assert http_lookup.value.code == 412 and "not served in cluster" in http_lookup.value.read().decode()
        # a and b serve it and replicate between them.
        consumer_b = pulsar.Client(b.service_url).subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        client_a.create_producer(topic).send(b"pair")
        assert _drain(consumer_b, 1, 60) == ["pair"]
        # The namespace's public/default and other namespaces still work in c.
        official.create_producer("persistent://public/default/in-every-region").send(b"ok")
        # c added: it serves the namespace and gets what a and b stored.
        a.admin("/admin/v2/namespaces/acme/pair/replication", "POST", [a.name, b.name, c.name])
        reader = official.subscribe(topic, "late", initial_position=pulsar.InitialPosition.Earliest)
        assert _drain(reader, 1, 60) == ["pair"]
    finally:
        official.close()
        ours.close()
        client_a.close()


def test_namespaces_may_only_use_the_tenants_allowed_clusters(regions):
    """Pulsar answers 403 "Cluster [x] is not in the list of allowed
    clusters" when a namespace (or a topic) would replicate to a cluster its
    tenant does not allow; 412 for a cluster that does not exist."""
    a, b, c = regions.regions
    a.admin("/admin/v2/tenants/narrow", "PUT", {"allowedClusters": [a.name, b.name]})
    for method, ns_path, body in (
            ("PUT", "/admin/v2/namespaces/narrow/wide", {"replication_clusters": [a.name, c.name]}),
            ("PUT", "/admin/v2/namespaces/narrow/ok", None),
            ("POST", "/admin/v2/namespaces/narrow/ok/replication", [a.name, b.name, c.name]),
            ("POST", "/admin/v2/persistent/narrow/ok/t/replication", [c.name])):
        if body is None:
            a.admin(ns_path, method)  # created: its clusters default to the one it was created in
            assert a.admin(f"{ns_path}/replication") == [a.name]
            continue
        with pytest.raises(urllib.error.HTTPError) as refused:
            a.admin(ns_path, method, body)
        assert refused.value.code == 403, (ns_path, refused.value.code)
        reason = json.loads(refused.value.read())["reason"]
        assert f"Cluster [{c.name}] is not in the list of allowed clusters" in reason, reason
    with pytest.raises(urllib.error.HTTPError) as missing:
        a.admin("/admin/v2/namespaces/narrow/mars", "PUT", {"replication_clusters": ["mars"]})
    assert missing.value.code == 412
    assert a.admin("/admin/v2/namespaces/narrow") == ["narrow/ok"]  # nothing else was created
    # Created in b without a list: b's own cluster (a region serves what is replicated to it).
    b.admin("/admin/v2/namespaces/narrow/from-b", "PUT")
    assert b.admin("/admin/v2/namespaces/narrow/from-b/replication") == [b.name]
