"""Topic.position_of_offset: the entry holding a topic offset, across ledgers,
after a reload, for offsets not written yet and for offsets trimmed away."""
from __future__ import annotations

import asyncio

from magnetar.metadata import SqliteMetadataStore
from magnetar.storage import Position
from magnetar.storage.config import StorageConfig

from .harness import close_service, make_service, producer, send_of, topic_of

#: Messages per entry; the ledger rolls every 3 entries.
SIZES = [1, 4, 1, 2, 1, 3, 1, 5]


async def _fill(topic) -> dict[int, Position]:
    """Publish SIZES; the entry position of every offset."""
    p = producer(topic, 1)
    await topic.add_producer(p, None)
    holder: dict[int, Position] = {}
    for seq, n in enumerate(SIZES):
        send, block = send_of(p.name, seq, n=n)
        result = await topic.publish(p, send, block)
        for offset in range(result.first_offset, result.first_offset + n):
            holder[offset] = Position(result.ledger_id, result.entry_id)
    return holder


async def _service(tmp_path, store=None):
    return await make_service(tmp_path, store, storage=StorageConfig(max_entries_per_ledger=3))


async def test_every_offset_maps_to_its_entry_across_ledgers(tmp_path):
    service = await _service(tmp_path)
    topic = await topic_of(service)
    holder = await _fill(topic)
    assert len({pos.ledger_id for pos in holder.values()}) >= 3
    for offset, pos in holder.items():
        assert await topic.position_of_offset(offset) == pos, offset
    await close_service(service)


async def test_unwritten_offsets_wait_at_the_next_write_position(tmp_path):
    service = await _service(tmp_path)
    topic = await topic_of(service)
    assert await topic.position_of_offset(0) == topic.next_write_position()  # empty topic
    await _fill(topic)
    nxt = topic.next_write_position()
    for offset in (topic.next_offset, topic.next_offset + 1, 2**64 - 1):
        assert await topic.position_of_offset(offset) == nxt
    await close_service(service)


async def test_offsets_are_found_after_a_reload(tmp_path):
    store = await SqliteMetadataStore.open(tmp_path / "meta.db")
    service = await _service(tmp_path, store)
    holder = await _fill(await topic_of(service))
    await close_service(service)
    service = await _service(tmp_path, store)
    topic = await topic_of(service)
    assert topic.next_offset == sum(SIZES)
    for offset, pos in holder.items():
        assert await topic.position_of_offset(offset) == pos, offset
    await close_service(service)
    await store.close()


async def test_an_offset_still_being_written_is_not_skipped(tmp_path):
    service = await _service(tmp_path)
    topic = await topic_of(service)
    await _fill(topic)
    p = producer(topic, 2)
    await topic.add_producer(p, None)
    first = topic.next_offset
    pending = [topic.publish(p, *send_of(p.name, seq, n=2)) for seq in range(2)]
    # Whether or not the appends completed meanwhile, the answer is at or
    # before the entry holding the offset, never after it.
    got = await topic.position_of_offset(first + 3)
    results = await asyncio.gather(*pending)
    first_pending = Position(results[0].ledger_id, results[0].entry_id)
    assert first_pending <= got <= Position(results[1].ledger_id, results[1].entry_id)
    await close_service(service)


async def test_trimmed_offsets_start_at_the_first_retained_entry(tmp_path):
    service = await _service(tmp_path)
    topic = await topic_of(service)
    holder = await _fill(topic)
    cursor = await topic.ledger.open_cursor("sub", "earliest")
    last = topic.ledger.last_confirmed
    await cursor.mark_delete(last)
    first = await _first_after_trim(topic, holder[0])
    assert first.ledger_id > holder[0].ledger_id
    for offset in (0, min(o for o, pos in holder.items() if pos == first) - 1):
        assert await topic.position_of_offset(offset) == first
    await close_service(service)


async def _first_after_trim(topic, old_first: Position) -> Position:
    """The first stored entry once trimming (a background task) removed ``old_first``."""
    async def trimmed() -> Position:
        while topic.ledger.first_position() == old_first:
            await asyncio.sleep(0.01)  # polling the storage's state, bounded by the deadline below
        return topic.ledger.first_position()
    return await asyncio.wait_for(trimmed(), 10)
