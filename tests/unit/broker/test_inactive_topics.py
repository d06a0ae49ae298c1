"""Inactive topics (policies/inactive.py) on a real service: the modes,
the delay, idle unloading; the round's clock is given, not waited for."""
from __future__ import annotations

from magnetar.broker.policies.inactive import InactiveTopics
from magnetar.broker.subscriptions import cursor_ops

from .harness import close_service, make_service, producer, send_of, topic_of


async def _service(tmp_path, **settings):
    return await make_service(tmp_path, broker_delete_inactive_topics_enabled=True,
                              broker_delete_inactive_topics_max_inactive_duration_s=10.0, **settings)


async def _publish(topic, n=1):
    p = producer(topic, 1)
    await topic.add_producer(p, None)
    for seq in range(n):
        send, block = send_of(p.name, seq)
        await topic.publish(p, send, block)
    return p


async def test_caught_up_mode_deletes_only_topics_whose_subscriptions_have_no_backlog(tmp_path):
    service = await _service(tmp_path, broker_delete_inactive_topics_mode="delete_when_subscriptions_caught_up")
    try:
        behind = await topic_of(service, "behind")
        caught_up = await topic_of(service, "caught-up")
        for topic in (behind, caught_up):
            await cursor_ops.create(topic, "s", None, earliest=True)
            await _publish(topic, 2)
            topic.producers.clear()  # the producer left
        await cursor_ops.clear_backlog(caught_up.subscriptions["s"])
        rounds = InactiveTopics(service, service.config)
        assert await rounds.round(now=0.0) == ([], [])  # idle from now on
        assert await rounds.round(now=9.0) == ([], [])  # not yet: the delay is 10 s
        deleted, _ = await rounds.round(now=10.5)
        assert deleted == [str(caught_up.name)]
        assert not await service.topic_exists(caught_up.name)
        assert await service.topic_exists(behind.name)
    finally:
        await close_service(service)


async def test_a_producer_keeps_a_topic_and_traffic_restarts_the_clock(tmp_path):
    service = await _service(tmp_path)
    try:
        topic = await topic_of(service, "busy")
        await _publish(topic)
        rounds = InactiveTopics(service, service.config)
        assert await rounds.round(now=0.0) == ([], [])
        assert await rounds.round(now=100.0) == ([], [])  # a producer is attached
        topic.producers.clear()
        assert await rounds.round(now=101.0) == ([], [])
        await _publish(topic)  # traffic between two rounds: the clock starts again
        topic.producers.clear()
        assert await rounds.round(now=110.0) == ([], [])
        deleted, _ = await rounds.round(now=120.5)
        assert deleted == [str(topic.name)]
    finally:
        await close_service(service)


async def test_idle_topics_are_unloaded_not_deleted_when_deletion_is_off(tmp_path):
    service = await make_service(tmp_path, topic_idle_unload_s=30.0)
    try:
        topic = await topic_of(service, "idle")
        await _publish(topic)
        topic.producers.clear()
        rounds = InactiveTopics(service, service.config)
        assert await rounds.round(now=0.0) == ([], [])
        assert await rounds.round(now=31.0) == ([], [str(topic.name)])
        assert str(topic.name) not in service.topics and topic.closed
        again = await topic_of(service, "idle")
        assert again.next_offset == 1
    finally:
        await close_service(service)
