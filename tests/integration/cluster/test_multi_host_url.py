"""A service URL naming every broker of a cluster: the first one frozen or
gone, Magnetar's client works through the others (and the official one past
a dead host, the case both handle the same way)."""
from __future__ import annotations

import os
import signal
import time

import pulsar
import pytest

from magnetar import client as mclient
from magnetar_harness.ports import free_port

from magnetar_harness.cluster import LocalCluster

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path / "cluster", brokers=3, session_ttl=3.0).start()
    yield c
    for m in c.members:  # never leave a stopped process behind
        try:
            os.kill(m.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    c.stop()


def multi_host(urls: list[str]) -> str:
    return "pulsar://" + ",".join(u.removeprefix("pulsar://") for u in urls)


def round_trip(client, topic: str, payload: bytes) -> None:
    """Produce ``payload`` to ``topic`` and read it back from the start."""
    producer = client.create_producer(topic)
    producer.send(payload)
    reader = client.create_reader(topic, mclient.MessageId.earliest)
    assert reader.read_next(30_000).data() == payload
    producer.close()
    reader.close()


def test_with_the_first_host_dead_or_frozen_the_others_answer(cluster):
    dead = f"pulsar://127.0.0.1:{free_port()}"  # nothing listens there
    url = multi_host([dead] + [m.service_url for m in cluster.members])
    client = mclient.Client(url, operation_timeout_seconds=30)
    official = pulsar.Client(url, operation_timeout_seconds=30)
    try:
        round_trip(client, "persistent://public/default/multi-1", b"past a dead host")
        official.create_producer("persistent://public/default/multi-1").send(b"official")

        # Broker 0, the host the client now asks, frozen past its session: its
        # connection stays open and silent, so only a timeout tells.
        os.kill(cluster.members[0].pid, signal.SIGSTOP)
        began = time.monotonic()
        round_trip(client, "persistent://public/default/multi-2", b"past a frozen host")
        assert time.monotonic() - began < 30
        # (The official client is not asked here: it takes the hosts round
        # robin per lookup and waits out its whole operation timeout on a
        # frozen one, which is its behaviour, not ours.)

        # A new client whose list starts with the frozen broker.
        fresh = mclient.Client(multi_host([m.service_url for m in cluster.members]), operation_timeout_seconds=30)
        try:
            round_trip(fresh, "persistent://public/default/multi-4", b"a fresh client")
        finally:
            fresh.close()
    finally:
        os.kill(cluster.members[0].pid, signal.SIGCONT)
        client.close()
        official.close()
