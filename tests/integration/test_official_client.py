"""The official pulsar-client (C++ core) against a real Magnetar broker process."""
from __future__ import annotations

import threading

import pulsar
import pytest

from tests.helpers import wait_for

N = 10_000


def _send_all(producer, count: int, body=lambda i: f"msg-{i}".encode(), **kwargs) -> list:
    """Send ``count`` messages asynchronously; return message ids in send order."""
    ids: list = [None] * count
    errors: list = []
    done = threading.Event()
    remaining = [count]
    lock = threading.Lock()

    def callback(i):
        def _cb(res, msg_id):
            with lock:
                if res != pulsar.Result.Ok:
                    errors.append(res)
                ids[i] = msg_id
                remaining[0] -= 1
                if remaining[0] == 0:
                    done.set()
        return _cb

    for i in range(count):
        producer.send_async(body(i), callback(i), **kwargs)
    producer.flush()
    assert done.wait(60), f"{remaining[0]} receipts missing"
    assert not errors, errors[:5]
    return ids


def _producer(client, topic, **kwargs):
    """A producer that blocks instead of failing when its pending queue is full."""
    return client.create_producer(topic, block_if_queue_full=True, **kwargs)


def _receive_all(consumer, count: int, ack: bool = True) -> list:
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=10_000)
        out.append(msg)
        if ack:
            consumer.acknowledge(msg)
    return out


@pytest.mark.parametrize(
    "batching,compression",
    [
        (False, pulsar.CompressionType.NONE),
        (True, pulsar.CompressionType.NONE),
        (True, pulsar.CompressionType.LZ4),
        (True, pulsar.CompressionType.ZSTD),
    ],
)
def test_ten_thousand_messages_round_trip(pulsar_client, batching, compression):
    topic = f"roundtrip-{batching}-{compression}"
    consumer = pulsar_client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = _producer(pulsar_client, 
        topic, batching_enabled=batching, compression_type=compression, batching_max_messages=500,
        batching_max_publish_delay_ms=5,
    )
    ids = _send_all(producer, N)
    assert len(set(str(i) for i in ids)) == N
    msgs = _receive_all(consumer, N)
    assert [m.data() for m in msgs] == [f"msg-{i}".encode() for i in range(N)]
    if batching:
        # Entries really were batches: fewer distinct (ledger, entry) than messages.
        assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in msgs}) < N
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=200)


def test_keys_and_properties_round_trip(pulsar_client):
    consumer = pulsar_client.subscribe("props", "sub")
    producer = _producer(pulsar_client, "props")
    producer.send(b"a", properties={"k1": "v1", "x": "y"}, partition_key="key-a", event_timestamp=1234)
    producer.send(b"b", partition_key="key-b")
    first, second = _receive_all(consumer, 2)
    assert first.data() == b"a"
    assert first.properties() == {"k1": "v1", "x": "y"}
    assert first.partition_key() == "key-a"
    assert first.event_timestamp() == 1234
    assert first.publish_timestamp() > 0
    assert second.partition_key() == "key-b"
    assert first.topic_name() == "persistent://public/default/props"


def test_shared_subscription_delivers_each_message_once(pulsar_client):
    topic = "shared-three"
    consumers = [
        pulsar_client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                receiver_queue_size=10, consumer_name=f"c{i}")
        for i in range(3)
    ]
    producer = _producer(pulsar_client, topic)
    total = 300
    _send_all(producer, total)
    seen: list[bytes] = []
    per_consumer = [0, 0, 0]
    lock = threading.Lock()

    def drain(idx, consumer):
        while True:
            try:
                msg = consumer.receive(timeout_millis=1500)
            except pulsar.Timeout:
                return
            with lock:
                seen.append(msg.data())
                per_consumer[idx] += 1
            consumer.acknowledge(msg)

    threads = [threading.Thread(target=drain, args=(i, c)) for i, c in enumerate(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(seen) == sorted(f"msg-{i}".encode() for i in range(total))
    assert all(n > 0 for n in per_consumer), per_consumer


def test_failover_hands_over_when_active_consumer_closes(pulsar_client):
    topic = "failover"
    c1 = pulsar_client.subscribe(topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a")
    c2 = pulsar_client.subscribe(topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b")
    producer = _producer(pulsar_client, topic)
    _send_all(producer, 10)
    # "a" sorts first, so it is the active consumer and gets everything.
    got = _receive_all(c1, 5)
    assert [m.data() for m in got] == [f"msg-{i}".encode() for i in range(5)]
    with pytest.raises(pulsar.Timeout):
        c2.receive(timeout_millis=300)
    c1.close()
    rest = _receive_all(c2, 5)
    assert [m.data() for m in rest] == [f"msg-{i}".encode() for i in range(5, 10)]


def test_negative_ack_redelivers(pulsar_client):
    consumer = pulsar_client.subscribe("nack", "sub", consumer_type=pulsar.ConsumerType.Shared,
                                       negative_ack_redelivery_delay_ms=100)
    producer = _producer(pulsar_client, "nack")
    producer.send(b"retry-me")
    msg = consumer.receive(timeout_millis=5000)
    consumer.negative_acknowledge(msg)
    again = consumer.receive(timeout_millis=5000)
    assert again.data() == b"retry-me"
    assert again.redelivery_count() >= 1
    consumer.acknowledge(again)


def test_cumulative_ack_survives_reconnect(pulsar_client):
    topic = "cumulative"
    consumer = pulsar_client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = _producer(pulsar_client, topic)
    _send_all(producer, 10)
    msgs = _receive_all(consumer, 6, ack=False)
    consumer.acknowledge_cumulative(msgs[-1])
    consumer.close()
    consumer = pulsar_client.subscribe(topic, "sub")
    rest = _receive_all(consumer, 4)
    assert [m.data() for m in rest] == [f"msg-{i}".encode() for i in range(6, 10)]


def test_readers_from_earliest_and_from_message_id(pulsar_client):
    topic = "readers"
    producer = _producer(pulsar_client, topic)
    ids = _send_all(producer, 20)
    reader = pulsar_client.create_reader(topic, pulsar.MessageId.earliest)
    assert [reader.read_next(5000).data() for _ in range(20)] == [f"msg-{i}".encode() for i in range(20)]
    reader.close()
    reader = pulsar_client.create_reader(topic, ids[9])
    assert reader.read_next(5000).data() == b"msg-10"
    reader.close()
    reader = pulsar_client.create_reader(topic, ids[9], start_message_id_inclusive=True)
    assert reader.read_next(5000).data() == b"msg-9"
    reader.close()


def test_reader_from_batched_message_id(pulsar_client):
    topic = "readers-batched"
    producer = _producer(pulsar_client, topic, batching_enabled=True, batching_max_messages=10,
                                             batching_max_publish_delay_ms=50)
    ids = _send_all(producer, 30)
    reader = pulsar_client.create_reader(topic, ids[14])
    assert reader.read_next(5000).data() == b"msg-15"


def test_seek_by_message_id_and_time(pulsar_client):
    topic = "seek"
    producer = _producer(pulsar_client, topic)
    ids = _send_all(producer, 10)
    consumer = pulsar_client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    _receive_all(consumer, 10)
    consumer.seek(ids[3])
    msg = consumer.receive(timeout_millis=10_000)
    # The broker redelivers from the entry sought; the C++ client then skips
    # the sought message itself unless start_message_id_inclusive is set.
    assert msg.data() == b"msg-4"
    consumer.seek(0)  # by publish time: everything
    assert consumer.receive(timeout_millis=10_000).data() == b"msg-0"


def test_has_message_available_and_last_message_id(pulsar_client):
    topic = "has-available"
    producer = _producer(pulsar_client, topic)
    reader = pulsar_client.create_reader(topic, pulsar.MessageId.earliest)
    assert not reader.has_message_available()
    ids = _send_all(producer, 3)
    wait_for(reader.has_message_available, what="has_message_available")
    for _ in range(3):
        reader.read_next(5000)
    assert not reader.has_message_available()
    consumer = pulsar_client.subscribe(topic, "sub")
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())


def test_unsubscribe_removes_the_subscription(pulsar_client):
    topic = "unsub"
    consumer = pulsar_client.subscribe(topic, "gone")
    consumer.unsubscribe()
    producer = _producer(pulsar_client, topic)
    producer.send(b"x")
    # A new subscription named like the old one starts at Latest, not at the old cursor.
    consumer = pulsar_client.subscribe(topic, "gone")
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)


def test_cumulative_ack_inside_the_first_batch_of_a_ledger_acks_nothing_of_it(broker):
    """Acknowledging cumulatively up to a message in the middle of a batch,
    the client acks the entry before that batch; for entry 0 of a ledger that
    is entry -1, sent as 2^64-1. Read unsigned, it acknowledged the whole
    ledger and the consumer never saw the rest (a flaky kill -9 test found it)."""
    topic = "ack-first-batch-of-a-ledger"
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"first ledger")
    client.close()
    broker.restart()  # a new ledger: the batches below are its entries 0 and 1
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=5,
                                      batching_max_publish_delay_ms=60_000)
    bodies = [b"batch-%d" % i for i in range(10)]
    _send_all(producer, 10, body=lambda i: bodies[i])
    assert consumer.receive(timeout_millis=5000).data() == b"first ledger"
    first = consumer.receive(timeout_millis=5000)
    assert first.data() == b"batch-0" and first.message_id().entry_id() == 0
    consumer.acknowledge_cumulative(first)
    consumer.close()  # flushes the grouped ack: (ledger, -1)

    consumer = client.subscribe(topic, "sub")
    # The batch comes back whole (it was not fully acknowledged), then the next one.
    got = [consumer.receive(timeout_millis=5000).data() for _ in range(10)]
    assert got == bodies
    client.close()


def test_messages_of_a_partitioned_topic_carry_their_partition_in_the_message_id(broker, pulsar_client):
    import urllib.request

    req = urllib.request.Request(f"{broker.admin_url}/admin/v2/persistent/public/default/parts-ids/partitions",
                                 data=b"3", method="PUT", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
    topic = "persistent://public/default/parts-ids"
    consumer = pulsar_client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    for i in range(12):
        producer.send(f"m{i}".encode(), partition_key=f"k{i}")
    seen = set()
    for _ in range(12):
        msg = consumer.receive(timeout_millis=10_000)
        partition = int(msg.topic_name().rsplit("-partition-", 1)[1])
        assert msg.message_id().partition() == partition
        seen.add(partition)
        consumer.acknowledge(msg)
    assert len(seen) >= 2


def test_an_http_service_url_works_end_to_end(broker):
    client = pulsar.Client(broker.admin_url, operation_timeout_seconds=10)  # http://: HTTP lookups
    try:
        producer = client.create_producer("persistent://public/default/via-http")
        producer.send(b"over http lookup")
        consumer = client.subscribe("persistent://public/default/via-http", "s",
                                    initial_position=pulsar.InitialPosition.Earliest)
        assert consumer.receive(timeout_millis=10_000).data() == b"over http lookup"
    finally:
        client.close()


def test_a_cumulative_ack_inside_a_batch_keeps_the_rest_of_the_batch(broker):
    """With batch_index_ack_enabled, a cumulative acknowledgement of the 5th
    message of a 10-message batch acknowledges the first five, and only
    them: the other five come back (after a broker restart too). Before, the
    whole entry was acknowledged and the other five were lost."""
    import pulsar

    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    topic = "persistent://public/default/batch-cumulative"
    try:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                          batching_max_publish_delay_ms=1000)
        producer.send(b"before")  # an earlier entry, acknowledged by the same cumulative ack
        consumer = client.subscribe(topic, "s", batch_index_ack_enabled=True,
                                    initial_position=pulsar.InitialPosition.Earliest)
        for i in range(10):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        received = [consumer.receive(10_000) for _ in range(11)]
        assert [m.data() for m in received[1:]] == [f"m{i}".encode() for i in range(10)]
        consumer.acknowledge_cumulative(received[5])  # "before", m0..m4
        consumer.close()
        client.close()
        broker.restart()
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
        again = client.subscribe(topic, "s", batch_index_ack_enabled=True)
        rest = []
        while True:
            try:
                rest.append(again.receive(2000).data())
            except pulsar.Timeout:
                break
        assert rest == [f"m{i}".encode() for i in range(5, 10)]
    finally:
        client.close()


def test_batch_index_acknowledgement_survives_a_reconnect(broker):
    """With batch_index_ack_enabled, messages of a batch acknowledged one by
    one are not delivered again when the rest of their batch is, even after
    a broker restart."""
    import pulsar

    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    topic = "persistent://public/default/batch-index-ack"
    try:
        consumer = client.subscribe(topic, "s", batch_index_ack_enabled=True)
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                          batching_max_publish_delay_ms=1000)
        for i in range(10):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        received = [consumer.receive(10_000) for _ in range(10)]
        assert [m.data().decode() for m in received] == [f"m{i}" for i in range(10)]
        assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in received}) == 1  # one batch
        for msg in received[:4]:
            consumer.acknowledge(msg)
        consumer.close()  # flushes the grouped acknowledgements
        client.close()
        broker.restart()  # the partial acknowledgement is stored with the cursor
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
        again = client.subscribe(topic, "s", batch_index_ack_enabled=True)
        rest = []
        while True:
            try:
                msg = again.receive(2000)
            except pulsar.Timeout:
                break
            rest.append(msg.data().decode())
            again.acknowledge(msg)
        assert rest == [f"m{i}" for i in range(4, 10)]
        again.close()
        # Every message acknowledged: the entry is gone from the backlog.
        third = client.subscribe(topic, "s", batch_index_ack_enabled=True)
        with pytest.raises(pulsar.Timeout):
            third.receive(1000)
    finally:
        client.close()
