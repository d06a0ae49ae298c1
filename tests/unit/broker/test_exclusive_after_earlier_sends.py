"""An exclusive producer is granted the topic only once every send of the
producers before it is stored or failed: a leader that bootstraps from the
log's end must not miss a crashed leader's last send, stored afterwards
(the leader-election example's states disagreed with the log, once in six
runs under load). Real Topic, storage and metadata store; storage's answers
are held at a gate so that the old leader's send is in flight when its
connection drops."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.protocol import pb

from .harness import RecordingSink, close_service, make_service, producer, send_of, topic_of


@pytest.fixture
async def service(tmp_path):
    s = await make_service(tmp_path)
    yield s
    await close_service(s)


async def _spin(n: int = 50) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def _hold_appends(topic, monkeypatch) -> list:
    """Appends reach the ledger only when the returned list is replayed."""
    held: list = []
    monkeypatch.setattr(topic.ledger, "append_then", lambda data, then: held.append((data, then)))
    return held


@pytest.mark.parametrize("mode", [pb.WaitForExclusive, pb.ExclusiveWithFencing])
async def test_the_next_leader_gets_the_topic_after_the_last_leaders_send_in_flight_is_stored(service, monkeypatch,
                                                                                               mode):
    topic = await topic_of(service)
    real_append = topic.ledger.append_then
    leader = producer(topic, 1, "leader", pb.WaitForExclusive)
    leader.sink = RecordingSink()
    assert await topic.add_producer(leader, None) is None
    held = _hold_appends(topic, monkeypatch)
    send, block = send_of("leader", 0, b"last words")
    stored = asyncio.ensure_future(topic.publish(leader, send, block))
    await _spin()
    assert len(held) == 1
    nxt = producer(topic, 2, "next", mode)
    nxt.sink = RecordingSink()
    if mode == pb.WaitForExclusive:
        turn = await topic.add_producer(nxt, None)
        topic.remove_producer(leader)  # its connection dropped, the send in flight
    else:
        turn = asyncio.ensure_future(topic.add_producer(nxt, None))  # fences the leader
    await _spin()
    assert not turn.done(), "granted while the last leader's send could still land after the new one's bootstrap"
    assert topic.ledger.last_confirmed is None
    monkeypatch.undo()
    for data, then in held:
        real_append(data, then)
    await asyncio.wait_for(turn, 5)
    result = await asyncio.wait_for(stored, 5)
    assert topic.exclusive_producer is nxt
    # What the new leader's bootstrap reads to: the old leader's send included.
    assert (topic.ledger.last_confirmed.ledger_id, topic.ledger.last_confirmed.entry_id) == \
        (result.ledger_id, result.entry_id)
