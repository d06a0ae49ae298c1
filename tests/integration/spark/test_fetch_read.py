"""A task's read (``read_range``: bulk fetches decoded in one call per
response) returns, in order, the rows of what the official client wrote,
for every shape of entry, and reports what retention removed.

Each read is compared row by row, in the order the task yields them, with
the client's message path (a reader's messages turned into rows): a reader
that drops, repeats or reorders a row fails. No Spark session: this is the
code a Spark task runs (the Spark tests run it through Spark too).
"""
from __future__ import annotations

import pulsar
import pyarrow as pa
import pytest

from magnetar.client import Client, MessageId
from pyspark_magnetar.errors import DataLossError
from pyspark_magnetar.offsets import TopicPartition
from pyspark_magnetar.options import read_options
from pyspark_magnetar.ranges import OffsetRange, read_range
from pyspark_magnetar.schema import messages_to_batch
from tests.helpers import shared_broker, shared_client, unique, wait_for

# Small ledgers, so a read spans several and retention has ledgers to trim.
CONFIG = """
[storage]
max_entries_per_ledger = 40
"""
broker = shared_broker(CONFIG)
client = shared_client()

SHAPES = {
    "unbatched": dict(batching_enabled=False),
    "batched": dict(batching_enabled=True, batching_max_messages=37, batching_max_publish_delay_ms=50),
    "lz4-keys-properties": dict(batching_enabled=True, batching_max_messages=37, batching_max_publish_delay_ms=50,
                                compression_type=pulsar.CompressionType.LZ4),
    "zstd-unbatched": dict(batching_enabled=False, compression_type=pulsar.CompressionType.ZSTD),
    # Raw snappy, as the official clients write it (decoded through pyarrow's codec).
    "snappy-keys-properties": dict(batching_enabled=True, batching_max_messages=37, batching_max_publish_delay_ms=50,
                                   compression_type=pulsar.CompressionType.SNAPPY),
    "snappy-unbatched": dict(batching_enabled=False, compression_type=pulsar.CompressionType.SNAPPY),
}


def _value(i: int) -> bytes:
    return f"m{i}-".encode() + b"x" * (i % 90)


def _write(client, topic: str, count: int, shape: dict) -> None:
    producer = client.create_producer(topic, block_if_queue_full=True, max_pending_messages=500, **shape)
    for i in range(count):
        kwargs = {}
        if i % 3:
            kwargs["partition_key"] = f"k{i % 7}"
        if i % 4 == 0:
            kwargs["properties"] = {"i": str(i), "even": str(i % 2 == 0)}
        if i % 5 == 0:
            kwargs["event_timestamp"] = 1_700_000_000_000 + i
        producer.send_async(_value(i), None, **kwargs)
    producer.flush()
    producer.close()


def _message_rows(service_url: str, topic: str, first: int, count: int) -> list[dict]:
    """Rows ``first..first+count-1`` through the client's message path."""
    c = Client(service_url)
    try:
        reader = c.create_reader(topic, MessageId.earliest)
        messages = [m for m in (reader.read_next(10_000) for _ in range(first + count)) if m.offset >= first]
        reader.close()
    finally:
        c.close()
    return messages_to_batch(TopicPartition(topic), messages).to_pylist()


def _task_rows(service_url: str, topic: str, start: int, end: int, **options) -> list[dict]:
    opts = read_options({"service_url": service_url, "topic": topic, "pollTimeoutMs": "10000", **options},
                        streaming=False)
    batches = list(read_range(OffsetRange(TopicPartition(topic), start, end), opts))
    return pa.Table.from_batches(batches).to_pylist() if batches else []


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_reads_as_the_client_wrote_it(broker, client, shape):
    topic = f"persistent://public/default/{unique('fetch-' + shape)}"
    _write(client, topic, 600, SHAPES[shape])
    want = _message_rows(broker.service_url, topic, 0, 600)
    assert [r["offset"] for r in want] == list(range(600))
    assert [r["value"] for r in want] == [_value(i) for i in range(600)]
    assert _task_rows(broker.service_url, topic, 0, 600) == want
    # A range that starts and ends inside entries: exactly its rows.
    assert _task_rows(broker.service_url, topic, 101, 555) == want[101:555]


def test_offsets_retention_removed_are_data_loss_and_the_rest_reads(broker, client):
    topic = f"persistent://public/default/{unique('fetch-trimmed')}"
    consumer = client.subscribe(topic, "drain", initial_position=pulsar.InitialPosition.Earliest)
    _write(client, topic, 300, SHAPES["unbatched"])
    for _ in range(300):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    consumer.close()
    c = Client(broker.service_url)
    try:
        def first_kept() -> int:
            reader = c.create_reader(topic, MessageId.earliest)
            try:
                return reader.read_next(10_000).offset
            finally:
                reader.close()
        wait_for(lambda: first_kept() > 0, timeout=30, interval=0.2, what="consumed ledgers trimmed")
        first = first_kept()
    finally:
        c.close()
    assert 0 < first < 300
    with pytest.raises(DataLossError, match=f"offsets 0..{first - 1} are missing"):
        _task_rows(broker.service_url, topic, 0, 300)
    got = _task_rows(broker.service_url, topic, 0, 300, failOnDataLoss="false")
    assert [r["offset"] for r in got] == list(range(first, 300))
    assert [r["value"] for r in got] == [_value(i) for i in range(first, 300)]


def test_a_record_batch_is_one_response_and_takes_a_short_tail(broker, client):
    """Spark pays per record batch: a batch never spans two fetch responses,
    and a response up to half again as long as the batch size is one batch
    (not the size and a small tail). Responses here hold about five
    entries of 10 messages; the batch size is 40 rows."""
    from pyspark_magnetar.fetch_scan import FetchScanner, Rows
    from pyspark_magnetar.session import BrokerSession

    topic = f"persistent://public/default/{unique('fetch-sizes')}"
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=200, block_if_queue_full=True)
    for i in range(500):
        producer.send_async(b"%05d" % i + b"x" * 95, None)
    producer.flush()
    producer.close()
    want = _message_rows(broker.service_url, topic, 0, 500)
    rows: list[dict] = []
    sizes: list[int] = []
    with BrokerSession(broker.service_url, 30) as session:
        scanner = session.run(FetchScanner.open(session.client, TopicPartition(topic), 0, 500, poll_timeout_ms=30_000,
                                                fail_on_data_loss=True, max_bytes=5 * 1100))
        try:
            while pieces := session.run(scanner.next_entries(40)):
                assert sum(isinstance(p, Rows) for p in pieces) == 1, "one decode, one batch, per call"
                for batch in scanner.to_batches(pieces):
                    rows += batch.to_pylist()
                    sizes.append(batch.num_rows)
            fetches = scanner.fetches
        finally:
            session.run(scanner.close())
    assert rows == want
    assert len(sizes) <= fetches and max(sizes) <= 60 + 10, (sizes, fetches)
