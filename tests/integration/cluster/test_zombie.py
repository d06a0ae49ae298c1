"""A paused owner (SIGSTOP past its session) resumed after its bundle moved: a zombie.

Whatever it acknowledges after the pause must be in the log the new owner
serves, at the position the receipt names (it may finish sends that storage
settled before the new owner fenced its ledger, never one after); it loses
nothing acknowledged, and it gives the topic up.
"""
from __future__ import annotations

import os
import signal
import threading

import pulsar
import pytest

from magnetar_harness.cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(600)
TOPIC = "persistent://public/default/zombie"


@pytest.fixture(params=["file", "object"])
def cluster(tmp_path, request):
    # object: no fence marker on a disk, the commit's compare in etcd is the fence
    c = LocalCluster(tmp_path / "cluster", brokers=3, session_ttl=3.0, storage=request.param).start()
    yield c
    for m in c.members:  # never leave a stopped process behind
        try:
            os.kill(m.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    c.stop()


def test_a_resumed_zombie_acknowledges_nothing_and_nothing_acknowledged_is_lost(cluster):
    b0 = cluster.members[0]
    cluster.admin(b0, "/admin/v2/namespaces/public/default/deduplication", "POST", True)
    owner_url = cluster.admin(b0, "/lookup/v2/topic/persistent/public/default/zombie")["httpUrl"]
    zombie = next(m for m in cluster.members if m.admin_url == owner_url)
    other = next(m for m in cluster.members if m is not zombie)
    client = pulsar.Client(other.service_url, operation_timeout_seconds=60)
    try:
        producer = client.create_producer(TOPIC, producer_name="p-zombie", batching_enabled=False,
                                          send_timeout_millis=0)  # never give up: resend to the new owner
        before = [producer.send(str(i).encode()) for i in range(50)]
        zombie_ledger = before[-1].ledger_id()
        receipts: dict[int, object] = {}
        lock = threading.Lock()

        def on_sent(i):
            def done(res, mid):
                with lock:
                    receipts[i] = (res, mid)
            return done

        os.kill(zombie.pid, signal.SIGSTOP)
        for i in range(50, 100):
            producer.send_async(str(i).encode(), on_sent(i))  # in flight to the paused owner
        wait_for(lambda: cluster.admin(other, "/admin/v2/namespaces/public/default/bundles")["owners"]
                 .get(_bundle_of(cluster, other)) not in (None, zombie.broker_id), 30,
                 what="the bundle owned by a live broker")
        os.kill(zombie.pid, signal.SIGCONT)
        for i in range(100, 150):
            producer.send_async(str(i).encode(), on_sent(i))
        producer.flush()
        wait_for(lambda: len(receipts) == 100, 60, what="every send acknowledged (by the new owner)")
        assert all(res == pulsar.Result.Ok for res, _ in receipts.values())
        consumer = client.subscribe(TOPIC, "check", initial_position=pulsar.InitialPosition.Earliest)
        where: dict[int, tuple[int, int]] = {}
        got = []
        while True:
            try:
                msg = consumer.receive(timeout_millis=5_000)
            except pulsar.Timeout:
                break
            got.append(int(msg.data()))
            where[int(msg.data())] = (msg.message_id().ledger_id(), msg.message_id().entry_id())
            consumer.acknowledge(msg)
        assert sorted(got) == list(range(150)), "lost or duplicated messages"
        untrue = [(i, (mid.ledger_id(), mid.entry_id()), where[i]) for i, (_, mid) in receipts.items()
                  if mid.entry_id() >= 0 and mid.ledger_id() < 2**63 and (mid.ledger_id(), mid.entry_id()) != where[i]]
        assert not untrue, f"receipts naming a place the message is not: {untrue[:5]}"
        from_zombie = sum(1 for _, mid in receipts.values() if mid.ledger_id() == zombie_ledger)
        print(f"the zombie settled {from_zombie} of the sends in flight to it; the new owner the rest")
        # The zombie gave the topic up: its own view names another owner.
        wait_for(lambda: cluster.admin(zombie, "/admin/v2/namespaces/public/default/bundles")["owners"]
                 .get(_bundle_of(cluster, zombie)) not in (None, zombie.broker_id), 30,
                 what="the zombie to see the new owner")
    finally:
        client.close()


def _bundle_of(cluster: LocalCluster, member) -> str:
    from magnetar.broker.cluster.bundles import bundle_of
    return bundle_of(TOPIC, "public/default").range
