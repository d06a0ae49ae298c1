"""Batch reads and writes: a 100,000-row round trip with exact offsets,
offset ranges, splitting, and option errors."""
from __future__ import annotations

import pytest

from .conftest import next_offset, produce

N = 100_000


def _reader(spark, broker, **options):
    r = spark.read.format("magnetar").option("service_url", broker.service_url)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_round_trip_100k_rows_with_exact_offsets(spark, broker):
    rows = spark.range(N).selectExpr(
        "cast(cast(id as string) as binary) as value",
        "concat('k', cast(id % 10 as string)) as key",
        "map('id', cast(id as string)) as properties",
        "timestamp_millis(1700000000000 + id) as event_time",
    )
    rows.write.format("magnetar").option("service_url", broker.service_url).option("topic", "round-trip") \
        .mode("append").save()
    assert next_offset(broker.service_url, "round-trip") == N

    df = _reader(spark, broker, topic="round-trip")
    stats = df.selectExpr(
        "count(*) as n", "count(distinct offset) as offsets", "min(offset) as lo", "max(offset) as hi",
        "count(distinct value) as values",
        "sum(case when cast(value as string) = properties['id'] then 0 else 1 end) as bad_props",
        "sum(case when cast(key as string) = concat('k', cast(cast(cast(value as string) as bigint) % 10 as string))"
        " then 0 else 1 end) as bad_keys",
        "sum(case when unix_millis(event_time) = 1700000000000 + cast(cast(value as string) as bigint)"
        " then 0 else 1 end) as bad_times",
        "count(distinct topic) as topics", "min(partition) as part",
    ).first()
    assert (stats.n, stats.offsets, stats.lo, stats.hi, stats.values) == (N, N, 0, N - 1, N)
    assert (stats.bad_props, stats.bad_keys, stats.bad_times) == (0, 0, 0)
    assert (stats.topics, stats.part) == (1, -1)

    # An explicit range [1000, 2500) returns exactly those offsets, with the same rows.
    ranged = _reader(spark, broker, topic="round-trip",
                     startingOffsets='{"round-trip": {"-1": 1000}}', endingOffsets='{"round-trip": {"-1": 2500}}')
    got = ranged.selectExpr("count(*) as n", "min(offset) as lo", "max(offset) as hi").first()
    assert (got.n, got.lo, got.hi) == (1500, 1000, 2499)
    same = ranged.alias("r").join(df.alias("a"), "offset").where("r.value = a.value").count()
    assert same == 1500

    # Deep in the topic (the reader is positioned by the broker's seek by offset, then skips): exact too.
    deep = _reader(spark, broker, topic="round-trip", startingOffsets='{"round-trip": {"-1": 77777}}',
                   endingOffsets='{"round-trip": {"-1": 77787}}')
    got = [(r.offset, bytes(r.value)) for r in deep.select("offset", "value").orderBy("offset").collect()]
    want = [(r.offset, bytes(r.value)) for r in df.where("offset >= 77777 and offset < 77787")
            .select("offset", "value").orderBy("offset").collect()]
    assert got == want and [o for o, _ in got] == list(range(77777, 77787))

    # Splitting: one task per 30,000 offsets, same rows.
    split = _reader(spark, broker, topic="round-trip", maxRecordsPerPartition="30000")
    assert split.rdd.getNumPartitions() == 4
    assert split.selectExpr("count(distinct offset)").first()[0] == N


def test_several_topics_and_a_pattern(spark, broker, client):
    produce(client, "multi-a", 300)
    produce(client, "multi-b", 200)
    df = _reader(spark, broker, topics="multi-a,multi-b")
    counts = {r.topic.rsplit("/", 1)[1]: r.n for r in df.groupBy("topic").count().withColumnRenamed("count", "n")
              .collect()}
    assert counts == {"multi-a": 300, "multi-b": 200}
    assert _reader(spark, broker, topicsPattern="multi-.*").count() == 500
    assert _reader(spark, broker, topicsPattern="nothing-matches-.*").count() == 0
    # latest..latest is an empty read, not an error
    assert _reader(spark, broker, topic="multi-a", startingOffsets="latest").count() == 0


@pytest.mark.parametrize("options, fragment", [
    ({"topic": "no-such-topic"}, "topic persistent://public/default/no-such-topic does not exist"),
    ({"topic": "multi-a", "startingOffsets": '{"multi-a": {"-1": 5'}, "startingOffsets"),
    ({"topic": "multi-a", "startingOffsets": '{"multi-a": {"-1": 5'}, "valid JSON"),
    ({"topic": "multi-a", "startingOffsets": '{"other": {"-1": 5}}'}, "names partitions this query does not read"),
    ({"topic": "multi-a", "endingOffsets": '{"multi-a": {"-1": 100000}}'}, "beyond its next offset"),
    ({"topic": "multi-a", "startingOffsets": '{"multi-a": {"-1": 50}}',
      "endingOffsets": '{"multi-a": {"-1": 10}}'}, "is after its end offset"),
    ({"topic": "multi-a", "startingOffset": "earliest"}, "did you mean 'startingOffsets'"),
    ({}, "exactly one of 'topic', 'topics' or 'topicsPattern'"),
])
def test_bad_options_fail_clearly(spark, broker, client, options, fragment):
    if options.get("topic") == "multi-a":
        produce(client, "multi-a", 60)  # enough for the offsets above, whichever test ran first
    with pytest.raises(Exception) as info:
        _reader(spark, broker, **options).collect()
    assert fragment in str(info.value)


def test_writes_refuse_overwrite_and_bad_columns(spark, broker):
    df = spark.range(3).selectExpr("id as value")
    with pytest.raises(Exception, match="column 'value' must be binary or string"):
        df.write.format("magnetar").option("service_url", broker.service_url).option("topic", "w").mode("append") \
            .save()
    ok = spark.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match="append-only"):
        ok.write.format("magnetar").option("service_url", broker.service_url).option("topic", "w") \
            .mode("overwrite").save()


def test_partitioned_topic_one_task_per_partition(spark, broker, client):
    from magnetar.admin.client import AdminClient

    AdminClient(broker.admin_url).create_partitioned_topic("parts", 3)
    for i, n in enumerate((100, 200, 300)):
        produce(client, f"parts-partition-{i}", n)
    df = _reader(spark, broker, topic="parts")
    assert df.rdd.getNumPartitions() == 3
    got = {r.partition: (r.n, r.lo, r.hi) for r in df.groupBy("partition").agg(
        {"offset": "min", "*": "count"}).withColumnRenamed("count(1)", "n").withColumnRenamed("min(offset)", "lo")
        .join(df.groupBy("partition").agg({"offset": "max"}).withColumnRenamed("max(offset)", "hi"), "partition")
        .collect()}
    assert got == {0: (100, 0, 99), 1: (200, 0, 199), 2: (300, 0, 299)}
    assert {r.topic for r in df.select("topic").distinct().collect()} == {"persistent://public/default/parts"}

    ranged = _reader(spark, broker, topic="parts", startingOffsets='{"parts": {"0": 50, "2": 100}}',
                     endingOffsets='{"parts": {"1": 150}}')
    counts = {r.partition: r["count"] for r in ranged.groupBy("partition").count().collect()}
    assert counts == {0: 50, 1: 150, 2: 200}
