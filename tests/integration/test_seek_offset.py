"""Seek by topic offset (SEEK with ``magnetar_offset``) against a real broker.

The broker rolls ledgers every 4 entries, so the topic's entries, batched and
unbatched, span several ledgers and the broker's binary search crosses
ledger boundaries. Payloads are ``m<offset>`` so every message read can be
checked against the offset it claims.
"""
from __future__ import annotations


import pytest

from magnetar.client import AsyncClient, Client, InitialPosition, MessageId
from magnetar.client import errors
from magnetar.protocol import Type, command

from tests.helpers import shared_broker, start_broker, unique, wait_for
from .admin_support import ok

CONFIG = "[storage]\nmax_entries_per_ledger = 4\n"
#: Entry sizes: 1 is an unbatched message, k > 1 a batch of k messages.
LAYOUT = [1, 5, 1, 1, 3, 1, 4, 1, 1, 6, 1, 1, 2, 1]
TOTAL = sum(LAYOUT)


def payload(offset: int) -> bytes:
    return b"m%d" % offset


small_ledgers = shared_broker(CONFIG, name="small_ledgers")


@pytest.fixture
def client(small_ledgers):
    c = Client(small_ledgers.service_url, operation_timeout_seconds=15)
    yield c
    c.close()


def produce(client, topic: str, layout: list[int], first: int = 0) -> list[MessageId]:
    """Publish entries of the given sizes, offsets from ``first``; the ids in offset order."""
    single = client.create_producer(topic, batching_enabled=False)
    batcher = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                     batching_max_publish_delay_ms=60_000)
    ids: list[MessageId] = []
    for size in layout:
        offset = first + len(ids)
        if size == 1:
            ids.append(single.send(payload(offset)))
            continue
        got: list[MessageId] = []
        for i in range(size):
            batcher.send_async(payload(offset + i), lambda result, mid: got.append(mid))
        batcher.flush()  # one batch: the publish delay never fires
        wait_for(lambda: len(got) == size, what="batch receipts")
        ids.extend(sorted(got, key=lambda mid: mid.offset))
    single.close()
    batcher.close()
    assert [mid.offset for mid in ids] == list(range(first, first + len(ids)))
    return ids


def read_rest(reader, first: int, stop: int) -> None:
    """The reader returns exactly offsets ``first .. stop-1``, then nothing more."""
    for offset in range(first, stop):
        msg = reader.read_next(10_000)
        assert (msg.offset, msg.data()) == (offset, payload(offset)), f"expected offset {offset}"
    assert not reader.has_message_available()


def ledgers_of(ids: list[MessageId]) -> list[int]:
    return sorted({mid.ledger_id() for mid in ids})


def test_every_offset_across_ledgers_and_batches(client):
    topic = unique("seek-offset")
    ids = produce(client, topic, LAYOUT)
    ledgers = ledgers_of(ids)
    assert len(ledgers) >= 3, f"the topic should span several ledgers: {ledgers}"
    # The cases the loop below covers, named: first ledger, a middle ledger,
    # inside a batch (not its first member), the last message.
    first_ledger = [mid.offset for mid in ids if mid.ledger_id() == ledgers[0]]
    middle = [mid.offset for mid in ids if mid.ledger_id() == ledgers[1]]
    inside_batches = [mid.offset for mid in ids if mid.batch_index() > 0]
    assert first_ledger and middle and set(inside_batches) & set(first_ledger) and set(inside_batches) & set(middle)
    reader = client.create_reader(topic, MessageId.earliest)
    for offset in list(range(TOTAL)) + [3, 0, TOTAL - 1]:  # and backwards, after reading to the end
        reader.seek_offset(offset)
        read_rest(reader, offset, TOTAL)
    reader.close()


def test_fresh_reader_lands_on_the_message_not_the_entry(client):
    topic = unique("seek-offset")
    ids = produce(client, topic, LAYOUT)
    target = next(mid for mid in ids if mid.batch_index() == 3)
    reader = client.create_reader(topic, MessageId.latest, start_message_id_inclusive=False)
    reader.seek_offset(target.offset)
    msg = reader.read_next(10_000)
    assert msg.message_id() == target and msg.offset == target.offset


def test_next_offset_and_beyond_wait_for_new_messages(client):
    topic = unique("seek-offset")
    produce(client, topic, LAYOUT)
    assert client.get_next_offset(topic) == TOTAL
    reader = client.create_reader(topic, MessageId.earliest)
    reader.seek_offset(TOTAL)
    assert not reader.has_message_available()
    produce(client, topic, [1], first=TOTAL)
    read_rest(reader, TOTAL, TOTAL + 1)
    # Beyond the end: messages published before the target are skipped, even
    # the first members of the batch that holds it.
    target = TOTAL + 1 + 3
    reader.seek_offset(target)
    assert not reader.has_message_available()
    produce(client, topic, [1, 5, 1], first=TOTAL + 1)
    read_rest(reader, target, TOTAL + 8)


def test_absurd_offsets(client):
    topic = unique("seek-offset")
    produce(client, topic, [1, 3])
    reader = client.create_reader(topic, MessageId.earliest)
    reader.seek_offset(2**64 - 1)  # the largest the wire carries: positions after the end
    assert not reader.has_message_available()
    for bad, kind in ((-1, ValueError), (2**64, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(kind):
            reader.seek_offset(bad)
    reader.seek_offset(2)
    read_rest(reader, 2, 4)


def test_durable_subscription_acknowledges_what_it_skips(client, small_ledgers):
    topic = unique("seek-offset")
    consumer = client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
    ids = produce(client, topic, LAYOUT)
    target = next(mid for mid in ids if mid.batch_index() == 2 and mid.ledger_id() != ids[0].ledger_id())
    consumer.seek_offset(target.offset)
    for offset in range(target.offset, TOTAL):
        msg = consumer.receive(10_000)
        assert msg.offset == offset
        consumer.acknowledge(msg)
    stats = f"persistent/public/default/{topic}/stats"
    # The members of the target's batch below it were skipped and acked by
    # the client, so nothing is left behind the subscription.
    wait_for(lambda: ok(small_ledgers, "GET", stats)["subscriptions"]["sub"]["msgBacklog"] == 0,
             what="backlog 0")
    consumer.close()


def test_offset_removed_by_retention_starts_at_the_first_retained(client):
    topic = unique("seek-offset")
    consumer = client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
    produce(client, topic, LAYOUT)
    for _ in range(TOTAL):
        consumer.acknowledge(consumer.receive(10_000))
    # Consumed closed ledgers are deleted (not the one with the last entry).
    first_kept = wait_for(lambda: _first_retained_offset(client, topic), what="trimmed ledgers")
    reader = client.create_reader(topic, MessageId.latest)
    for offset in (0, first_kept - 1):
        reader.seek_offset(offset)
        read_rest(reader, first_kept, TOTAL)


def _first_retained_offset(client, topic: str) -> int | None:
    """The first stored offset once trimming removed offset 0, else None."""
    reader = client.create_reader(topic, MessageId.earliest, receiver_queue_size=1)
    try:
        first = reader.read_next(10_000).offset
    finally:
        reader.close()
    return first if first > 0 else None


@pytest.mark.parametrize("crash", [False, True], ids=["restart", "kill-9"])
def test_offsets_survive_a_broker_restart(tmp_path, crash):
    broker = start_broker(tmp_path, CONFIG)
    try:
        with Client(broker.service_url, operation_timeout_seconds=15) as client:
            topic = unique("seek-offset")
            before = produce(client, topic, LAYOUT)
        broker.restart(crash=crash)
        with Client(broker.service_url, operation_timeout_seconds=15) as client:
            assert client.get_next_offset(topic) == TOTAL
            after = produce(client, topic, [3, 1], first=TOTAL)  # continues where it was
            assert ledgers_of(after)[0] > ledgers_of(before)[-1]
            reader = client.create_reader(topic, MessageId.earliest)
            for offset in (0, 3, TOTAL - 1, TOTAL, TOTAL + 1, TOTAL + 3):
                reader.seek_offset(offset)
                read_rest(reader, offset, TOTAL + 4)
    finally:
        if broker.alive:
            assert broker.stop() == 0, broker.log()


async def test_bad_seek_gets_an_error_and_the_connection_stays_usable(small_ledgers):
    client = AsyncClient(small_ledgers.service_url, operation_timeout_seconds=15)
    try:
        topic = unique("seek-offset")
        producer = await client.create_producer(topic)
        for i in range(3):
            await producer.send(payload(i))
        consumer = await client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
        conn = await consumer.wait_ready()
        mid = MessageId(0, 0).to_proto()

        async def seek(**fields):
            return await conn.request(command(Type.SEEK, consumer_id=consumer.consumer_id,
                                              request_id=client.new_request_id(), **fields), 10)

        for fields in ({"message_id": mid, "magnetar_offset": 1},
                       {"message_publish_time": 1, "magnetar_offset": 1},
                       {"message_id": mid, "message_publish_time": 1, "magnetar_offset": 1},
                       {}):
            with pytest.raises(errors.NotAllowedError, match="exactly one"):
                await seek(**fields)
        with pytest.raises(errors.ConsumerNotFound):
            await conn.request(command(Type.SEEK, consumer_id=987654, request_id=client.new_request_id(),
                                       magnetar_offset=1), 10)
        # Nothing moved: the consumer still reads from the start, on the same connection.
        assert [(await consumer.receive(10_000)).offset for _ in range(3)] == [0, 1, 2]
        await consumer.seek_offset(1)
        assert consumer.conn is conn
        assert [(await consumer.receive(10_000)).offset for _ in range(2)] == [1, 2]
    finally:
        await client.close()


@pytest.fixture
def layout_topic(client) -> tuple[str, list[MessageId]]:
    """A topic holding LAYOUT, and its message ids."""
    topic = unique("seek-offset")
    return topic, produce(client, topic, LAYOUT)


async def test_broker_positions_at_the_entry_holding_the_offset(small_ledgers, layout_topic):
    """Without the client's skipping (a raw SEEK), the first message delivered
    is the first member of the entry that holds the offset, in any ledger."""
    topic, ids = layout_topic
    client = AsyncClient(small_ledgers.service_url, operation_timeout_seconds=15)
    try:
        for target in ids:
            reader = await client.create_reader(topic, MessageId.latest)
            conn = await reader._consumer.wait_ready()
            await conn.request(command(Type.SEEK, consumer_id=reader._consumer.consumer_id,
                                       request_id=client.new_request_id(), magnetar_offset=target.offset), 10)
            msg = await reader.read_next(10_000)
            assert msg.message_id().entry_key == target.entry_key, f"offset {target.offset}"
            assert msg.offset == target.offset - max(target.batch_index(), 0)
            await reader.close()
    finally:
        await client.close()
