"""Writes to a partitioned topic: keys land on the partition a Pulsar client
picks with the same hashing scheme (our client's partitioned producer, whose
hashes the unit tests hold to Java's values), rows without a key spread over
the partitions, and a retried task stores each row once."""
from __future__ import annotations

import pulsar
import pyarrow as pa
import pytest

from magnetar.admin.client import AdminClient
from magnetar.client import HashingScheme

KEYS = [f"key-{i}-é" for i in range(200)] + ["😀"]


def _partition_of_keys(spark, broker, topic: str) -> dict[str, int]:
    rows = spark.read.format("magnetar").option("service_url", broker.service_url).option("topic", topic).load() \
        .selectExpr("cast(key as string) as key", "partition").distinct().collect()
    out = {r.key: r.partition for r in rows}
    assert len(out) == len(rows), "a key on two partitions"
    return out


@pytest.mark.parametrize("option, scheme", [(None, HashingScheme.JavaStringHash),
                                            ("Murmur3_32Hash", HashingScheme.Murmur3_32Hash)])
def test_keys_land_where_a_pulsar_client_puts_them(spark, broker, client, option, scheme):
    name = f"keyed-{scheme.name.lower()}"
    admin = AdminClient(broker.admin_url)
    admin.create_partitioned_topic(f"{name}-ours", 5)
    admin.create_partitioned_topic(f"{name}-client", 5)
    producer = client.create_producer(f"{name}-client", hashing_scheme=scheme)
    for key in KEYS:
        producer.send(b"from a client", partition_key=key)
    producer.close()
    df = spark.createDataFrame([(k, f"v{i}") for i, k in enumerate(KEYS)], "key string, value string").repartition(3)
    writer = df.write.format("magnetar").option("service_url", broker.service_url).option("topic", f"{name}-ours")
    if option is not None:
        writer = writer.option("hashingScheme", option)
    writer.mode("append").save()
    ours = _partition_of_keys(spark, broker, f"{name}-ours")
    assert ours == _partition_of_keys(spark, broker, f"{name}-client")
    assert len(set(ours.values())) == 5


def test_rows_without_keys_spread_and_a_topic_column_may_name_a_partitioned_topic(spark, broker):
    AdminClient(broker.admin_url).create_partitioned_topic("keyless", 3)
    n = 20_000
    df = spark.range(n).selectExpr("cast(id as string) as value", "'keyless' as topic")
    df.write.format("magnetar").option("service_url", broker.service_url).option("batchingMaxMessages", "500") \
        .mode("append").save()
    read = spark.read.format("magnetar").option("service_url", broker.service_url).option("topic", "keyless").load()
    stats = read.selectExpr("count(*) as n", "count(distinct value) as values").first()
    assert (stats.n, stats.values) == (n, n)
    per_partition = {r.partition: r["count"] for r in read.groupBy("partition").count().collect()}
    assert set(per_partition) == {0, 1, 2}
    assert min(per_partition.values()) >= 500


def test_bad_hashing_scheme_fails_on_the_driver(spark, broker):
    df = spark.range(3).selectExpr("cast(id as string) as value")
    for bad, fragment in (("BoostHash", "cannot be reproduced"), ("md5", "must be JavaStringHash")):
        with pytest.raises(Exception, match=fragment):
            df.write.format("magnetar").option("service_url", broker.service_url).option("topic", "never") \
                .option("hashingScheme", bad).mode("append").save()


def test_a_retried_task_stores_each_row_once_across_partitions(broker):
    """The task's first attempt stops after part of its rows (its input
    fails); the second, under the same producer name, skips on each
    partition what that partition stored and sends the rest there."""
    from pyspark_magnetar.options import write_options
    from pyspark_magnetar.writers import write_task

    AdminClient(broker.admin_url).create_partitioned_topic("retried", 4)
    rows = 12_000
    keys = pa.array([None if i % 7 == 0 else f"k{i % 50}" for i in range(rows)], pa.string())
    values = pa.array([f"v{i}" for i in range(rows)], pa.string())
    batches = pa.Table.from_arrays([keys, values], names=["key", "value"]).to_batches(max_chunksize=1000)
    opts = write_options({"service_url": broker.service_url, "topic": "retried"})

    def first_attempt():
        yield from batches[:5]
        raise RuntimeError("the task's input failed")

    with pytest.raises(RuntimeError, match="input failed"):
        write_task(first_attempt(), opts, lambda: "retried-task-0")
    report = write_task(iter(batches), opts, lambda: "retried-task-0")
    assert sum(report.skipped.values()) == 5000, report.skipped
    assert sorted(report.written) == [f"persistent://public/default/retried-partition-{i}" for i in range(4)]
    client = pulsar.Client(broker.service_url)
    try:
        reader = client.create_reader("persistent://public/default/retried", pulsar.MessageId.earliest)
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(10_000).data().decode())
    finally:
        client.close()
    assert sorted(got) == sorted(f"v{i}" for i in range(rows))


def test_a_stream_into_a_partitioned_topic_replays_a_batch_without_duplicates(spark, broker, client, tmp_path):
    """A streaming copy into 3 partitions; then a crash after the sink wrote
    the last micro-batch but before Spark committed it: the re-run of that
    batch routes its rows as before and stores none twice."""
    from .conftest import produce

    AdminClient(broker.admin_url).create_partitioned_topic("stream-parts", 3)
    produce(client, "stream-in", 3000)  # keys k0..k9
    checkpoint = tmp_path / "ckpt"

    def run() -> None:
        query = spark.readStream.format("magnetar").option("service_url", broker.service_url) \
            .option("topic", "stream-in").option("startingOffsets", "earliest").option("maxRecordsPerTrigger", "1000") \
            .load().select("key", "value").writeStream.format("magnetar").option("service_url", broker.service_url) \
            .option("topic", "stream-parts").option("checkpointLocation", str(checkpoint)) \
            .trigger(availableNow=True).start()
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()

    def out():
        return spark.read.format("magnetar").option("service_url", broker.service_url).option("topic", "stream-parts") \
            .load().selectExpr("count(*) as n", "count(distinct value) as values",
                               "count(distinct partition) as partitions").first()

    run()
    assert tuple(out()) == (3000, 3000, 3)
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    run()
    assert (commits / str(last)).exists()  # the batch was run again
    assert tuple(out()) == (3000, 3000, 3)
