"""Backlog quotas on real topics and storage (no sockets): the size measure,
the eviction point, and what each policy does to producers and cursors."""
from __future__ import annotations

import pytest

from magnetar.broker.policies import backlog_quota

from magnetar.broker.subscriptions import cursor_ops
from magnetar.broker.topics.compaction import CURSOR as COMPACTION_CURSOR
from magnetar.broker.errors import BacklogQuotaHold, BacklogQuotaRefusal
from magnetar.broker.entries.entry_format import entry_info
from magnetar.broker.namespaces.policies import BacklogQuota, backlog_quotas
from magnetar.broker.subscriptions.subscription import Subscription
from magnetar.storage import Position, StorageConfig

from .harness import RecordingSink, close_service, make_service, producer, send_of, topic_of

FRAME_HEADER = 8  # bytes the ledger stores before each entry


async def _topic_with_entries(tmp_path, sizes: list[int]):
    """A topic in ledgers of 3 entries holding one entry per payload size,
    with a durable subscription ``s`` at the start; returns (service, topic,
    producer, stored size of each entry)."""
    service = await make_service(tmp_path, storage=StorageConfig(max_entries_per_ledger=3))
    topic = await topic_of(service)
    await cursor_ops.create(topic, "s", None, earliest=True)
    p = producer(topic, 1)
    await topic.add_producer(p, None)
    for seq, size in enumerate(sizes):
        send, block = send_of(p.name, seq, b"x" * size)
        await topic.publish(p, send, block)
    entries = await topic.ledger.read_entries(Position(0, -1), len(sizes))
    return service, topic, p, [len(e.data) + FRAME_HEADER for e in entries]


def test_quotas_are_read_by_type_and_unlimited_ones_dropped():
    stored = {"backlog_quota_map": {
        "destination_storage": {"limitSize": 100, "limitTime": 5, "policy": "producer_exception"},
        "message_age": {"limitSize": -1, "limitTime": 0, "policy": "producer_request_hold"},
    }}
    assert backlog_quotas(stored) == (BacklogQuota("destination_storage", 100, "producer_exception"),)
    stored["backlog_quota_map"]["message_age"]["limitTime"] = 30
    stored["backlog_quota_map"]["destination_storage"]["limitSize"] = -1
    assert backlog_quotas(stored) == (BacklogQuota("message_age", 30, "producer_request_hold"),)
    assert backlog_quotas({"backlog_quota_map": {}}) == ()


async def test_backlog_size_counts_the_slowest_durable_subscription_only(tmp_path):
    service, topic, p, stored = await _topic_with_entries(tmp_path, [100, 200, 300, 400, 500, 600, 700])
    assert len(topic.ledger.ledgers) >= 3
    assert backlog_quota.backlog_size(topic) == sum(stored)  # whole ledgers: exact
    # A faster subscription, a reader and the compaction cursor change nothing.
    fast = await cursor_ops.create(topic, "fast", None)
    await cursor_ops.create(topic, COMPACTION_CURSOR, None)
    reader = Subscription(topic, "reader", topic.ledger.new_non_durable_cursor(topic.start_position()), durable=False)
    topic.subscriptions["reader"] = reader
    assert backlog_quota.backlog_size(topic) == sum(stored)
    assert fast.backlog() == 0
    await cursor_ops.clear_backlog(topic.subscriptions["s"])
    assert backlog_quota.backlog_size(topic) == 0
    await topic.unsubscribe("s")
    await topic.unsubscribe("fast")
    # Only the reader and the compaction cursor are left, far behind: no counted subscription, no backlog.
    await topic.subscriptions[COMPACTION_CURSOR].reset_cursor(Position(0, 0))
    assert backlog_quota.backlog_size(topic) == 0
    await close_service(service)


async def test_eviction_point_is_the_first_position_that_leaves_at_most_the_target(tmp_path):
    sizes = [100, 900, 50, 400, 400, 400, 3000, 10, 10, 700]
    service, topic, p, stored = await _topic_with_entries(tmp_path, sizes)
    ml = topic.ledger
    positions = [e.position for e in await ml.read_entries(Position(0, -1), len(sizes))]
    start = topic.subscriptions["s"].cursor.mark_delete_position
    for target in (0, 1, 700, 1500, 4000, sum(stored) - 1, sum(stored)):
        point = backlog_quota.eviction_point(ml, start, target)
        if sum(stored) <= target:
            assert point is None
            continue
        assert backlog_quota.bytes_after(ml, point) <= target
        i = positions.index(point)
        previous = positions[i - 1] if i else start
        assert backlog_quota.bytes_after(ml, previous) > target, f"not the first position for {target}"
    await close_service(service)


async def test_hold_refuses_new_producers_and_disconnects_attached_ones(tmp_path):
    service, topic, p, stored = await _topic_with_entries(tmp_path, [500] * 4)
    p.sink = RecordingSink()
    topic.backlog_quotas = (BacklogQuota("destination_storage", sum(stored), "producer_request_hold"),)
    assert await topic.check_backlog_quota() == topic.backlog_quotas[0]
    assert [closed.name for closed, _ in p.sink.closes] == ["p1"] and not topic.producers
    with pytest.raises(BacklogQuotaHold):
        await topic.add_producer(producer(topic, 2), None)
    await cursor_ops.skip(topic.subscriptions["s"], 1)  # one entry under the limit: admitted again
    assert await topic.add_producer(producer(topic, 2), None) is None
    assert topic.quota_block is None
    await close_service(service)


async def test_exception_policy_refuses_sends_of_an_attached_producer(tmp_path):
    service, topic, p, stored = await _topic_with_entries(tmp_path, [500] * 4)
    topic.backlog_quotas = (BacklogQuota("destination_storage", 1, "producer_exception"),)
    with pytest.raises(BacklogQuotaRefusal):
        await topic.add_producer(producer(topic, 2), None)
    # A producer let in before the quota was known (here: put back by hand) cannot send.
    topic.producers[p.name] = p
    p.fenced = False
    send, block = send_of(p.name, 99)
    with pytest.raises(BacklogQuotaRefusal):
        await topic.publish(p, send, block)
    assert topic.ledger.entry_count == 4
    await close_service(service)


async def test_eviction_moves_every_cursor_over_the_limit_and_never_blocks(tmp_path):
    service, topic, p, stored = await _topic_with_entries(tmp_path, [500] * 10)
    other = await cursor_ops.create(topic, "other", None, earliest=True)
    await cursor_ops.skip(other, 8)  # under the limit already: left alone
    limit = 4 * stored[0]
    topic.backlog_quotas = (BacklogQuota("destination_storage", limit, "consumer_backlog_eviction"),)
    assert await topic.check_backlog_quota() is None
    assert topic.producers == {p.name: p}
    assert backlog_quota.backlog_size(topic) <= limit * backlog_quota.EVICTION_TARGET
    assert topic.subscriptions["s"].backlog() == 3  # 3 entries fit in 90% of 4
    assert other.backlog() == 2
    await close_service(service)


async def test_age_quota_measures_the_oldest_unacknowledged_entry(tmp_path):
    service, topic, p, stored = await _topic_with_entries(tmp_path, [10] * 3)
    first = (await topic.ledger.read_entries(Position(0, -1), 1))[0]
    published = entry_info(first.data).publish_time
    assert await backlog_quota.oldest_backlog_age_ms(topic, published + 5000) == 5000
    topic.backlog_quotas = (BacklogQuota("message_age", 5, "producer_request_hold"),)
    assert await backlog_quota.check(topic, now_ms=published + 5000) is None  # not older than 5 s
    assert await backlog_quota.check(topic, now_ms=published + 5001) == topic.backlog_quotas[0]
    topic.backlog_quotas = (BacklogQuota("message_age", 5, "consumer_backlog_eviction"),)
    await backlog_quota.check(topic, now_ms=published + 60_000)
    assert topic.subscriptions["s"].backlog() == 0 and topic.quota_block is None
    assert await backlog_quota.oldest_backlog_age_ms(topic, published + 60_000) == 0
    await close_service(service)
