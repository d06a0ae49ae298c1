"""Our client and the official pulsar-client on the same topics: same bytes on the wire."""
from __future__ import annotations


import pulsar
import pytest

from magnetar.client import Client, CompressionType, InitialPosition, MessageId
from tests.helpers import unique


@pytest.fixture
def ours(broker):
    c = Client(broker.service_url, operation_timeout_seconds=15)
    yield c
    c.close()


@pytest.mark.parametrize("batching", [False, True])
def test_official_consumer_reads_our_messages(ours, pulsar_client, batching):
    topic = unique("interop")
    theirs = pulsar_client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = ours.create_producer(topic, batching_enabled=batching, compression_type=CompressionType.LZ4)
    for i in range(20):
        producer.send_async(b"m%d" % i, None, properties={"i": str(i)}, partition_key=f"k{i}")
    producer.flush()
    for i in range(20):
        msg = theirs.receive(10000)
        assert msg.data() == b"m%d" % i
        assert msg.properties() == {"i": str(i)} and msg.partition_key() == f"k{i}"
        theirs.acknowledge(msg)


@pytest.mark.parametrize("batching", [False, True])
def test_we_read_official_messages(ours, pulsar_client, batching):
    topic = unique("interop")
    consumer = ours.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
    producer = pulsar_client.create_producer(topic, batching_enabled=batching,
                                             compression_type=pulsar.CompressionType.ZSTD)
    for i in range(20):
        producer.send_async(b"m%d" % i, None, properties={"i": str(i)}, partition_key=f"k{i}", event_timestamp=5 + i)
    producer.flush()
    ids = []
    for i in range(20):
        msg = consumer.receive(10000)
        assert msg.data() == b"m%d" % i and msg.properties() == {"i": str(i)}
        assert msg.partition_key() == f"k{i}" and msg.event_timestamp() == 5 + i
        assert msg.offset == i
        consumer.acknowledge(msg)
        ids.append(msg.message_id())
    # message ids serialize the same way in both clients
    theirs = pulsar.MessageId.deserialize(ids[7].serialize())
    assert (theirs.ledger_id(), theirs.entry_id(), theirs.batch_index()) == (
        ids[7].ledger_id(), ids[7].entry_id(), ids[7].batch_index())
    reader = ours.create_reader(topic, MessageId.deserialize(theirs.serialize()), start_message_id_inclusive=True)
    assert reader.read_next(5000).data() == b"m7"
