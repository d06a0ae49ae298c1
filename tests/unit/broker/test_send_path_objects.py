"""Objects the SEND -> receipt path keeps per writer and per entry: a
writer's sequence state has slots and no retry window unless it
deduplicates, an entry in flight is its pending send alone (no tuple
beside it in the topic), and a stored run leaves no tuple on the topic.
Counted because each such object is walked by every collection of the
generation it sits in (10,000 topics: docs/object-storage.md, "The
collector's pauses at 10,000 topics")."""
from __future__ import annotations

import gc

from magnetar.broker.topics.dedup import SequenceState
from magnetar.broker.topics.producer import PendingSend

from tests.helpers import wait_until

from .harness import RecordingSink, close_service, make_service, producer, send_of, topic_of

NOW_MS = 1_700_000_000_000


def test_a_writers_sequence_state_is_one_object_until_it_deduplicates():
    state = SequenceState()
    assert not hasattr(state, "__dict__") and state.recent is None
    assert state.original(5) is None
    pending = PendingSend(5, 5)
    state.remember(5, pending)
    assert state.original(5) is pending


async def test_entries_in_flight_are_their_pending_sends_alone(tmp_path):
    service = await make_service(tmp_path)
    try:
        topic = await topic_of(service, "send-path-objects")
        p = producer(topic, 1)
        await topic.add_producer(p, None)
        p.sink = RecordingSink()
        for seq in range(3):
            send, block = send_of(p.name, seq)
            topic.publish_into(p, send, block, p.expect(seq, seq), NOW_MS)
        # Nothing but the pending sends themselves in the topic's queue.
        assert [type(x) for x in topic._appending] == [PendingSend] * 3
        assert [x.first_offset for x in topic._appending] == [0, 1, 2]
        await wait_until(lambda: len(p.sink.results) == 3, what="three receipts")
        assert [(r.entry_id, r.first_offset, r.token, r.marker) for r in p.sink.results] == \
            [(0, 0, None, None), (1, 1, None, None), (2, 2, None, None)]
        # The stored tail is three ints on the topic, read as a tuple on demand.
        assert topic.stored_tail == (p.sink.results[-1].ledger_id, 2, 3)
        assert not any(type(v) is tuple for v in vars(topic).values() if gc.is_tracked(v))
        state = topic.dedup.names[p.name]
        assert state.recent is None and state.highwater == 2  # not deduplicating: no window
    finally:
        await close_service(service)
