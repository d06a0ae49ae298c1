"""A topic listens to its ledger's new entries only while someone follows
it (``topics/followers.py``): a commit at 10,000 written topics with nobody
reading wakes nobody, and a follower that comes later hears every entry
stored after it came."""
from __future__ import annotations

from magnetar.broker.subscriptions import cursor_ops

from tests.helpers import wait_until

from .harness import RecordingSink, close_service, make_service, producer, send_of, topic_of

NOW_MS = 1_700_000_000_000


class CountingReplicator:
    """A ReplicatorView that counts its wake-ups (no remote behind it)."""

    def __init__(self) -> None:
        self.woken = 0

    def on_new_entries(self) -> None:
        self.woken += 1

    def stop(self) -> None:
        pass

    def stats(self) -> dict:
        return {}

    def delay_seconds(self) -> float:
        return 0.0


async def _publish(topic, p, seq: int) -> None:
    send, block = send_of(p.name, seq)
    topic.publish_into(p, send, block, p.expect(send.sequence_id, send.highest_sequence_id), NOW_MS)
    await wait_until(lambda: len(p.sink.results) == seq + 1)


async def test_a_topic_without_followers_does_not_listen_and_one_that_comes_later_is_woken(tmp_path):
    service = await make_service(tmp_path)
    topic = await topic_of(service)
    p = producer(topic, 1)
    await topic.add_producer(p, None)
    p.sink = RecordingSink()
    await _publish(topic, p, 0)
    assert topic.ledger.listener_count == 0  # nobody follows: nothing to wake after a commit

    replicator = CountingReplicator()
    topic.replicators["remote"] = replicator
    assert topic.ledger.listener_count == 1
    await _publish(topic, p, 1)
    await wait_until(lambda: replicator.woken >= 1)

    sub = await cursor_ops.create(topic, "s", None, earliest=True)
    assert topic.ledger.listener_count == 1  # one listener for every follower
    del topic.replicators["remote"]
    assert topic.ledger.listener_count == 1  # the subscription still follows
    await topic.unsubscribe(sub.name)
    assert topic.ledger.listener_count == 0

    topic.replicators.setdefault("remote", replicator)
    woken = replicator.woken
    await _publish(topic, p, 2)
    await wait_until(lambda: replicator.woken > woken)
    topic.replicators.clear()
    assert topic.ledger.listener_count == 0
    await close_service(service)


async def test_a_closed_topic_stops_listening(tmp_path):
    service = await make_service(tmp_path)
    topic = await topic_of(service)
    await cursor_ops.create(topic, "s", None)
    assert topic.ledger.listener_count == 1
    await topic.close()
    assert topic.ledger.listener_count == 0
    topic.replicators["late"] = CountingReplicator()  # a follower after the close: no listener
    assert topic.ledger.listener_count == 0
    await close_service(service)
