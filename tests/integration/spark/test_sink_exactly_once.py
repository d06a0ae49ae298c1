"""Exactly-once writes: a task that fails after part of its rows were
stored is retried without duplicates, and a micro-batch re-run after a
restart (written, but not committed in the checkpoint) publishes nothing
twice. Both rest on the broker's Pulsar-style deduplication, which the
sink's producers ask for (off for this module's namespace), and on
deterministic producer names."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .conftest import next_offset, produce


#: Values are padded to this many bytes: Python workers flush their output every
#: 64 KiB, and rows must reach the sink before the failure is injected.
PAD = 1000


@pytest.fixture
def small_arrow_batches(spark):
    """Rows reach the sink 100 at a time, so a task can store some rows and then fail."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, "100")
    yield
    spark.conf.set(key, old)


def failing_identity(service_url: str, out_topic: str, fail_on: str, stored_at_least: int, marker: str):
    """A UDF passing values through, except that the first attempt of the task
    that meets ``fail_on`` (the value's text before its first "-") waits until ``out_topic`` holds ``stored_at_least``
    messages (rows this task already published) and then fails, once."""
    from pyspark.sql.functions import udf

    def identity(value):  # no type hints: they would make Spark look for an Arrow UDF
        from pyspark import TaskContext

        if bytes(value).split(b"-", 1)[0].decode() == fail_on and TaskContext.get().attemptNumber() == 0 \
                and not os.path.exists(marker):
            deadline = time.monotonic() + 60
            seen = next_offset(service_url, out_topic)
            while seen < stored_at_least and time.monotonic() < deadline:
                time.sleep(0.05)
                seen = next_offset(service_url, out_topic)
            Path(marker).write_text(json.dumps({"stored_before_failure": seen}))
            raise RuntimeError(f"injected task failure at {fail_on}")
        return value

    return udf(identity, "binary", useArrow=False)


def _out_stats(spark, broker, topic: str):
    return spark.read.format("magnetar").option("service_url", broker.service_url).option("topic", topic).load() \
        .selectExpr("count(*) as n", "count(distinct value) as distinct_values",
                    "collect_set(producer_name) as producers").first()


def test_stream_sink_survives_task_failure_and_replay(spark, broker, client, tmp_path, small_arrow_batches):
    url = broker.service_url
    produce(client, "eo-in", 5000, pad=PAD)
    marker = str(tmp_path / "failed-once.json")
    checkpoint = tmp_path / "ckpt"
    # Batches of 1000 rows, one task each; the third batch's task fails at its
    # 700th row once rows 2000..2499 (its first 500) are stored.
    fail = failing_identity(url, "eo-out", "v2700", 2500, marker)

    def run():
        src = spark.readStream.format("magnetar").option("service_url", url).option("topic", "eo-in") \
            .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", "1000").load()
        query = src.select(fail("value").alias("value"), "key", "properties").writeStream.format("magnetar") \
            .option("service_url", url).option("topic", "eo-out").option("checkpointLocation", str(checkpoint)) \
            .trigger(availableNow=True).start()
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
        return query.id

    query_id = run()
    assert json.loads(Path(marker).read_text())["stored_before_failure"] >= 2500  # the failure really happened late
    stats = _out_stats(spark, broker, "eo-out")
    assert (stats.n, stats.distinct_values) == (5000, 5000)
    assert set(stats.producers) == {f"spark-{query_id}-{b}-0" for b in range(5)}

    # A crash after the sink wrote batch 4 but before Spark recorded its commit:
    # on restart Spark runs batch 4 again over the same offsets.
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)  # Hadoop's checksum file would block the rewrite
    produce(client, "eo-in", 1000, start=5000, pad=PAD)
    assert run() == query_id  # same checkpoint, same query id, same producer names
    assert (commits / str(last)).exists()  # the batch was run again
    stats = _out_stats(spark, broker, "eo-out")
    assert (stats.n, stats.distinct_values) == (6000, 6000)


def test_batch_write_task_retry_does_not_duplicate(spark, broker, tmp_path, small_arrow_batches):
    url = broker.service_url
    marker = str(tmp_path / "failed-once.json")
    # Two tasks of 1500 rows; the first fails at its 1201st row once the topic
    # holds 2000 messages, i.e. at least 500 of its own.
    fail = failing_identity(url, "eo-batch", "1200", 2000, marker)
    df = spark.range(0, 3000, 1, 2).selectExpr(f"cast(concat(cast(id as string), '-', repeat('x', {PAD})) as binary)"
                                               " as value")
    df.select(fail("value").alias("value")).write.format("magnetar").option("service_url", url) \
        .option("topic", "eo-batch").mode("append").save()
    assert json.loads(Path(marker).read_text())["stored_before_failure"] >= 2000
    stats = _out_stats(spark, broker, "eo-batch")
    assert (stats.n, stats.distinct_values) == (3000, 3000)
