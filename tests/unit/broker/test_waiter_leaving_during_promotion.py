"""A WaitForExclusive producer whose client goes away while it is being
promoted (its topic epoch being written, which a failing disk makes slow
or fails) must not keep the topic. Found by the chaos harness's
fsync-error fault: ``InvalidStateError`` from ``_promote_next`` in the
broker's log, and behind it a departed producer attached as the topic's
exclusive writer, which would have kept every later exclusive producer out
until the topic was unloaded.

Real Topic, storage and metadata store in one process; the epoch write is
held at a gate so that the client can leave during it."""
from __future__ import annotations

import asyncio
import logging

import pytest

from magnetar.protocol import pb

from .harness import close_service, make_service, producer, topic_of


@pytest.fixture
async def service(tmp_path):
    s = await make_service(tmp_path)
    yield s
    await close_service(s)


def _gate_epoch_writes(topic, monkeypatch):
    """Hold every set_properties (the epoch write) until the gate opens."""
    gate = asyncio.Event()
    entered = asyncio.Event()
    real = topic.ledger.set_properties

    async def held(updates):
        entered.set()
        await gate.wait()
        return await real(updates)

    monkeypatch.setattr(topic.ledger, "set_properties", held)
    return gate, entered


async def _leader_with_waiters(service, monkeypatch):
    topic = await topic_of(service)
    leader = producer(topic, 1, "leader", pb.WaitForExclusive)
    assert await topic.add_producer(leader, None) is None
    leaving = producer(topic, 2, "leaving", pb.WaitForExclusive)
    leaving_turn = await topic.add_producer(leaving, None)
    staying = producer(topic, 3, "staying", pb.WaitForExclusive)
    staying_turn = await topic.add_producer(staying, None)
    gate, entered = _gate_epoch_writes(topic, monkeypatch)
    topic.remove_producer(leader)  # steps down: "leaving" is promoted, its epoch write held
    await asyncio.wait_for(entered.wait(), 5)
    return topic, gate, leaving, leaving_turn, staying, staying_turn


async def test_a_waiter_whose_client_left_during_its_promotion_does_not_keep_the_topic(service, monkeypatch, caplog):
    topic, gate, leaving, leaving_turn, staying, staying_turn = await _leader_with_waiters(service, monkeypatch)
    # Its connection closes: the broker detaches it, and the task awaiting
    # its turn (the PRODUCER request's) is cancelled, which cancels the turn.
    topic.remove_producer(leaving)
    leaving_turn.cancel()
    with caplog.at_level(logging.ERROR):
        gate.set()
        await asyncio.wait_for(staying_turn, 5)  # the next waiter gets the topic
        await asyncio.sleep(0)
    assert topic.exclusive_producer is staying and list(topic.producers) == ["staying"]
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_a_waiter_whose_turn_was_cancelled_during_its_promotion_is_detached(service, monkeypatch, caplog):
    """The turn cancelled without the producer detached first (the PRODUCER
    request's task cancelled on its own, as a broker shutting down does)."""
    topic, gate, leaving, leaving_turn, staying, staying_turn = await _leader_with_waiters(service, monkeypatch)
    leaving_turn.cancel()
    with caplog.at_level(logging.ERROR):
        gate.set()
        await asyncio.wait_for(staying_turn, 5)
        await asyncio.sleep(0)
    assert topic.exclusive_producer is staying and "leaving" not in topic.producers
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_an_admission_cancelled_during_its_epoch_write_releases_the_slot(service, monkeypatch):
    topic = await topic_of(service)
    gate, entered = _gate_epoch_writes(topic, monkeypatch)
    first = producer(topic, 1, "first", pb.Exclusive)
    admitting = asyncio.ensure_future(topic.add_producer(first, None))
    await asyncio.wait_for(entered.wait(), 5)
    admitting.cancel()  # the PRODUCER request's task, cancelled on its own
    with pytest.raises(asyncio.CancelledError):
        await admitting
    assert topic.exclusive_producer is None
    gate.set()
    second = producer(topic, 2, "second", pb.Exclusive)
    assert await asyncio.wait_for(topic.add_producer(second, None), 5) is None
    assert topic.exclusive_producer is second
