"""Producer and consumer state machines against a fake connection (no sockets)."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.client.batch_builder import single_entry
from magnetar.client.consumer import AsyncConsumer
from magnetar.client.enums import ConsumerType
from magnetar.client.errors import ExpectedOffsetMismatch, ProducerFenced, ProducerQueueIsFull, ServiceUnitNotReady
from magnetar.client.message_id import MessageId
from magnetar.client.producer import AsyncProducer
from magnetar.protocol import FrameDecoder, ServerError, Type, command, pb
from magnetar.protocol.frames import encode_payload_command, encode_send


class FakeConnection:
    """Records what the client writes; answers requests from a script."""

    def __init__(self, url="pulsar://fake:6650", replies=None):
        self.url = url
        self.max_message_size = 5 * 1024 * 1024
        self.closed = asyncio.get_running_loop().create_future()
        self.frames: list[pb.BaseCommand] = []
        self.requests: list[pb.BaseCommand] = []
        self.replies = replies or {}
        self.producers, self.consumers = {}, {}

    @property
    def is_open(self):
        return not self.closed.done()

    def attach_producer(self, pid, p):
        self.producers[pid] = p

    def detach_producer(self, pid, p=None):
        self.producers.pop(pid, None)

    def attach_consumer(self, cid, c):
        self.consumers[cid] = c

    def detach_consumer(self, cid, c=None):
        self.consumers.pop(cid, None)

    def send_raw_frame(self, frame: bytes):
        decoder = FrameDecoder()
        decoder.feed(frame)
        self.frames.append(decoder.next_frame().command)

    def send_command(self, cmd):
        self.frames.append(cmd)

    async def request(self, cmd, timeout):
        self.requests.append(cmd)
        return self.replies[cmd.type](cmd)

    def request_future(self, cmd, timeout):
        """Acks: recorded with the frames; answered from the script (an ACK
        with no script is confirmed; ``self.unanswered`` keeps them open)."""
        self.frames.append(cmd)
        fut = asyncio.get_running_loop().create_future()
        if getattr(self, "unanswered", None) is not None:
            self.unanswered.append(fut)
            return fut
        try:
            fut.set_result(self.replies[cmd.type](cmd) if cmd.type in self.replies else None)
        except Exception as exc:  # noqa: BLE001  (a scripted error reply)
            fut.set_exception(exc)
        return fut

    def drop(self):
        self.closed.set_result(None)
        for endpoint in list(self.producers.values()) + list(self.consumers.values()):
            endpoint.connection_lost(self)

    def sends(self):
        return [f.send for f in self.frames if f.type == Type.SEND]


class FakeClient:
    operation_timeout = 5.0
    backoff_initial = 0.001
    backoff_max = 0.01

    def __init__(self):
        self.connections: list[FakeConnection] = []
        self._ids = iter(range(10**6))

    def new_request_id(self):
        return next(self._ids)

    async def lookup(self, topic, timeout):
        return "pulsar://fake:6650"

    async def connection_to(self, url, timeout):
        return self.connections[-1]

    def _forget(self, link):
        pass


def producer_success(name="gen-1", epoch=None, last_seq=-1):
    def reply(cmd):
        return command(Type.PRODUCER_SUCCESS, request_id=cmd.producer.request_id, producer_name=name,
                       last_sequence_id=last_seq, topic_epoch=epoch)
    return {Type.PRODUCER: reply}


def receipt(seq, entry, producer_id=0):
    return command(Type.SEND_RECEIPT, producer_id=producer_id, sequence_id=seq,
                   message_id=pb.MessageIdData(ledgerId=1, entryId=entry)).send_receipt


async def make_producer(client, **options):
    producer = AsyncProducer(client, "persistent://public/default/t", 0, **options)
    await producer._create()
    return producer


async def test_producer_resends_pending_in_order_after_reconnect():
    client = FakeClient()
    first = FakeConnection(replies=producer_success(epoch=3))
    client.connections.append(first)
    producer = await make_producer(client, access_mode=1)
    assert producer.producer_name() == "gen-1" and producer.topic_epoch() == 3
    futures = [producer.send_nowait(b"%d" % i) for i in range(3)]
    assert [s.sequence_id for s in first.sends()] == [0, 1, 2]
    producer.on_send_receipt(receipt(0, 10))
    assert futures[0].result() == MessageId(1, 10)

    second = FakeConnection(replies=producer_success(name="ignored", epoch=3))
    client.connections.append(second)
    first.drop()
    for _ in range(20):
        await asyncio.sleep(0.005)
        if producer.is_connected():
            break
    again = second.requests[0].producer
    assert again.producer_id == 0 and again.producer_name == "gen-1" and again.topic_epoch == 3
    assert not again.user_provided_producer_name
    assert [s.sequence_id for s in second.sends()] == [1, 2]
    producer.on_send_receipt(receipt(1, 11))
    producer.on_send_receipt(receipt(2, 12))
    assert [f.result().entry_id() for f in futures] == [10, 11, 12]
    assert producer.last_sequence_id() == 2


async def test_producer_continues_after_brokers_last_sequence_id():
    client = FakeClient()
    client.connections.append(FakeConnection(replies=producer_success(last_seq=41)))
    producer = await make_producer(client, producer_name="named")
    producer.send_nowait(b"x")
    assert client.connections[0].sends()[0].sequence_id == 42


async def test_batch_is_one_send():
    client = FakeClient()
    conn = FakeConnection(replies=producer_success())
    client.connections.append(conn)
    producer = await make_producer(client, batching_enabled=True, batching_max_messages=5,
                                   batching_max_publish_delay_ms=10_000)
    futures = [producer.send_nowait(b"%d" % i) for i in range(7)]
    [send] = conn.sends()
    assert (send.sequence_id, send.num_messages, send.highest_sequence_id) == (0, 5, 4)
    producer._flush_batch()
    assert [(s.sequence_id, s.num_messages) for s in conn.sends()] == [(0, 5), (5, 2)]
    producer.on_send_receipt(receipt(0, 7))
    assert [f.result() for f in futures[:5]] == [MessageId(1, 7, i, -1) for i in range(5)]
    assert not futures[5].done()


async def test_expected_offset_mismatch_fails_only_that_send():
    client = FakeClient()
    conn = FakeConnection(replies=producer_success())
    client.connections.append(conn)
    producer = await make_producer(client)
    bad = producer.send_nowait(b"a", expected_offset=9)
    good = producer.send_nowait(b"b")
    assert conn.sends()[0].expected_offset == 9 and not conn.sends()[1].HasField("expected_offset")
    err = command(Type.SEND_ERROR, producer_id=0, sequence_id=0, error=ServerError.ExpectedOffsetMismatch,
                  message="no", next_offset=4).send_error
    producer.on_send_error(err)
    with pytest.raises(ExpectedOffsetMismatch) as info:
        bad.result()
    assert info.value.next_offset == 4
    producer.on_send_receipt(receipt(1, 3))
    assert good.result() == MessageId(1, 3)


async def test_fenced_producer_fails_everything():
    client = FakeClient()
    client.connections.append(FakeConnection(replies=producer_success()))
    producer = await make_producer(client)
    pending = producer.send_nowait(b"a")
    producer.on_send_error(command(Type.SEND_ERROR, producer_id=0, sequence_id=0,
                                   error=ServerError.ProducerFenced, message="fenced").send_error)
    with pytest.raises(ProducerFenced):
        pending.result()
    with pytest.raises(ProducerFenced):
        producer.send_nowait(b"b")


async def test_queue_limit():
    client = FakeClient()
    client.connections.append(FakeConnection(replies=producer_success()))
    producer = await make_producer(client, max_pending_messages=2)
    producer.send_nowait(b"a")
    producer.send_nowait(b"b")
    with pytest.raises(ProducerQueueIsFull):
        producer.send_nowait(b"c")


# -- consumer ----------------------------------------------------------------------

def subscribe_ok():
    return {Type.SUBSCRIBE: lambda cmd: command(Type.SUCCESS, request_id=cmd.subscribe.request_id)}


def message_frame(entry_id, payload=b"m", consumer_id=0):
    entry = single_entry("p", entry_id, payload)
    send = encode_send(command(Type.SEND, producer_id=1, sequence_id=entry_id), entry.metadata, entry.payload)
    decoder = FrameDecoder()
    decoder.feed(send)
    block = bytes(decoder.next_frame().block.raw)
    msg = command(Type.MESSAGE, consumer_id=consumer_id, message_id=pb.MessageIdData(ledgerId=1, entryId=entry_id))
    decoder = FrameDecoder()
    decoder.feed(b"".join(bytes(p) for p in encode_payload_command(msg, block)))
    frame = decoder.next_frame()
    return frame.command.message, frame


async def make_consumer(client, **options):
    consumer = AsyncConsumer(client, "persistent://public/default/t", "sub", 0, **options)
    await consumer._create()
    return consumer


def flows(conn):
    return [f.flow.messagePermits for f in conn.frames if f.type == Type.FLOW]


async def test_consumer_grants_permits_and_refills_at_half():
    client = FakeClient()
    conn = FakeConnection(replies=subscribe_ok())
    client.connections.append(conn)
    consumer = await make_consumer(client, receiver_queue_size=10)
    assert flows(conn) == [10]
    for i in range(10):
        consumer.on_message(*message_frame(i))
    for i in range(4):
        assert (await consumer.receive(100)).message_id() == MessageId(1, i)
    assert flows(conn) == [10]
    await consumer.receive(100)
    assert flows(conn) == [10, 5]


async def test_consumer_reconnect_drops_queue_and_resubscribes():
    client = FakeClient()
    first = FakeConnection(replies=subscribe_ok())
    client.connections.append(first)
    consumer = await make_consumer(client, receiver_queue_size=10, consumer_name="c")
    consumer.on_message(*message_frame(0))
    second = FakeConnection(replies=subscribe_ok())
    client.connections.append(second)
    first.drop()
    await consumer.wait_ready(1)
    again = second.requests[0].subscribe
    assert again.consumer_id == 0 and again.consumer_name == "c"
    assert flows(second) == [10]
    assert len(consumer._queue) == 0


async def test_acks_are_grouped():
    client = FakeClient()
    conn = FakeConnection(replies=subscribe_ok())
    client.connections.append(conn)
    consumer = await make_consumer(client, ack_group_time_ms=20)
    for i in range(3):
        consumer.on_message(*message_frame(i))
        consumer.acknowledge(await consumer.receive(100))
    assert not [f for f in conn.frames if f.type == Type.ACK]
    await asyncio.sleep(0.05)
    [ack] = [f.ack for f in conn.frames if f.type == Type.ACK]
    assert [m.entryId for m in ack.message_id] == [0, 1, 2] and ack.ack_type == pb.CommandAck.Individual


async def test_shared_negative_ack_asks_for_that_entry():
    client = FakeClient()
    conn = FakeConnection(replies=subscribe_ok())
    client.connections.append(conn)
    consumer = await make_consumer(client, consumer_type=ConsumerType.Shared, negative_ack_redelivery_delay_ms=10)
    consumer.on_message(*message_frame(5))
    consumer.negative_acknowledge(await consumer.receive(100))
    await asyncio.sleep(0.05)
    [redeliver] = [f.redeliverUnacknowledgedMessages for f in conn.frames
                   if f.type == Type.REDELIVER_UNACKNOWLEDGED_MESSAGES]
    assert [m.entryId for m in redeliver.message_ids] == [5]


async def test_reader_filters_before_start_and_resumes_after_last():
    client = FakeClient()
    first = FakeConnection(replies=subscribe_ok())
    client.connections.append(first)
    reader = await make_consumer(client, durable=False, start_message_id=MessageId(1, 3))
    sub = first.requests[0].subscribe
    assert not sub.durable and sub.start_message_id.entryId == 3
    for i in range(2, 6):
        reader.on_message(*message_frame(i))  # a broker may start at or before the start
    assert (await reader.receive(100)).message_id() == MessageId(1, 4)
    second = FakeConnection(replies=subscribe_ok())
    client.connections.append(second)
    first.drop()
    await reader.wait_ready(1)
    assert second.requests[0].subscribe.start_message_id.entryId == 4


def acked(conn):
    return [[m.entryId for m in f.ack.message_id] for f in conn.frames if f.type == Type.ACK]


async def wait_until(predicate, timeout=2.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


async def test_every_ack_carries_a_request_id_and_a_confirmed_one_is_not_sent_again():
    client = FakeClient()
    first = FakeConnection(replies=subscribe_ok())
    client.connections.append(first)
    consumer = await make_consumer(client, ack_group_time_ms=0)
    consumer.on_message(*message_frame(0))
    consumer.acknowledge(await consumer.receive(100))
    [ack] = [f.ack for f in first.frames if f.type == Type.ACK]
    assert ack.HasField("request_id")
    await wait_until(lambda: not consumer._acks.unconfirmed)
    second = FakeConnection(replies=subscribe_ok())
    client.connections.append(second)
    first.drop()
    await consumer.wait_ready(1)
    assert acked(second) == [] and flows(second) == [1000]


async def test_an_ack_the_broker_did_not_apply_is_sent_again():
    client = FakeClient()
    refused = []

    def ack_reply(cmd):
        if not refused:  # the first: its cursor had closed (the topic was moving)
            refused.append(cmd)
            raise ServiceUnitNotReady("cursor 'sub' is closed")
        return command(Type.ACK_RESPONSE, consumer_id=0, request_id=cmd.ack.request_id)

    conn = FakeConnection(replies={**subscribe_ok(), Type.ACK: ack_reply})
    client.connections.append(conn)
    consumer = await make_consumer(client, ack_group_time_ms=0)
    consumer.on_message(*message_frame(7))
    consumer.acknowledge(await consumer.receive(100))
    await wait_until(lambda: len(acked(conn)) == 2)
    assert acked(conn) == [[7], [7]]
    await wait_until(lambda: not consumer._acks.unconfirmed and not len(consumer._acks))


async def test_acks_a_moved_topic_did_not_confirm_go_first_on_the_new_owner():
    client = FakeClient()
    source = FakeConnection(replies=subscribe_ok())
    source.unanswered = []  # the old owner never answers them
    client.connections.append(source)
    consumer = await make_consumer(client, ack_group_time_ms=0)
    for i in range(2):
        consumer.on_message(*message_frame(i))
        consumer.acknowledge(await consumer.receive(100))
    assert acked(source) == [[0], [1]]
    destination = FakeConnection(url="pulsar://other:6650", replies=subscribe_ok())
    client.connections.append(destination)
    consumer.on_closed_by_broker(source, "pulsar://other:6650")  # the hand-over
    await consumer.wait_ready(1)
    # Before the FLOW that lets the new owner dispatch: nothing acked comes again.
    assert [f.type for f in destination.frames] == [Type.ACK, Type.FLOW]
    assert acked(destination) == [[0, 1]]
    for late in source.unanswered:  # the old owner's answers, late, change nothing
        late.set_exception(ServiceUnitNotReady("cursor 'sub' is closed"))
    await wait_until(lambda: not consumer._acks.unconfirmed)
    assert acked(destination) == [[0, 1]]
