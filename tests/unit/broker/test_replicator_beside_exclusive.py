"""Geo-replication's producer and the access modes, and a queued holder's
epoch. Found by ``magnetar-chaos run --topology regions``: region B's
replicator producer (Shared, ``pulsar.repl.region-b``) attached to region
A's leader-election topic between two WaitForExclusive sessions and kept
both candidates waiting for as long as it stayed connected (seconds, until
B was paused or killed); when it left, a candidate queued as a returning
holder was promoted with a fresh epoch after its rival had held the topic,
and its pending sends landed after the rival's (two leaders' writes
interleaved).

Real Topic, storage and metadata store in one process."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.errors import ProducerFenced
from magnetar.protocol import pb

from .harness import close_service, make_service, producer, topic_of

REPLICATOR = "pulsar.repl.region-b"


@pytest.fixture
async def service(tmp_path):
    s = await make_service(tmp_path)
    yield s
    await close_service(s)


async def test_a_replicator_does_not_keep_a_waiting_producer_out(service):
    topic = await topic_of(service)
    assert await topic.add_producer(producer(topic, 1, REPLICATOR), None) is None
    assert await topic.add_producer(producer(topic, 2, "leader", pb.WaitForExclusive), None) is None
    assert topic.exclusive_producer.name == "leader"
    assert set(topic.producers) == {REPLICATOR, "leader"}


async def test_a_replicator_is_admitted_beside_an_exclusive_producer_and_not_fenced(service):
    topic = await topic_of(service)
    assert await topic.add_producer(producer(topic, 1, "holder", pb.Exclusive), None) is None
    replicator = producer(topic, 2, REPLICATOR)
    assert await topic.add_producer(replicator, None) is None
    assert await topic.add_producer(producer(topic, 3, "fencer", pb.ExclusiveWithFencing), None) is None
    assert set(topic.producers) == {REPLICATOR, "fencer"} and not replicator.fenced
    # Any other Shared producer is still refused while the topic is held.
    with pytest.raises(Exception, match="exclusive producer"):
        await topic.add_producer(producer(topic, 4, "shared"), None)


async def test_a_queued_holder_is_fenced_if_another_held_the_topic_before_its_turn(service):
    topic = await topic_of(service)
    leader = producer(topic, 1, "leader", pb.WaitForExclusive)
    assert await topic.add_producer(leader, None) is None
    epoch = topic.topic_epoch
    rival_turn = await topic.add_producer(producer(topic, 2, "rival", pb.WaitForExclusive), None)
    # The leader's client reconnects (with its epoch, current now) while its
    # old registration is still attached: it queues behind the rival.
    returning_turn = await topic.add_producer(producer(topic, 3, "leader-again", pb.WaitForExclusive), epoch)
    assert rival_turn is not None and returning_turn is not None
    topic.remove_producer(leader)
    await asyncio.wait_for(rival_turn, 5)
    assert topic.exclusive_producer.name == "rival" and topic.topic_epoch == epoch + 1
    topic.remove_producer(topic.exclusive_producer)
    with pytest.raises(ProducerFenced):
        await asyncio.wait_for(returning_turn, 5)
    assert topic.exclusive_producer is None


async def test_a_queued_holder_whose_epoch_is_still_current_keeps_it(service):
    topic = await topic_of(service)
    leader = producer(topic, 1, "leader", pb.WaitForExclusive)
    assert await topic.add_producer(leader, None) is None
    epoch = topic.topic_epoch
    returning_turn = await topic.add_producer(producer(topic, 2, "leader-again", pb.WaitForExclusive), epoch)
    topic.remove_producer(leader)
    await asyncio.wait_for(returning_turn, 5)
    assert topic.exclusive_producer.name == "leader-again" and topic.topic_epoch == epoch


async def test_a_topic_written_by_a_replicator_filters_markers_before_its_replication_is_known(service):
    """A remote's replicator may bring PIP-33 markers before this broker's
    reconcile has read the topic's replication policy (which is what set
    ``filter_markers``): a consumer of region A once received a snapshot
    request that way. The first send of a replicator turns the filter on."""
    from .harness import RecordingSink, send_of

    topic = await topic_of(service)
    plain = producer(topic, 1, "plain")
    await topic.add_producer(plain, None)
    plain.sink = RecordingSink()
    send, block = send_of(plain.name, 0)
    topic.publish_into(plain, send, block, plain.expect(0, 0), 1)
    assert not topic.filter_markers  # an ordinary producer says nothing of markers
    replicator = producer(topic, 2, REPLICATOR)
    await topic.add_producer(replicator, None)
    replicator.sink = RecordingSink()
    assert topic.marker_handler is None  # the reconcile has not run: no replication known here
    send, block = send_of(replicator.name, 0)
    topic.publish_into(replicator, send, block, replicator.expect(0, 0), 1)
    assert topic.filter_markers
