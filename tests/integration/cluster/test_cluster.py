"""A cluster of real broker processes on a real etcd, driven by the official
client; each test runs on both storage backends: segment files, and object
storage (a real SeaweedFS that ``cluster up --storage object`` starts)."""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time
import urllib.error

import pulsar
import pytest

from magnetar_harness.cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(600)
TOPIC = "persistent://public/default/orders"


@pytest.fixture(params=["file", "object"])
def cluster(tmp_path, request):
    c = LocalCluster(tmp_path / "cluster", brokers=3, session_ttl=3.0, storage=request.param).start()
    yield c
    assert c.stop() == 0, "cluster up did not stop cleanly"


def test_a_partitioned_topic_spreads_over_brokers_and_each_message_arrives_once(cluster):
    b0, b1, _ = cluster.members
    cluster.admin(b0, "/admin/v2/namespaces/public/default/deduplication", "POST", True)
    cluster.admin(b0, "/admin/v2/persistent/public/default/orders/partitions", "PUT", 12)
    client = pulsar.Client(b1.service_url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(TOPIC, "all", consumer_type=pulsar.ConsumerType.Shared,
                                    initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(TOPIC, producer_name="p-spread", batching_enabled=True,
                                          block_if_queue_full=True)
        for i in range(20_000):
            producer.send_async(str(i).encode(), None)
        producer.flush()
        owners = cluster.owners()
        assert len({o for o in owners.values() if o}) >= 2, owners
        seen: dict[int, int] = {}
        while len(seen) < 20_000:
            msg = consumer.receive(timeout_millis=30_000)
            seen[int(msg.data())] = seen.get(int(msg.data()), 0) + 1
            consumer.acknowledge(msg)
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=1_000)  # nothing more: no duplicate
        assert set(seen) == set(range(20_000)) and set(seen.values()) == {1}
    finally:
        client.close()


def test_a_killed_brokers_bundles_are_taken_over_and_nothing_acknowledged_is_lost(cluster):
    b0 = cluster.members[0]
    cluster.admin(b0, "/admin/v2/namespaces/public/default/deduplication", "POST", True)
    cluster.admin(b0, "/admin/v2/persistent/public/default/orders/partitions", "PUT", 6)
    # Every broker's address: the victim may be any owner, the one first dialled too.
    client = pulsar.Client("pulsar://" + ",".join(m.service_url.removeprefix("pulsar://") for m in cluster.members),
                           operation_timeout_seconds=60)
    acked: list[int] = []
    lock = threading.Lock()
    try:
        producer = client.create_producer(TOPIC, producer_name="p-kill", batching_enabled=False,
                                          send_timeout_millis=60_000, block_if_queue_full=True)

        def on_sent(i):
            def done(res, _mid):
                if res == pulsar.Result.Ok:
                    with lock:
                        acked.append(i)
            return done

        for i in range(2_000):
            producer.send_async(str(i).encode(), on_sent(i))
        producer.flush()
        # Kill -9 a broker that owns a bundle (the placement may have given
        # every bundle to one broker: then that one).
        owners = cluster.owners()
        victim = next(m for m in cluster.members[1:] + cluster.members[:1] if m.broker_id in owners.values())
        lost = [b for b, o in owners.items() if o == victim.broker_id]
        killed_at = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        # and its machine is gone: nothing of the cluster's may live in its own directory
        shutil.rmtree(cluster.base / f"broker-{victim.index}")
        for i in range(2_000, 4_000):
            producer.send_async(str(i).encode(), on_sent(i))
        producer.flush()
        wait_for(lambda: all(cluster.owners()[b] not in (None, victim.broker_id) for b in lost), 30,
                 what="the killed broker's bundles owned by the others")
        took = time.monotonic() - killed_at
        print(f"bundles of the killed broker owned again {took:.1f} s after kill -9 (session TTL 3 s)")
        consumer = client.subscribe(TOPIC, "check", consumer_type=pulsar.ConsumerType.Shared,
                                    initial_position=pulsar.InitialPosition.Earliest)
        seen: dict[int, int] = {}
        # Until every acknowledged message is back (a partition whose new owner
        # is still opening its ledgers under load may be silent for a while),
        # then a short drain that would catch a second copy.
        deadline = time.monotonic() + 120
        quiet_ms = 30_000
        while True:
            try:
                msg = consumer.receive(timeout_millis=quiet_ms)
            except pulsar.Timeout:
                break
            seen[int(msg.data())] = seen.get(int(msg.data()), 0) + 1
            consumer.acknowledge(msg)
            if set(acked) <= set(seen) or time.monotonic() > deadline:
                quiet_ms = 2_000
        assert set(acked) <= set(seen), f"{len(set(acked) - set(seen))} acknowledged messages lost"
        assert len(acked) == 4_000
        assert set(seen.values()) == {1}, "a message arrived twice"
    finally:
        client.close()


def test_bad_input_gets_clear_errors(cluster):
    b0 = cluster.members[0]
    with pytest.raises(urllib.error.HTTPError) as bad_name:
        cluster.admin(b0, "/lookup/v2/topic/persistent/public/default/bad%00name")
    assert bad_name.value.code in (404, 412)
    with pytest.raises(urllib.error.HTTPError) as no_ns:
        cluster.admin(b0, "/lookup/v2/topic/persistent/public/nowhere/t")
    assert no_ns.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as bad_domain:
        cluster.admin(b0, "/lookup/v2/topic/elsewhere/public/default/t")
    assert bad_domain.value.code == 412
    client = pulsar.Client(b0.service_url, operation_timeout_seconds=10)
    try:
        with pytest.raises(Exception) as exc:
            client.create_producer("persistent://public/nowhere/t")
        assert "TopicNotFound" in type(exc.value).__name__ or "not" in str(exc.value).lower()
        # The cluster still serves after bad input.
        client.create_producer("persistent://public/default/fine").send(b"ok")
    finally:
        client.close()
    dead = pulsar.Client("pulsar://127.0.0.1:1", operation_timeout_seconds=3)
    with pytest.raises(Exception):
        dead.create_producer("persistent://public/default/x")
    dead.close()
