"""A cold read by the Spark connector of a topic on object storage fetches
each commit object once for all the ledgers it needs (a real broker
restarted, so its caches are empty; real etcd and SeaweedFS; the official
client wrote the topic; the store's GETs counted at /metrics).

The topic has two partitions written together, so each commit object holds
a section of both partitions' ledgers, and the objects are larger than
the head a GET reads whole (a few hundred KiB each). The connector's two
tasks read the partitions at once, as Spark runs them: the second
partition's sections must come from the bytes the first one's GETs
fetched (or the same GETs), not from GETs of their own.
"""
from __future__ import annotations

import asyncio
import re
import threading
import urllib.request

import pulsar
import pytest

from magnetar.objectstore.s3 import open_object_store
from magnetar_harness.cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(300)
TOPIC = "persistent://public/default/cold-connector"
ROWS = 100_000  # 10 MB of values in commit objects of about 2 MB (100 ms each)
CONFIG = '[storage]\nobject_storage_profile = "cost"\nobject_commit_interval_ms = 100\n'


def object_gets(member) -> tuple[int, int]:
    """The broker's ranged GETs of commit objects and of compacted chunks so far."""
    text = urllib.request.urlopen(member.admin_url + "/metrics", timeout=30).read().decode()
    values = []
    for name in ("magnetar_object_gets_total", "magnetar_object_chunk_gets_total"):
        found = re.search(rf"^{name} (\S+)$", text, re.M)
        assert found, f"{name} not in /metrics"
        values.append(int(float(found.group(1))))
    return values[0] - values[1], values[1]


def stored(cluster: LocalCluster) -> list:
    async def listing():
        store = open_object_store(f"s3://{cluster.objectstore_bucket}/{cluster.name}"
                                  f"?endpoint={cluster.objectstore_endpoint}")
        try:
            return await store.list("")
        finally:
            await store.close()
    return asyncio.run(listing())


def compacted(cluster: LocalCluster) -> list | None:
    """The chunk objects, once both partitions' ledgers have some."""
    chunks = [o for o in stored(cluster) if o.key.startswith("ledgers/")]
    return chunks if len({o.key.split("/")[1] for o in chunks}) >= 2 else None


def write(member) -> dict[int, int]:
    """ROWS messages by the official client in batches, over both partitions;
    the next offset of each partition."""
    from magnetar.admin.client import AdminClient

    admin = AdminClient(member.admin_url)
    admin.create_partitioned_topic(TOPIC, 2)
    client = pulsar.Client(member.service_url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(TOPIC, batching_enabled=True, batching_max_messages=1000,
                                          batching_max_publish_delay_ms=1, block_if_queue_full=True,
                                          max_pending_messages=10_000,
                                          message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
        for i in range(ROWS):
            producer.send_async(b"%099d" % i, None)
        producer.flush()
        producer.close()
    finally:
        client.close()
    ends = {p: admin.stats(f"{TOPIC}-partition-{p}")["msgInCounter"] for p in range(2)}
    assert sum(ends.values()) == ROWS
    return ends


def plan(url: str) -> tuple[list, object]:
    """The connector's plan of a batch read of the topic (what Spark's driver
    runs: it loads each partition on the broker) and the read options."""
    from pyspark_magnetar.batch_reader import MagnetarBatchReader
    from pyspark_magnetar.options import read_options

    opts = read_options({"service_url": url, "topic": TOPIC}, streaming=False)
    return MagnetarBatchReader(opts).partitions(), opts


def read_task(part, opts, out: dict) -> None:
    """One Spark task's read of ``part`` (no Spark): the rows it got, or its error."""
    from pyspark_magnetar.ranges import read_range

    try:
        out[part.tp.partition] = sum(b.num_rows for b in read_range(part, opts))
    except BaseException as exc:  # the assertion below names it
        out[part.tp.partition] = exc


def test_a_cold_connector_read_makes_one_get_per_commit_object(tmp_path):
    cluster = LocalCluster(tmp_path / "c", brokers=1, storage="object", broker_config=CONFIG,
                           name="cold-connector").start(timeout=180)
    try:
        ends = write(cluster.members[0])
        member = cluster.restart_member(0)  # every cache empty: the entries are read from the store
        objects = stored(cluster)  # commit objects (and chunks of ledgers compacted at the stop)
        commits = [o for o in objects if o.key.startswith("data/")]
        assert commits and max(o.size for o in commits) > 512 * 1024, [o.size for o in commits]
        at_restart = object_gets(member)
        parts, opts = plan(member.service_url)
        assert sorted((p.tp.partition, p.start, p.end) for p in parts) == [(n, 0, ends[n]) for n in range(2)]
        before = object_gets(member)
        got: dict = {}
        tasks = [threading.Thread(target=read_task, args=(part, opts, got)) for part in parts]
        for t in tasks:
            t.start()
        for t in tasks:
            t.join(120)
        assert got == ends, got
        # the loads' compactions (a second after each load) are counted too
        chunks = wait_for(lambda: compacted(cluster), 60, what="both partitions' ledgers compacted")
        after = object_gets(member)
        planned = before[0] - at_restart[0]
        commit_gets, chunk_gets = after[0] - before[0], after[1] - before[1]
        print(f"planning {planned} GETs; tasks and compactions {commit_gets} GETs of {len(commits)} commit objects, "
              f"{chunk_gets} of {len(chunks)} chunks")
        # The tasks and the compactions that follow the loads share the GETs
        # of each commit object; a task that comes after a compaction reads
        # the chunks it wrote, one GET each at most.
        assert commit_gets <= len(commits), f"{commit_gets} GETs of {len(commits)} commit objects"
        assert chunk_gets <= len(chunks), f"{chunk_gets} GETs of {len(chunks)} chunk objects"
        # Planning loads each partition in turn; a load reads the partition's
        # last entry (a GET of the last object's head, before the other
        # partition is known) and the plan its first: one GET per partition
        # at most beyond the commit objects, no read-ahead of a probe.
        assert planned + commit_gets <= len(commits) + 2, (
            f"{planned} GETs planning and {commit_gets} reading, of {len(commits)} commit objects")
    finally:
        assert cluster.stop() == 0
