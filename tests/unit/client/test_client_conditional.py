"""Conditional publish against a fake connection: offset epochs, batching, receipts' offsets."""
from __future__ import annotations

import pytest

from magnetar.client.errors import ExpectedOffsetMismatch
from magnetar.client.message_id import MessageId
from magnetar.protocol import ServerError, Type, command, pb

from .test_client_links import FakeClient, FakeConnection, make_producer, producer_success


def mismatch(seq, next_offset, epoch):
    return command(Type.SEND_ERROR, producer_id=0, sequence_id=seq, error=ServerError.ExpectedOffsetMismatch,
                   message="no", next_offset=next_offset, offset_epoch=epoch).send_error


def receipt(seq, entry, offset):
    return command(Type.SEND_RECEIPT, producer_id=0, sequence_id=seq, offset=offset,
                   message_id=pb.MessageIdData(ledgerId=1, entryId=entry)).send_receipt


async def test_refusal_fails_pipelined_conditional_sends_and_moves_the_epoch():
    client = FakeClient()
    conn = FakeConnection(replies=producer_success())
    client.connections.append(conn)
    producer = await make_producer(client)
    a = producer.send_nowait(b"a", expected_offset=3)
    b = producer.send_nowait(b"b")  # unconditional: lands whatever happens to a
    c = producer.send_nowait(b"c", expected_offset=4)
    assert [s.offset_epoch for s in conn.sends() if s.HasField("expected_offset")] == [0, 0]
    producer.on_send_error(mismatch(0, next_offset=7, epoch=1))
    assert a.exception().next_offset == 7
    assert isinstance(c.exception(), ExpectedOffsetMismatch)
    assert c.exception().next_offset is None  # b may land first: the upcoming offset is unknown
    assert not b.done()
    assert producer.offset_epoch == 1
    producer.on_send_error(mismatch(2, next_offset=7, epoch=1))  # c's own refusal: already handled
    producer.on_send_receipt(receipt(1, 5, offset=7))
    assert b.result().offset == 7
    producer.send_nowait(b"d", expected_offset=8)
    last = conn.sends()[-1]
    assert (last.expected_offset, last.offset_epoch) == (8, 1)


async def test_chained_failures_report_the_upcoming_offset_when_nothing_came_between():
    client = FakeClient()
    conn = FakeConnection(replies=producer_success())
    client.connections.append(conn)
    producer = await make_producer(client)
    futures = [producer.send_nowait(b"%d" % i, expected_offset=i) for i in range(3)]
    producer.on_send_error(mismatch(0, next_offset=9, epoch=1))
    assert [f.exception().next_offset for f in futures] == [9, 9, 9]


async def test_reconnect_starts_the_epoch_again_and_replans_pending_sends():
    client = FakeClient()
    first = FakeConnection(replies=producer_success())
    client.connections.append(first)
    producer = await make_producer(client)
    producer.send_nowait(b"a", expected_offset=0)
    producer.on_send_error(mismatch(0, next_offset=1, epoch=1))
    pending = producer.send_nowait(b"b", expected_offset=1)
    assert first.sends()[-1].offset_epoch == 1
    second = FakeConnection(replies=producer_success())
    client.connections.append(second)
    first.drop()
    await producer.wait_ready(1)
    [resent] = second.sends()
    assert (resent.expected_offset, resent.offset_epoch) == (1, 0)  # the new broker-side producer is at 0
    assert producer.offset_epoch == 0
    producer.on_send_receipt(receipt(1, 0, offset=1))
    assert pending.result().offset == 1


async def test_consecutive_conditional_messages_share_a_batch():
    client = FakeClient()
    conn = FakeConnection(replies=producer_success())
    client.connections.append(conn)
    producer = await make_producer(client, batching_enabled=True, batching_max_messages=100,
                                   batching_max_publish_delay_ms=10_000)
    batch = [producer.send_nowait(b"%d" % i, expected_offset=10 + i) for i in range(3)]
    producer.send_nowait(b"x", expected_offset=20)  # not the next offset: a batch of its own
    producer.send_nowait(b"y")  # unconditional: never joins a conditional batch
    producer._flush_batch()
    sends = conn.sends()
    assert [(s.HasField("expected_offset") and s.expected_offset, s.num_messages) for s in sends] == [
        (10, 3), (20, 1), (False, 1)]
    producer.on_send_receipt(receipt(0, 4, offset=10))
    assert [f.result() for f in batch] == [MessageId(1, 4, i, -1) for i in range(3)]
    assert [f.result().offset for f in batch] == [10, 11, 12]


async def test_a_refused_conditional_batch_fails_every_member():
    client = FakeClient()
    conn = FakeConnection(replies=producer_success())
    client.connections.append(conn)
    producer = await make_producer(client, batching_enabled=True, batching_max_publish_delay_ms=10_000)
    batch = [producer.send_nowait(b"%d" % i, expected_offset=i) for i in range(5)]
    producer._flush_batch()
    producer.on_send_error(mismatch(0, next_offset=2, epoch=1))
    assert [f.exception().next_offset for f in batch] == [2] * 5


def test_negative_expected_offset_is_refused_at_once():
    import asyncio

    async def run():
        client = FakeClient()
        client.connections.append(FakeConnection(replies=producer_success()))
        producer = await make_producer(client)
        with pytest.raises(Exception, match="expected_offset"):
            producer.send_nowait(b"a", expected_offset=-1)
    asyncio.run(run())


def test_message_id_offset_is_not_part_of_identity():
    assert MessageId(1, 2, offset=5) == MessageId(1, 2) and hash(MessageId(1, 2, offset=5)) == hash(MessageId(1, 2))
    assert MessageId(1, 2, offset=5).offset == 5 and MessageId.deserialize(MessageId(1, 2).serialize()).offset is None
