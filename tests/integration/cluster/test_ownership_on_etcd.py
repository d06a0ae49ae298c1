"""Ownership on a real etcd: racing brokers, and etcd restarted under a cluster."""
from __future__ import annotations

import asyncio

import pulsar
import pytest

from magnetar.broker.cluster.bundles import split_namespace
from magnetar.broker.cluster.channel import ASSIGNING, FREE, OWNED, RELEASING, Channel, LostRace, key_of
from magnetar.metadata.etcd import EtcdMetadataStore

from magnetar_harness.cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(600)


async def test_two_brokers_racing_for_a_bundle_100_times_make_one_owner_each_time(etcd):
    url = etcd.store_url("race")
    stores = [await EtcdMetadataStore.open(url) for _ in range(2)]
    channels = [Channel(s) for s in stores]
    for c in channels:
        await c.start()
    bundle = split_namespace("public/default")[2]
    try:
        for round_ in range(100):
            start = [await c.refresh(key_of(bundle)) or c.get(bundle) for c in channels]

            async def take(c, name, expected):
                try:
                    s = await c.transition(bundle, ASSIGNING, name, expected=expected)
                    await c.transition(bundle, OWNED, name, expected=s)
                    return name
                except LostRace:
                    return None

            winners = [w for w in await asyncio.gather(take(channels[0], "a", start[0]),
                                                        take(channels[1], "b", start[1])) if w]
            assert len(winners) == 1, f"round {round_}: {winners}"
            owner = winners[0]
            c = channels[0 if owner == "a" else 1]
            s = await c.transition(bundle, RELEASING, owner, owner)
            await c.transition(bundle, FREE, None, owner, expected=s)
    finally:
        for c in channels:
            c.close()
        for s in stores:
            await s.close()


def test_etcd_restarted_under_a_cluster_loses_nothing_acknowledged(tmp_path, etcd):
    cluster = LocalCluster(tmp_path / "cluster", brokers=2, session_ttl=5.0,
                           etcd=etcd.client_url + "/restart").start()
    topic = "persistent://public/default/across-etcd-restart"
    try:
        cluster.admin(cluster.members[0], "/admin/v2/namespaces/public/default/deduplication", "POST", True)
        client = pulsar.Client(cluster.members[0].service_url, operation_timeout_seconds=60)
        producer = client.create_producer(topic, producer_name="p-etcd", send_timeout_millis=60_000)
        for i in range(100):
            producer.send(str(i).encode())
        etcd.stop()
        etcd.start()
        for i in range(100, 200):
            producer.send(str(i).encode())
        wait_for(lambda: len(cluster.admin(cluster.members[1], "/admin/v2/brokers/cluster")) == 2, 30,
                 what="both brokers registered again")
        consumer = client.subscribe(topic, "after", initial_position=pulsar.InitialPosition.Earliest)
        got = [int(consumer.receive(timeout_millis=30_000).data()) for _ in range(200)]
        assert got == list(range(200))
        client.close()
    finally:
        assert cluster.stop() == 0


def test_a_broker_stops_promptly_when_etcd_is_gone(tmp_path, etcd):
    """SIGTERM with the metadata store unreachable: freeing bundles, leaving
    the election and ending the session each give up after a bound, so the
    broker exits in seconds (it took more than 30 s) and the leader frees its
    bundles when its session expires."""
    import os
    import signal
    import time

    cluster = LocalCluster(tmp_path / "cluster", brokers=1, session_ttl=3.0,
                           etcd=etcd.client_url + "/gone").start()
    try:
        client = pulsar.Client(cluster.members[0].service_url, operation_timeout_seconds=30)
        client.create_producer("persistent://public/default/owned").send(b"x")  # it owns a bundle
        client.close()
        etcd.stop()
        pid = cluster.members[0].pid
        started = time.monotonic()
        os.kill(pid, signal.SIGTERM)

        def gone() -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            try:  # a child of `cluster up`: reaped there, or a zombie until then
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().split()[2] == "Z"
            except OSError:
                return True

        wait_for(gone, 60, what="the broker to exit")
        took = time.monotonic() - started
        assert took < 20, f"the broker took {took:.1f} s to stop"
    finally:
        etcd.start()
        cluster.stop()
