"""Broker operations behind the admin API: cursor moves, topic and namespace lifecycle, terminate."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.subscriptions import cursor_ops

from magnetar.broker.server import lifecycle

from magnetar.broker.namespaces import resources
from magnetar.broker.entries.entry_format import entry_info
from magnetar.broker.errors import NotAllowed, TopicNotFound, TopicTerminated
from magnetar.broker.topic_name import parse
from magnetar.protocol import ServerError

from ..broker.harness import close_service, make_service, producer, send_of, topic_of


@pytest.fixture
async def service(tmp_path):
    svc = await make_service(tmp_path)
    yield svc
    await close_service(svc)


async def _filled(service, name: str, count: int, spaced: bool = False):
    """A topic with ``count`` entries and a subscription ``sub`` at the start."""
    topic = await topic_of(service, name)
    p = producer(topic, 1)
    await topic.add_producer(p, None)
    sub = await cursor_ops.create(topic, "sub", None, earliest=True)
    for seq in range(count):
        send, block = send_of(p.name, seq)
        await topic.publish(p, send, block)
        if spaced:
            await asyncio.sleep(0.003)  # distinct publish times (ms) for the boundary test
    return topic, sub


async def test_skip_counts_unacknowledged_entries_only(service):
    topic, sub = await _filled(service, "skip", 10)
    entries = await topic.ledger.read_entries(topic.ledger.first_position(), 10)
    await sub.acknowledge([entries[1].position, entries[2].position])  # holes after entry 0
    assert sub.backlog() == 8
    assert await cursor_ops.skip(sub, 3) == 3  # entries 0, 3, 4
    assert sub.cursor.mark_delete_position == entries[4].position and sub.backlog() == 5
    assert await cursor_ops.skip(sub, 100) == 5 and sub.backlog() == 0
    assert await cursor_ops.skip(sub, 1) == 0


async def test_clear_backlog_and_reset(service):
    topic, sub = await _filled(service, "clear", 6)
    assert await cursor_ops.clear_backlog(sub) == 6 and sub.backlog() == 0
    await cursor_ops.reset_to(sub, cursor_ops.position_for_message_id(topic, -1, -1))
    assert sub.backlog() == 6
    third = (await topic.ledger.read_entries(topic.ledger.first_position(), 3))[2].position
    await cursor_ops.reset_to(sub, cursor_ops.position_for_message_id(topic, third.ledger_id, third.entry_id))
    assert sub.backlog() == 4
    excluded = cursor_ops.position_for_message_id(topic, third.ledger_id, third.entry_id, excluded=True)
    await cursor_ops.reset_to(sub, excluded)
    assert sub.backlog() == 3
    await cursor_ops.reset_to(sub, cursor_ops.position_for_message_id(topic, 1 << 63, 1 << 63))
    assert sub.backlog() == 0
    await cursor_ops.reset_to_time(sub, 0)
    assert sub.backlog() == 6


async def test_expire_moves_past_old_entries_only(service):
    topic, sub = await _filled(service, "expire", 6, spaced=True)
    entries = await topic.ledger.read_entries(topic.ledger.first_position(), 6)
    times = [entry_info(e.data).publish_time for e in entries]
    assert times == sorted(times) and len(set(times)) == 6
    # Age 1 s, "now" = 1 s after entry 3 was published: entries 0..2 are older than that.
    assert await cursor_ops.expire(sub, 1, now_ms=times[3] + 1000) == 3
    assert sub.cursor.mark_delete_position == entries[2].position
    assert await cursor_ops.expire(sub, 1, now_ms=times[3] + 1000) == 0  # idempotent
    assert await cursor_ops.expire(sub, 1, now_ms=times[5] + 1001) == 3
    assert sub.backlog() == 0


async def test_create_refuses_an_existing_subscription(service):
    topic, _ = await _filled(service, "dup", 1)
    with pytest.raises(KeyError):
        await cursor_ops.create(topic, "sub", None)


async def test_topics_need_a_namespace_and_respect_partitioning(service):
    with pytest.raises(TopicNotFound, match="namespace public/ghost"):
        await service.get_topic(parse("persistent://public/ghost/t"))
    base = parse("persistent://public/default/parted")
    await lifecycle.create_partitioned_topic(service, base, 2)
    assert await lifecycle.partitioned_metadata(service, base) == 2
    assert await lifecycle.partitioned_metadata(service, base.partition(1)) == 0
    with pytest.raises(NotAllowed):
        await service.get_topic(base)
    with pytest.raises(TopicNotFound, match="not one of them"):
        await service.get_topic(base.partition(2))
    # A partition that is missing (e.g. a crash after the metadata write) is created on demand.
    await service.delete_topic(base.partition(1))
    assert await service.get_topic(base.partition(1), create=False)


async def test_default_num_partitions_creates_partitioned_topics(tmp_path):
    service = await make_service(tmp_path, default_num_partitions=3)
    try:
        name = parse("persistent://public/default/auto")
        assert await lifecycle.partitioned_metadata(service, name) == 3
        assert await resources.get_partitions(service.store, name) == 3
        assert await lifecycle.partitioned_metadata(service, parse("persistent://public/default/x"),
                                                    auto_create=False) == 0
    finally:
        await close_service(service)


async def test_terminate_refuses_later_publishes(service):
    topic, _ = await _filled(service, "term", 2)
    last = await topic.terminate()
    assert last == topic.ledger.last_confirmed
    assert topic.ledger.properties["terminated_at"] == str(last)
    with pytest.raises(TopicTerminated) as info:
        await topic.add_producer(producer(topic, 2, name="late"), None)
    assert info.value.code == ServerError.TopicTerminatedError
    assert await topic.terminate() == last  # idempotent


async def test_namespace_deletion(service):
    await resources.create_namespace(service.store, "public/busy")
    await service.get_topic(parse("persistent://public/busy/t"))
    with pytest.raises(resources.NotEmpty):
        await lifecycle.delete_namespace(service, "public/busy")
    # Refused: nothing changed, topics may still be created there.
    assert not (await resources.get_namespace(service.store, "public/busy"))["deleted"]
    await service.get_topic(parse("persistent://public/busy/t2"))
    await lifecycle.delete_namespace(service, "public/busy", force=True)
    assert not await resources.namespace_exists(service.store, "public/busy")
    assert await service.topics_of_namespace("public/busy") == []
    with pytest.raises(TopicNotFound):
        await service.get_topic(parse("persistent://public/busy/t"))
