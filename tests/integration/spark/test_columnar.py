"""The columnar read path returns exactly what the message path returns.

Messages are written by the official client in every shape a topic can hold
(batched and unbatched entries; LZ4, ZLIB and ZSTD compressed batches;
keys, properties, event times), then read twice: through Spark (entries
decoded into Arrow buffers) and through the client's reader (a Message per
member, turned into rows by ``messages_to_batch``). Every column must match.
Also: minPartitions, startingOffsetsByTimestamp / endingOffsetsByTimestamp
and their bad values.
"""
from __future__ import annotations

import time

import pulsar
import pytest

from magnetar.client import Client, MessageId
from pyspark_magnetar.offsets import TopicPartition
from pyspark_magnetar.schema import messages_to_batch

from .conftest import next_offset

TOPIC = "persistent://public/default/columnar-shapes"


def _read(spark, broker, **options):
    r = spark.read.format("magnetar").option("service_url", broker.service_url)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _write_shapes(service_url: str, topic: str) -> int:
    """Write 6 runs of 200 messages, one per entry shape; return the count."""
    client = pulsar.Client(service_url)
    n = 0
    try:
        shapes = [dict(batching_enabled=False), dict(batching_enabled=True),
                  dict(batching_enabled=True, compression_type=pulsar.CompressionType.LZ4),
                  dict(batching_enabled=True, compression_type=pulsar.CompressionType.ZLib),
                  dict(batching_enabled=True, compression_type=pulsar.CompressionType.ZSTD),
                  dict(batching_enabled=False, compression_type=pulsar.CompressionType.ZSTD)]
        for s, shape in enumerate(shapes):
            producer = client.create_producer(topic, producer_name=f"shape-{s}", batching_max_messages=64,
                                              batching_max_publish_delay_ms=50, **shape)
            for i in range(200):
                kwargs = {}
                if i % 3:
                    kwargs["partition_key"] = f"k{i % 7}"
                if i % 4 == 0:
                    kwargs["properties"] = {"i": str(i), "shape": str(s)}
                if i % 5 == 0:
                    kwargs["event_timestamp"] = 1_700_000_000_000 + i
                producer.send_async((f"s{s}-m{i}-" + "x" * (i % 50)).encode(), None, **kwargs)
                n += 1
            producer.flush()
            producer.close()
    finally:
        client.close()
    return n


def _via_messages(service_url: str, topic: str, count: int) -> list[dict]:
    client = Client(service_url)
    try:
        reader = client.create_reader(topic, MessageId.earliest)
        messages = [reader.read_next(10_000) for _ in range(count)]
        reader.close()
    finally:
        client.close()
    return messages_to_batch(TopicPartition(topic), messages).to_pylist()


def test_columnar_rows_equal_message_rows(spark, broker):
    count = _write_shapes(broker.service_url, TOPIC)
    assert next_offset(broker.service_url, TOPIC) == count
    want = _via_messages(broker.service_url, TOPIC, count)
    got = [r.asDict() for r in _read(spark, broker, topic=TOPIC).orderBy("offset").collect()]
    assert len(got) == len(want) == count
    for g, w in zip(got, want):
        g["properties"] = sorted(g["properties"].items())
        w["properties"] = sorted(w["properties"])
        g["key"] = None if g["key"] is None else bytes(g["key"])
        g["value"] = bytes(g["value"])
        for col in ("publish_time", "event_time"):  # Spark hands back naive local times, Arrow aware ones
            g[col] = None if g[col] is None else round(g[col].timestamp() * 1000)
            w[col] = None if w[col] is None else round(w[col].timestamp() * 1000)
        assert g == w, (g, w)
    # Every shape is there: keys, properties, event times, empty ones too.
    assert {r["producer_name"] for r in got} == {f"shape-{s}" for s in range(6)}
    assert any(r["key"] is None for r in got) and any(r["event_time"] is None for r in got)
    assert sum(1 for r in got if r["properties"]) == 6 * 50

    # A range starting mid-entry: the first entry's lower members are dropped, nothing else.
    mid = _read(spark, broker, topic=TOPIC, startingOffsets=f'{{"{TOPIC}": {{"-1": 333}}}}',
                endingOffsets=f'{{"{TOPIC}": {{"-1": 1001}}}}').orderBy("offset").collect()
    assert [r.offset for r in mid] == list(range(333, 1001))
    assert [bytes(r.value) for r in mid] == [w["value"] for w in want[333:1001]]


def test_min_partitions_splits_one_partition(spark, broker):
    if next_offset(broker.service_url, TOPIC) == 0:
        _write_shapes(broker.service_url, TOPIC)
    df = _read(spark, broker, topic=TOPIC, minPartitions="5")
    assert df.rdd.getNumPartitions() == 5
    offsets = [r.offset for r in df.select("offset").collect()]
    assert sorted(offsets) == list(range(1200))


def test_offsets_by_timestamp(spark, broker, client):
    topic = "by-time"
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(f"early-{i}".encode())
    time.sleep(0.05)  # publish times are milliseconds: the two runs must not share one
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    for i in range(10):
        producer.send(f"late-{i}".encode())
    producer.close()
    late = _read(spark, broker, topic=topic, startingTimestamp=str(cut)).orderBy("offset").collect()
    assert [r.offset for r in late] == list(range(10, 20))
    early = _read(spark, broker, topic=topic,
                  endingOffsetsByTimestamp=f'{{"{topic}": {{"-1": {cut}}}}}').orderBy("offset").collect()
    assert [bytes(r.value) for r in early] == [f"early-{i}".encode() for i in range(10)]
    future = _read(spark, broker, topic=topic, startingTimestamp=str(cut + 3_600_000)).count()
    assert future == 0


@pytest.mark.parametrize("options, fragment", [
    ({"startingTimestamp": "soon"}, "'startingTimestamp' must be a time in milliseconds"),
    ({"startingTimestamp": "-1"}, "'startingTimestamp' must be >= 0"),
    ({"startingOffsetsByTimestamp": "{"}, "'startingOffsetsByTimestamp' is not valid JSON"),
    ({"endingOffsetsByTimestamp": '{"other": {"-1": 5}}'}, "names partitions this query does not read"),
    ({"startingTimestamp": "1", "startingOffsetsByTimestamp": '{"by-time": {"-1": 1}}'}, "not both"),
    ({"minPartitions": "0"}, "'minPartitions' must be a positive integer"),
    ({"maxOffsetsPerTrigger": "5"}, "'maxOffsetsPerTrigger' is for streaming reads only"),
])
def test_bad_new_options_fail_clearly(spark, broker, client, options, fragment):
    client.create_producer("by-time").close()
    with pytest.raises(Exception) as info:
        _read(spark, broker, topic="by-time", **options).collect()
    assert fragment in str(info.value)
