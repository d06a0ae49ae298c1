"""A Spark task's bulk read (FETCH_ENTRIES, ``FetchScanner``) follows its
topic across PIP-307 transfers mid-read: the rows it returns are exactly the
topic's, in offset order, none lost and none twice.

The scanner reads with small responses (about 30 entries each, one always
in flight ahead of the caller) and the topic's bundle is moved to the other
broker after every fifth of the range, so fetches land on the old owner
after it let go and on the new one before and after its first read.
"""
from __future__ import annotations

import pulsar
import pyarrow as pa
import pytest

from magnetar.broker.cluster.bundles import bundle_of
from magnetar_harness.cluster import LocalCluster
from pyspark_magnetar.fetch_scan import FetchScanner
from pyspark_magnetar.offsets import TopicPartition
from pyspark_magnetar.session import BrokerSession
from tests.helpers import unique, wait_for

pytestmark = pytest.mark.timeout(300)
COUNT = 3000
MOVES = 4


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path / "cluster", brokers=2, session_ttl=5.0, storage="file").start()
    yield c
    c.stop()


def _value(i: int) -> bytes:
    return b"v%d-" % i + b"x" * (i % 50)


def test_a_fetching_task_follows_its_topic_across_moves(cluster):
    topic = f"persistent://public/default/{unique('fetch-moving')}"
    bundle = bundle_of(topic, "public/default").range
    b0 = cluster.members[0]
    client = pulsar.Client(b0.service_url, operation_timeout_seconds=30)
    try:
        # Half one message per entry, half batches: both shapes cross a move.
        for batching in (False, True):
            producer = client.create_producer(topic, batching_enabled=batching, batching_max_messages=20,
                                              batching_max_publish_delay_ms=5, block_if_queue_full=True)
            half = range(0, COUNT // 2) if not batching else range(COUNT // 2, COUNT)
            for i in half:
                producer.send_async(_value(i), None, partition_key=f"k{i % 7}")
            producer.flush()
            producer.close()
    finally:
        client.close()

    owners = [cluster.owners()[bundle]]
    rows: list[dict] = []
    with BrokerSession(b0.service_url, 30) as session:
        scanner = session.run(FetchScanner.open(session.client, TopicPartition(topic), 0, COUNT,
                                                poll_timeout_ms=30_000, fail_on_data_loss=True, max_bytes=2048))
        try:
            while True:
                pieces = session.run(scanner.next_entries(100))
                if not pieces:
                    break
                for batch in scanner.to_batches(pieces):
                    rows += batch.to_pylist()
                if len(owners) <= MOVES and len(rows) >= len(owners) * COUNT // (MOVES + 1):
                    target = next(m.broker_id for m in cluster.members if m.broker_id != owners[-1])
                    cluster.admin(b0, f"/admin/v2/namespaces/public/default/{bundle}/unload"
                                      f"?destinationBroker={target}", "PUT")
                    wait_for(lambda t=target: cluster.owners()[bundle] == t, 30, what=f"the bundle at {target}")
                    owners.append(target)
            fetches, retries = scanner.fetches, scanner.retries
        finally:
            session.run(scanner.close())
    assert len(owners) == MOVES + 1 and len(set(owners)) == 2, owners
    assert fetches > 2 * MOVES, fetches  # the moves fell between fetches of one read
    assert retries >= 1, "no fetch met a move (the one in flight went to the old owner)"
    assert [r["offset"] for r in rows] == list(range(COUNT))
    assert [r["value"] for r in rows] == [_value(i) for i in range(COUNT)]
    assert [r["key"] for r in rows] == [b"k%d" % (i % 7) for i in range(COUNT)]
