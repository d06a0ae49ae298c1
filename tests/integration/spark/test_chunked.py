"""Chunked messages (the official client's ``chunking_enabled``) read by the
Spark source: each large message is one row, whole, once, with its key and
properties, at the offset of its last chunk, also when the read's ranges
(``minPartitions``) cut through a message's chunks.

The broker advertises a 10 KiB max_message_size so the client chunks
messages of tens of KB (fast); half of them compressed with LZ4 (the client
chunks after compression: the whole message is decompressed once reassembled).
"""
from __future__ import annotations

import os

import pulsar
import pytest

from magnetar_harness.broker import configured_broker

TOPIC = "chunked"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = configured_broker(tmp_path_factory.mktemp("chunk-broker"), "max_message_size = 10240\n").start()
    yield proc
    if proc.alive:
        assert proc.stop() == 0, proc.log()


@pytest.fixture(scope="module")
def expected(broker):
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=20)
    try:
        # Both kinds: the whole message is decompressed only once reassembled.
        lz4 = client.create_producer(TOPIC, chunking_enabled=True, batching_enabled=False,
                                     compression_type=pulsar.CompressionType.LZ4)
        plain = client.create_producer(TOPIC, chunking_enabled=True, batching_enabled=False)
        small = client.create_producer(TOPIC, batching_enabled=False)
        want = {}
        for i in range(4):
            value = os.urandom(20_000 + 7_000 * i).hex().encode()  # 40-82 KB, about 4-9 chunks compressed
            big = lz4 if i % 2 == 0 else plain
            big.send_async(value, None, partition_key=f"big{i}", properties={"n": str(i)})
            small.send_async(f"small{i}".encode(), None, partition_key=f"s{i}", properties={"n": str(i)})
            want[f"big{i}"] = value
            want[f"s{i}"] = f"small{i}".encode()
        lz4.flush()
        plain.flush()
        small.flush()
    finally:
        client.close()
    return want


def _rows(spark, broker, **options):
    r = spark.read.format("magnetar").option("service_url", broker.service_url).option("topic", TOPIC)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load().select("key", "value", "properties", "offset").collect()


@pytest.mark.parametrize("options", [{}, {"minPartitions": "9"}], ids=["one-range", "ranges-cut-messages"])
def test_each_chunked_message_is_one_whole_row(spark, broker, expected, options):
    rows = _rows(spark, broker, **options)
    got = {bytes(r.key).decode(): bytes(r.value) for r in rows}
    assert len(rows) == len(expected), sorted(r.key for r in rows)
    assert got == expected
    assert all(dict(r.properties)["n"] == bytes(r.key).decode()[-1] for r in rows)
    assert len({r.offset for r in rows}) == len(rows)
    # more offsets than rows: a chunked message occupies one offset per chunk
    assert max(r.offset for r in rows) + 1 > len(rows)
