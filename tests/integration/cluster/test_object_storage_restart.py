"""A cluster on object storage keeps nothing on its brokers' disks: stop it,
delete every broker's data directory (keep only etcd's and the object
store's), start it again, and every message and every subscription position
is there."""
from __future__ import annotations

import shutil

import pulsar
import pytest

from magnetar_harness.cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(600)
TOPIC = "persistent://public/default/kept"


def backlog(cluster, member) -> int:
    """The subscription's backlog over the partitions, each asked of its owner."""
    total = 0
    for n in range(4):
        path = f"persistent/public/default/kept-partition-{n}"
        owner_url = cluster.admin(member, f"/lookup/v2/topic/{path}")["httpUrl"]
        owner = next(m for m in cluster.members if m.admin_url == owner_url)
        total += cluster.admin(owner, f"/admin/v2/{path}/stats")["subscriptions"]["half"]["msgBacklog"]
    return total


@pytest.mark.parametrize("storage", ["file", "object"])
def test_a_cluster_restarted_without_its_brokers_data_directories_has_every_message_and_position(tmp_path, storage):
    base = tmp_path / "cluster"
    cluster = LocalCluster(base, brokers=3, session_ttl=3.0, storage=storage).start()
    try:
        b0 = cluster.members[0]
        cluster.admin(b0, "/admin/v2/persistent/public/default/kept/partitions", "PUT", 4)
        client = pulsar.Client(b0.service_url, operation_timeout_seconds=30)
        consumer = client.subscribe(TOPIC, "half", consumer_type=pulsar.ConsumerType.Shared,
                                    initial_position=pulsar.InitialPosition.Earliest)
        # one message per entry: a batch half acknowledged comes back whole after a restart
        producer = client.create_producer(TOPIC, batching_enabled=False, block_if_queue_full=True)
        for i in range(1_000):
            producer.send_async(str(i).encode(), None)
        producer.flush()
        acked = set()
        while len(acked) < 500:
            msg = consumer.receive(timeout_millis=30_000)
            acked.add(int(msg.data()))
            consumer.acknowledge(msg)
        wait_for(lambda: backlog(cluster, b0) == 500, 30, what="the broker to have every acknowledgement")
        consumer.close()
        client.close()
    finally:
        assert cluster.stop() == 0
    brokers = sorted(base.glob("broker-*/"))
    assert len(brokers) == 3
    for directory in brokers:
        shutil.rmtree(directory)

    again = LocalCluster(base, brokers=3, session_ttl=3.0, storage=storage).start()
    try:
        # 60 s: bundles may still name the brokers of the first life (other
        # ports) until the new leader reassigns them
        client = pulsar.Client(again.members[1].service_url, operation_timeout_seconds=60)
        consumer = client.subscribe(TOPIC, "half", consumer_type=pulsar.ConsumerType.Shared)
        print("backlog after the restart:", backlog(again, again.members[1]))
        rest = set()
        while True:
            try:
                msg = consumer.receive(timeout_millis=5_000)
            except pulsar.Timeout:
                break
            rest.add(int(msg.data()))
            consumer.acknowledge(msg)
        assert rest == set(range(1_000)) - acked, (
            f"the subscription's position was lost, or messages were: {len(rest)} back, "
            f"{len(rest & acked)} of them acknowledged, {len(set(range(1_000)) - acked - rest)} missing")
        reader = client.subscribe(TOPIC, "all-again", initial_position=pulsar.InitialPosition.Earliest)
        everything = set()
        while True:
            try:
                everything.add(int(reader.receive(timeout_millis=5_000).data()))
            except pulsar.Timeout:
                break
        assert everything == set(range(1_000))
        client.close()
    finally:
        assert again.stop() == 0
