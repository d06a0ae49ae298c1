"""Idempotent producer against a fake connection: leases, sequence numbers, resends, fencing."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.client.errors import (ExpectedOffsetMismatch, InvalidConfiguration, NotAllowedError,
                                    OutOfOrderSequence, ProducerFenced, Timeout)
from magnetar.client.producer import AsyncProducer
from magnetar.protocol import ServerError, Type, command, pb

from .test_client_links import FakeClient, FakeConnection, producer_success

TOPIC = "persistent://public/default/t"


def lease_reply(pid=7, generation=100, next_sequence=0, refuse=None):
    """A LEASE_PID handler: grants (pid, generation) or refuses with ``refuse``."""
    def reply(cmd):
        lease = pb.PidLease(topic=cmd.leasePid.topic)
        if refuse is not None:
            lease.error, lease.message = refuse, "refused"
        else:
            lease.pid, lease.generation, lease.sequence_number, lease.expire_ms = pid, generation, next_sequence, 1
        return command(Type.LEASE_PID_RESPONSE, request_id=cmd.leasePid.request_id, leases=[lease])
    return {Type.LEASE_PID: reply}


def connection(**lease):
    return FakeConnection(replies={**producer_success(), **lease_reply(**lease)})


async def idempotent_producer(client, **options):
    producer = AsyncProducer(client, TOPIC, 0, idempotent=True, **options)
    await producer._create()
    return producer


def stamps(conn):
    """(pulsar sequence id, pid, generation, magnetar sequence, messages) of every SEND written."""
    out = []
    for frame in conn.raw_sends:
        md = frame.block.metadata
        out.append((frame.command.send.sequence_id, md.magnetar_pid, md.magnetar_generation,
                    md.magnetar_sequence, max(1, frame.command.send.num_messages)))
    return out


def receipt(seq, entry, offset=None):
    return command(Type.SEND_RECEIPT, producer_id=0, sequence_id=seq, offset=offset,
                   message_id=pb.MessageIdData(ledgerId=1, entryId=entry)).send_receipt


def send_error(seq, code, **fields):
    return command(Type.SEND_ERROR, producer_id=0, sequence_id=seq, error=code, message="no", **fields).send_error


@pytest.fixture(autouse=True)
def keep_frames(monkeypatch):
    """Keep the whole SEND frames (with their metadata), not just the commands."""
    from magnetar.protocol import FrameDecoder

    original = FakeConnection.send_raw_frame

    def send_raw_frame(self, frame):
        original(self, frame)
        decoder = FrameDecoder()
        decoder.feed(frame)
        if not hasattr(self, "raw_sends"):
            self.raw_sends = []
        self.raw_sends.append(decoder.next_frame())

    monkeypatch.setattr(FakeConnection, "send_raw_frame", send_raw_frame)


async def test_registration_leases_a_new_pid_and_declares_idempotence():
    client = FakeClient()
    conn = connection(pid=7, generation=100)
    client.connections.append(conn)
    producer = await idempotent_producer(client, pid_lease_ms=60_000)
    lease, register = conn.requests
    assert lease.type == Type.LEASE_PID and lease.leasePid.pid == -1 and not lease.leasePid.HasField("generation")
    assert lease.leasePid.topic == TOPIC and lease.leasePid.expire_ms == 60_000
    assert {(kv.key, kv.value) for kv in register.producer.metadata} == {("magnetar.idempotent", "true")}
    assert (producer.pid, producer.generation, producer.next_sequence) == (7, 100, 0)


async def test_sequence_numbers_are_contiguous_across_batches_and_singles():
    client = FakeClient()
    conn = connection(pid=7, generation=100)
    client.connections.append(conn)
    producer = await idempotent_producer(client, batching_enabled=True, batching_max_messages=3,
                                         batching_max_publish_delay_ms=10_000)
    for i in range(7):
        producer.send_nowait(b"%d" % i)
    producer._flush_batch()
    assert stamps(conn) == [(0, 7, 100, 0, 3), (3, 7, 100, 3, 3), (6, 7, 100, 6, 1)]
    assert producer.next_sequence == 7


async def test_numbering_ignores_application_sequence_ids():
    client = FakeClient()
    conn = connection(pid=7, generation=100, next_sequence=0)
    client.connections.append(conn)
    producer = await idempotent_producer(client)
    producer.send_nowait(b"a", sequence_id=500)
    producer.send_nowait(b"b", sequence_id=20)
    assert [(s[0], s[3]) for s in stamps(conn)] == [(500, 0), (20, 1)]


async def test_takeover_continues_from_the_brokers_sequence():
    client = FakeClient()
    conn = connection(pid=42, generation=9, next_sequence=1000)
    client.connections.append(conn)
    producer = await idempotent_producer(client, pid=42)
    lease = conn.requests[0].leasePid
    assert lease.pid == 42 and not lease.HasField("generation")  # a takeover, not a renewal
    producer.send_nowait(b"x")
    assert stamps(conn) == [(0, 42, 9, 1000, 1)]


async def test_resume_of_unknown_pid_fails_creation():
    client = FakeClient()
    client.connections.append(connection(refuse=ServerError.NotAllowedError))
    with pytest.raises(NotAllowedError):
        await idempotent_producer(client, pid=42)


def test_pid_without_idempotence_is_a_configuration_error():
    async def make():
        AsyncProducer(FakeClient(), TOPIC, 0, pid=3)
    with pytest.raises(InvalidConfiguration):
        asyncio.run(make())


async def test_reconnect_renews_and_resends_the_same_numbers():
    client = FakeClient()
    first = connection(pid=7, generation=100)
    client.connections.append(first)
    producer = await idempotent_producer(client)
    futures = [producer.send_nowait(b"%d" % i) for i in range(3)]
    producer.on_send_receipt(receipt(0, 10))
    second = connection(pid=7, generation=100)
    client.connections.append(second)
    first.drop()
    await producer.wait_ready(1)
    renewal = second.requests[0].leasePid
    assert (renewal.pid, renewal.generation) == (7, 100)
    assert stamps(second) == [(1, 7, 100, 1, 1), (2, 7, 100, 2, 1)]
    producer.on_send_receipt(receipt(1, 11))
    producer.on_send_receipt(receipt(2, 12))
    assert [f.result().entry_id() for f in futures] == [10, 11, 12]


async def test_reconnect_finds_the_pid_taken_over():
    client = FakeClient()
    first = connection()
    client.connections.append(first)
    producer = await idempotent_producer(client)
    pending = producer.send_nowait(b"a")
    client.connections.append(connection(refuse=ServerError.ProducerFenced))
    first.drop()
    with pytest.raises(ProducerFenced):
        await asyncio.wait_for(pending, 1)
    with pytest.raises(ProducerFenced):
        producer.send_nowait(b"b")


async def test_fenced_send_ends_the_producer():
    client = FakeClient()
    client.connections.append(connection())
    producer = await idempotent_producer(client)
    first, second = producer.send_nowait(b"a"), producer.send_nowait(b"b")
    producer.on_send_error(send_error(0, ServerError.ProducerFenced))
    for fut in (first, second):
        with pytest.raises(ProducerFenced):
            fut.result()
    with pytest.raises(ProducerFenced):
        producer.send_nowait(b"c")


async def test_an_unexplained_gap_ends_the_producer():
    client = FakeClient()
    client.connections.append(connection())
    producer = await idempotent_producer(client)
    fut = producer.send_nowait(b"a")
    producer.on_send_error(send_error(0, ServerError.OutOfOrderSequence))
    with pytest.raises(OutOfOrderSequence):
        fut.result()


async def test_refusal_gives_its_numbers_back_and_renumbers_what_follows():
    client = FakeClient()
    conn = connection(pid=7, generation=100)
    client.connections.append(conn)
    producer = await idempotent_producer(client)
    a = producer.send_nowait(b"a", expected_offset=0)
    b = producer.send_nowait(b"b")
    c = producer.send_nowait(b"c", expected_offset=2)
    d = producer.send_nowait(b"d")
    assert [s[3] for s in stamps(conn)] == [0, 1, 2, 3]
    producer.on_send_error(send_error(0, ServerError.ExpectedOffsetMismatch, next_offset=5, offset_epoch=1))
    with pytest.raises(ExpectedOffsetMismatch) as refused:
        a.result()
    assert refused.value.next_offset == 5
    with pytest.raises(ExpectedOffsetMismatch):
        c.result()  # planned assuming a would land: refused with it
    # b and d take the numbers back, and are written again behind their old copies.
    assert [(s[0], s[3]) for s in stamps(conn)[4:]] == [(1, 0), (3, 1)]
    assert producer.next_sequence == 2
    # The broker refuses the old copies as gaps; the producer expects that.
    for seq in (1, 2, 3):
        producer.on_send_error(send_error(seq, ServerError.OutOfOrderSequence))
    assert producer.is_connected() and not b.done() and not d.done()
    producer.on_send_receipt(receipt(1, 20, offset=5))
    producer.on_send_receipt(receipt(3, 21, offset=6))
    assert (b.result().offset, d.result().offset) == (5, 6)
    producer.send_nowait(b"e")
    assert stamps(conn)[-1][3] == 2


async def test_timeout_fails_the_send_but_keeps_its_number():
    client = FakeClient()
    conn = connection()
    client.connections.append(conn)
    producer = await idempotent_producer(client, send_timeout_millis=30)
    first = producer.send_nowait(b"a")
    with pytest.raises(Timeout):
        await asyncio.wait_for(first, 1)
    second = producer.send_nowait(b"b")
    assert [s[3] for s in stamps(conn)] == [0, 1]  # no gap: "a" is still retried under 0
    producer.on_send_receipt(receipt(0, 1))  # "a" landed after all
    producer.on_send_receipt(receipt(1, 2))
    assert second.result().entry_id() == 2


async def test_lease_is_renewed_with_its_generation_and_loss_ends_the_producer():
    client = FakeClient()
    conn = connection(pid=7, generation=100)
    client.connections.append(conn)
    producer = await idempotent_producer(client, pid_lease_ms=100)
    pending = producer.send_nowait(b"a")
    for _ in range(100):
        await asyncio.sleep(0.01)
        if len(conn.requests) >= 3:
            break
    renewal = conn.requests[2].leasePid
    assert (renewal.pid, renewal.generation) == (7, 100)
    conn.replies.update(lease_reply(refuse=ServerError.ProducerFenced))
    with pytest.raises(ProducerFenced):
        await asyncio.wait_for(pending, 1)
