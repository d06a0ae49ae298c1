"""Geo-replication between regions, end to end: ``magnetar geo up``, the
official client in every region, messages published everywhere at once."""
from __future__ import annotations

import threading
import urllib.error
import time
from collections import defaultdict

import pulsar
import pytest

from tests.conftest import wait_for

from .regions_process import LocalRegions, replicated_namespace

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
