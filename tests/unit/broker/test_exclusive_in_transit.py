"""An exclusive producer's slot travels with its topic when the topic moves
(PIP-307): the new owner keeps it for the holder, whose clients arrive there
at the same moment as the WaitForExclusive producers queued behind it.

Real Topic, storage and metadata store in one process: ``release()`` is the
source's side of a move, a reload from the same storage the destination's.
"""
from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.errors import ProducerBusy, ProducerFenced, ServiceNotReady
from magnetar.broker.topics import topic as topic_module
from magnetar.protocol import pb

from ..broker.harness import close_service, make_service, producer, topic_of


async def _moved(service, topic):
    """``topic`` released (as the source does) and loaded again (as the destination does)."""
    await topic.release()
    del service.topics[str(topic.name)]
    return await topic_of(service)


@pytest.fixture
async def service(tmp_path):
    s = await make_service(tmp_path)
    yield s
    await close_service(s)


async def _holder_and_waiter(service):
    topic = await topic_of(service)
    holder = producer(topic, 1, "holder", pb.Exclusive)
    assert await topic.add_producer(holder, None) is None
    waiter = producer(topic, 2, "waiter", pb.WaitForExclusive)
    queued = await topic.add_producer(waiter, None)
    assert queued is not None and not queued.done()
    return topic, holder, queued


async def test_the_holder_gets_its_topic_back_ahead_of_a_waiter_that_arrived_first(service):
    topic, holder, queued = await _holder_and_waiter(service)
    assert topic.topic_epoch == 1
    moved = await _moved(service, topic)
    with pytest.raises(ServiceNotReady):
        await queued  # the waiter's creation fails over with the move; its client retries
    assert moved.reserved_for == "holder"
    # The waiter arrives first at the new owner: it queues, it is not granted the topic.
    waiter = producer(moved, 3, "waiter", pb.WaitForExclusive)
    queued = await moved.add_producer(waiter, None)
    assert queued is not None and not queued.done()
    with pytest.raises(ProducerFenced):
        await moved.add_producer(producer(moved, 4, "rival", pb.Exclusive), None)
    with pytest.raises(ProducerBusy):
        await moved.add_producer(producer(moved, 5, "shared"), None)
    # The holder comes back with its epoch and keeps it, ahead of the waiter.
    back = producer(moved, 6, "holder", pb.Exclusive)
    assert await moved.add_producer(back, 1) is None
    assert (moved.topic_epoch, back.epoch, moved.reserved_for) == (1, 1, None)
    assert not queued.done()
    # Its later loads (a restart, not a move) wait for nobody.
    assert topic_module.EXCLUSIVE_IN_TRANSIT not in moved.ledger.properties
    moved.remove_producer(back)
    await asyncio.wait_for(queued, 5)
    assert (moved.topic_epoch, waiter.epoch) == (2, 2)


async def test_a_holder_that_does_not_come_back_frees_the_topic_for_its_waiters(service, monkeypatch):
    monkeypatch.setattr(topic_module, "TRANSIT_RESERVATION_S", 0.05)
    topic, _, _ = await _holder_and_waiter(service)
    moved = await _moved(service, topic)
    waiter = producer(moved, 3, "waiter", pb.WaitForExclusive)
    queued = await moved.add_producer(waiter, None)
    await asyncio.wait_for(queued, 5)
    assert moved.reserved_for is None and waiter.epoch == 2


async def test_a_fencing_producer_takes_the_topic_from_a_holder_in_transit(service):
    topic, _, _ = await _holder_and_waiter(service)
    moved = await _moved(service, topic)
    fencer = producer(moved, 3, "fencer", pb.ExclusiveWithFencing)
    assert await moved.add_producer(fencer, None) is None
    assert (moved.topic_epoch, moved.reserved_for) == (2, None)
    with pytest.raises(ProducerFenced):  # the holder's epoch is gone
        await moved.add_producer(producer(moved, 4, "holder", pb.Exclusive), 1)


async def test_a_topic_moved_without_an_exclusive_holder_reserves_nothing(service):
    topic = await topic_of(service)
    assert await topic.add_producer(producer(topic, 1, "shared"), None) is None
    moved = await _moved(service, topic)
    assert moved.reserved_for is None
    assert topic_module.EXCLUSIVE_IN_TRANSIT not in moved.ledger.properties


async def test_a_returning_fencing_holder_does_not_fence_the_waiter_queued_behind_it(service):
    topic = await topic_of(service)
    holder = producer(topic, 1, "holder", pb.ExclusiveWithFencing)
    assert await topic.add_producer(holder, None) is None
    assert await topic.add_producer(producer(topic, 2, "waiter", pb.WaitForExclusive), None) is not None
    moved = await _moved(service, topic)
    waiter = producer(moved, 3, "waiter", pb.WaitForExclusive)
    queued = await moved.add_producer(waiter, None)
    # Coming back is not a takeover: the holder keeps its epoch, the waiter stays queued.
    back = producer(moved, 4, "holder", pb.ExclusiveWithFencing)
    assert await moved.add_producer(back, 1) is None
    assert moved.topic_epoch == 1 and not queued.done() and not waiter.fenced
    moved.remove_producer(back)
    await asyncio.wait_for(queued, 5)
    assert waiter.epoch == 2
