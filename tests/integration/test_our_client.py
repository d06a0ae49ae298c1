"""Magnetar's own client against a real broker process."""
from __future__ import annotations

import asyncio
import time

import pytest

from magnetar.client import (AsyncClient, Client, CompressionType, ConsumerType, InitialPosition, MessageId,
                             ProducerAccessMode, Result)
from magnetar.client import errors
from tests.helpers import unique, wait_for


def receive_n(consumer, n: int, timeout_ms: int = 10000, ack: bool = True):
    out = []
    for _ in range(n):
        msg = consumer.receive(timeout_ms)
        if ack:
            consumer.acknowledge(msg)
        out.append(msg)
    return out


def assert_nothing_more(consumer, wait_ms: int = 300):
    with pytest.raises(errors.Timeout):
        consumer.receive(wait_ms)


@pytest.fixture
def client(broker):
    c = Client(broker.service_url, operation_timeout_seconds=15)
    yield c
    c.close()


# -- produce and consume -------------------------------------------------------

def test_produce_consume_round_trip(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="p1")
    assert producer.producer_name() == "p1" and producer.topic().endswith(topic)
    sent = [producer.send(f"m{i}".encode(), properties={"i": str(i)}, partition_key=f"key{i}",
                          ordering_key=b"ok", event_timestamp=1000 + i) for i in range(50)]
    assert sent == sorted(sent) and len(set(sent)) == 50
    assert producer.last_sequence_id() == 49
    got = receive_n(consumer, 50)
    assert [m.data() for m in got] == [f"m{i}".encode() for i in range(50)]
    assert [m.message_id() for m in got] == sent
    assert [m.properties() for m in got] == [{"i": str(i)} for i in range(50)]
    assert [m.partition_key() for m in got] == [f"key{i}" for i in range(50)]
    assert {m.ordering_key() for m in got} == {"ok"}
    assert [m.event_timestamp() for m in got] == [1000 + i for i in range(50)]
    assert [m.offset for m in got] == list(range(50))
    assert all(m.topic_name() == producer.topic() and m.publish_timestamp() > 0 for m in got)
    assert_nothing_more(consumer)


def test_batching_send_async(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                                      batching_max_publish_delay_ms=50, max_pending_messages=1000)
    results = []
    for i in range(250):
        producer.send_async(b"b%d" % i, lambda res, mid: results.append((res, mid)))
    producer.flush()
    wait_for(lambda: len(results) == 250, what="all callbacks")
    assert {res for res, _ in results} == {Result.Ok}
    ids = [mid for _, mid in results]
    assert ids == sorted(ids)
    assert len({mid.entry_key for mid in ids}) == 3  # 100 + 100 + 50
    got = receive_n(consumer, 250)
    assert [m.data() for m in got] == [b"b%d" % i for i in range(250)]
    assert [m.message_id() for m in got] == ids
    assert [m.offset for m in got] == list(range(250))


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.ZSTD])
@pytest.mark.parametrize("batching", [False, True])
def test_compression(client, codec, batching):
    topic = unique()
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, compression_type=codec, batching_enabled=batching)
    payloads = [(b"compressible %d " % i) * 50 for i in range(20)]
    for p in payloads:
        producer.send_async(p, None)
    producer.flush()
    assert [m.data() for m in receive_n(consumer, 20)] == payloads


def test_initial_position_earliest_and_latest(client):
    topic = unique()
    producer = client.create_producer(topic)
    producer.send(b"old")
    latest = client.subscribe(topic, "late")
    earliest = client.subscribe(topic, "early", initial_position=InitialPosition.Earliest)
    producer.send(b"new")
    assert [m.data() for m in receive_n(earliest, 2)] == [b"old", b"new"]
    assert [m.data() for m in receive_n(latest, 1)] == [b"new"]


def test_expected_offset(client):
    topic = unique()
    producer = client.create_producer(topic)
    producer.send(b"a", expected_offset=0)
    producer.send(b"b", expected_offset=1)
    with pytest.raises(errors.ExpectedOffsetMismatch) as info:
        producer.send(b"c", expected_offset=5)
    assert info.value.next_offset == 2
    producer.send(b"c", expected_offset=2)  # the producer carries on


def test_exclusive_producer_access(client):
    topic = unique()
    first = client.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
    with pytest.raises(errors.ProducerFenced):
        client.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
    with pytest.raises(errors.ProducerBusy):
        client.create_producer(topic)
    first.send(b"mine")
    fencer = client.create_producer(topic, access_mode=ProducerAccessMode.ExclusiveWithFencing)
    fencer.send(b"now mine")
    with pytest.raises((errors.ProducerFenced, errors.AlreadyClosed)):
        first.send(b"fenced?")


# -- subscriptions -----------------------------------------------------------------

async def test_shared_subscription_each_message_once(broker):
    client = AsyncClient(broker.service_url, operation_timeout_seconds=15)
    topic = unique()
    consumers = [await client.subscribe(topic, "shared", consumer_type=ConsumerType.Shared,
                                        receiver_queue_size=10) for _ in range(3)]
    producer = await client.create_producer(topic)
    total = 300
    for i in range(total):
        producer.send_nowait(b"%d" % i)
    await producer.flush()
    seen: list[list[bytes]] = [[], [], []]

    async def drain(i, consumer):
        while sum(map(len, seen)) < total:
            try:
                msg = await consumer.receive(200)
            except errors.Timeout:
                continue
            seen[i].append(msg.data())
            consumer.acknowledge(msg)
            await asyncio.sleep(0)  # let the others take their share

    await asyncio.wait_for(asyncio.gather(*(drain(i, c) for i, c in enumerate(consumers))), 30)
    everything = [d for part in seen for d in part]
    assert sorted(everything) == sorted(b"%d" % i for i in range(total))
    assert all(seen), "every consumer got messages"
    await client.close()


def test_failover_handover(client):
    topic = unique()
    a = client.subscribe(topic, "fo", consumer_type=ConsumerType.Failover, consumer_name="a")
    b = client.subscribe(topic, "fo", consumer_type=ConsumerType.Failover, consumer_name="b")
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(b"%d" % i)
    # exactly one of them is active and gets everything
    first = []
    for c in (a, b):
        try:
            first.append((c, receive_n(c, 10, timeout_ms=1000)))
        except errors.Timeout:
            pass
    assert len(first) == 1
    active, got = first[0]
    standby = b if active is a else a
    assert [m.data() for m in got] == [b"%d" % i for i in range(10)]
    active.close()
    for i in range(10, 15):
        producer.send(b"%d" % i)
    assert [m.data() for m in receive_n(standby, 5)] == [b"%d" % i for i in range(10, 15)]


def test_negative_ack_redelivery(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=200)
    producer = client.create_producer(topic)
    producer.send(b"again")
    msg = consumer.receive(5000)
    consumer.negative_acknowledge(msg)
    started = time.monotonic()
    again = consumer.receive(5000)
    assert time.monotonic() - started >= 0.15
    assert again.data() == b"again" and again.message_id() == msg.message_id()
    assert again.redelivery_count() >= 1
    consumer.acknowledge(again)
    assert_nothing_more(consumer, 600)


def test_negative_ack_on_exclusive_redelivers(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub", negative_ack_redelivery_delay_ms=100)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(b"%d" % i)
    msgs = receive_n(consumer, 3, ack=False)
    consumer.acknowledge(msgs[0])
    consumer.negative_acknowledge(msgs[1])
    consumer.acknowledge(msgs[2])
    again = consumer.receive(5000)
    assert again.message_id() == msgs[1].message_id()


def test_batch_member_acks_tracked_client_side(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=50)
    for i in range(4):
        producer.send_async(b"%d" % i, None)
    producer.flush()
    msgs = receive_n(consumer, 4, ack=False)
    assert len({m.message_id().entry_key for m in msgs}) == 1
    for i in (0, 1, 3):
        consumer.acknowledge(msgs[i])
    consumer.negative_acknowledge(msgs[2])
    again = consumer.receive(5000)
    assert again.data() == b"2"  # the whole entry came back; acked members were dropped
    consumer.acknowledge(again)
    assert_nothing_more(consumer, 500)
    consumer.close()
    # the entry was acked on the wire once its last member was
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
    assert_nothing_more(consumer, 500)


def test_cumulative_ack(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(b"%d" % i)
    msgs = receive_n(consumer, 10, ack=False)
    consumer.acknowledge_cumulative(msgs[5])
    consumer.close()
    consumer = client.subscribe(topic, "sub")
    assert [m.data() for m in receive_n(consumer, 4)] == [b"6", b"7", b"8", b"9"]
    shared = client.subscribe(topic, "shared", consumer_type=ConsumerType.Shared)
    with pytest.raises(errors.CumulativeAcknowledgementNotAllowedError):
        shared.acknowledge_cumulative(msgs[0])


def test_acks_survive_close_and_resubscribe(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(5):
        producer.send(b"%d" % i)
    receive_n(consumer, 3)
    consumer.close()
    consumer = client.subscribe(topic, "sub")
    assert [m.data() for m in receive_n(consumer, 2)] == [b"3", b"4"]


def test_unsubscribe(client):
    topic = unique()
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub")
    producer.send(b"x")
    consumer.unsubscribe()
    with pytest.raises(errors.AlreadyClosed):
        consumer.receive(100)
    consumer = client.subscribe(topic, "sub")  # a new subscription at latest
    assert_nothing_more(consumer)


# -- readers, seek, positions --------------------------------------------------------

def publish(client, topic, n, batching=False):
    producer = client.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=20)
    if batching:
        ids = []
        for i in range(n):
            producer.send_async(b"%d" % i, lambda r, mid: ids.append(mid))
        producer.flush()
        wait_for(lambda: len(ids) == n)
    else:
        ids = [producer.send(b"%d" % i) for i in range(n)]
    producer.close()
    return ids


def read_all(reader):
    """Everything up to the end of the topic, by has_message_available."""
    out = []
    while reader.has_message_available():
        out.append(reader.read_next(5000))
    return out


@pytest.mark.parametrize("batching", [False, True])
def test_readers(client, batching):
    topic = unique()
    ids = publish(client, topic, 10, batching)
    assert [m.data() for m in read_all(client.create_reader(topic, MessageId.earliest))] == \
        [b"%d" % i for i in range(10)]
    assert read_all(client.create_reader(topic, MessageId.latest)) == []
    after = read_all(client.create_reader(topic, ids[4]))
    assert [m.data() for m in after] == [b"%d" % i for i in range(5, 10)]
    inclusive = read_all(client.create_reader(topic, ids[4], start_message_id_inclusive=True))
    assert [m.data() for m in inclusive] == [b"%d" % i for i in range(4, 10)]
    restored = MessageId.deserialize(ids[7].serialize())
    assert [m.data() for m in read_all(client.create_reader(topic, restored))] == [b"8", b"9"]


def test_blocking_reader_reads_ahead_and_a_seek_drops_what_it_read_ahead(client):
    topic = unique()
    publish(client, topic, 900, True)  # publish() keeps at most 1000 in flight
    reader = client.create_reader(topic, MessageId.earliest, receiver_queue_size=300)
    first = [reader.read_next(5000) for _ in range(3)]
    assert [m.data() for m in first] == [b"0", b"1", b"2"]
    assert reader._ahead  # brought back with the first message, handed out from here
    reader.seek(MessageId.earliest)
    assert [m.data() for m in read_all(reader)] == [b"%d" % i for i in range(900)]
    reader.seek_offset(890)
    assert [m.offset for m in read_all(reader)] == list(range(890, 900))
    reader.close()


def test_has_message_available(client):
    topic = unique()
    producer = client.create_producer(topic)
    reader = client.create_reader(topic, MessageId.earliest)
    assert not reader.has_message_available()
    for i in range(3):
        producer.send(b"%d" % i)
    assert reader.has_message_available()
    for _ in range(3):
        reader.read_next(5000)
    assert not reader.has_message_available()
    latest = client.create_reader(topic, MessageId.latest)
    assert not latest.has_message_available()
    producer.send(b"3")
    assert latest.has_message_available()
    assert latest.read_next(5000).data() == b"3"
    assert not latest.has_message_available()


def test_get_last_message_id(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub")
    ids = publish(client, topic, 3)
    assert consumer.get_last_message_id() == ids[-1]
    batched = publish(client, topic, 5, batching=True)
    last = consumer.get_last_message_id()
    assert last.entry_key == batched[-1].entry_key


def test_consumer_seek(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub")
    ids = publish(client, topic, 10)
    receive_n(consumer, 10)
    consumer.seek(ids[3])
    assert [m.data() for m in receive_n(consumer, 7)] == [b"%d" % i for i in range(3, 10)]
    consumer.seek(MessageId.earliest)
    assert receive_n(consumer, 1)[0].data() == b"0"


def test_seek_by_time(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(b"%d" % i)
    time.sleep(0.05)  # publish times must differ for a time-based seek to mean something
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    for i in range(3, 6):
        producer.send(b"%d" % i)
    receive_n(consumer, 6)
    consumer.seek(cut)
    assert [m.data() for m in receive_n(consumer, 3)] == [b"3", b"4", b"5"]


def test_reader_seek(client):
    topic = unique()
    ids = publish(client, topic, 10)
    reader = client.create_reader(topic, MessageId.earliest)
    assert len(read_all(reader)) == 10
    reader.seek(ids[6])
    assert [m.data() for m in read_all(reader)] == [b"7", b"8", b"9"]
    reader.seek(MessageId.earliest)
    assert len(read_all(reader)) == 10


# -- failures and reconnects --------------------------------------------------------

def test_reconnect_after_broker_restart(broker, client):
    topic = unique()
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="survivor")
    reader = client.create_reader(topic, MessageId.earliest)
    for i in range(5):
        producer.send(b"%d" % i)
    receive_n(consumer, 5)
    assert len([reader.read_next(5000) for _ in range(5)]) == 5
    time.sleep(0.3)  # let the grouped acks reach the broker before it goes away
    broker.restart()
    for i in range(5, 10):
        producer.send(b"%d" % i)  # blocks until the producer is back
    assert producer.producer_name() == "survivor"
    assert [m.data() for m in receive_n(consumer, 5)] == [b"%d" % i for i in range(5, 10)]
    assert [reader.read_next(10000).data() for _ in range(5)] == [b"%d" % i for i in range(5, 10)]
    wait_for(consumer.is_connected)


def test_pending_sends_resent_after_crash(broker, client):
    topic = unique()
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"before")
    broker.kill()
    results = []
    for i in range(5):
        producer.send_async(b"%d" % i, lambda r, mid: results.append(r))
    broker.restart()
    producer.flush()
    wait_for(lambda: len(results) == 5, 30)
    assert results == [Result.Ok] * 5
    got = [m.data() for m in receive_n(consumer, 6, timeout_ms=20000)]
    assert got == [b"before"] + [b"%d" % i for i in range(5)]


async def test_wait_for_exclusive_producer_waits_its_turn(broker):
    client = AsyncClient(broker.service_url, operation_timeout_seconds=5)
    topic = unique()
    owner = await client.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
    waiting = asyncio.ensure_future(client.create_producer(topic, access_mode=ProducerAccessMode.WaitForExclusive))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await owner.send(b"first")
    await owner.close()
    successor = await asyncio.wait_for(waiting, 10)
    await successor.send(b"second")
    await client.close()


async def test_a_create_given_up_midway_leaves_no_producer_on_the_broker(broker):
    """A create cancelled while its PRODUCER is on the wire (a geo-replicator
    stopped in the middle of a reconnect) left the broker holding a producer
    nobody owned under that name: every later create with the name was
    refused for as long as the shared connection lived. The link now tells
    the broker to drop what it gave up on."""
    client = AsyncClient(broker.service_url, operation_timeout_seconds=10)
    await (await client.create_producer(unique())).close()  # the connection is up and idle
    conn = next(iter(client._connections.values())).result()
    topic = unique()
    creating = asyncio.ensure_future(client.create_producer(topic, producer_name="named"))
    deadline = time.monotonic() + 10
    while not conn._producers:  # attached, and its PRODUCER written, in one step
        assert time.monotonic() < deadline, "the create never registered"
        await asyncio.sleep(0)
    creating.cancel()
    with pytest.raises(asyncio.CancelledError):
        await creating
    producer = await client.create_producer(topic, producer_name="named")
    await producer.send(b"one writer")
    await client.close()


def test_ack_timeout_redelivers(client):
    topic = unique()
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared, unacked_messages_timeout_ms=300)
    producer = client.create_producer(topic)
    producer.send(b"x")
    first = consumer.receive(5000)
    again = consumer.receive(5000)
    assert again.message_id() == first.message_id()
    consumer.acknowledge(again)
    assert_nothing_more(consumer, 800)


def test_send_times_out_while_broker_is_down(broker):
    client = Client(broker.service_url, operation_timeout_seconds=5)
    producer = client.create_producer(unique(), send_timeout_millis=500)
    broker.kill()
    with pytest.raises(errors.Timeout):
        producer.send(b"lost")
    broker.restart()
    # The producer reconnects by itself (its backoff may outlast the 0.5 s
    # send timeout right after the restart): wait for that, then it sends.
    wait_for(producer.is_connected, timeout=15, what="the producer to reconnect")
    producer.send(b"after")
    client.close()


def test_unreachable_broker_fails_create_in_time():
    client = Client("pulsar://127.0.0.1:1", operation_timeout_seconds=1)
    started = time.monotonic()
    with pytest.raises((errors.ConnectError, errors.Timeout)):
        client.create_producer("t")
    assert time.monotonic() - started < 5
    client.close()


def test_closed_objects_refuse_work(client):
    topic = unique()
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub")
    producer.close()
    consumer.close()
    with pytest.raises(errors.AlreadyClosed):
        producer.send(b"x")
    with pytest.raises(errors.AlreadyClosed):
        consumer.receive(100)
