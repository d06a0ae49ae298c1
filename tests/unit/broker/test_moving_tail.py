"""A moving topic's tail as its source names it (``topics/moving.py``): the
destination takes the next offset from it only when its own recovery finds
the entry it names last; otherwise it reads that entry, as any load does."""
from __future__ import annotations

from magnetar.broker.topic_name import parse
from magnetar.broker.topics.moving import MovingTopic
from magnetar.protocol import pb

from .harness import close_service, make_service

_META = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1).SerializeToString()


async def test_the_next_offset_comes_from_the_tail_only_where_it_names_the_last_entry(tmp_path):
    service = await make_service(tmp_path)
    name = parse("persistent://public/default/moving-tail")
    try:
        topic = await service.get_topic(name, create=True)
        for _ in range(3):
            await topic.append_marker(_META, b"x")
        last = topic.ledger.last_confirmed
        await service.unload(topic)

        # A tail naming another entry (stale, or of another ledger): ignored, the entry is read.
        wrong = MovingTopic(str(name), (last.ledger_id, last.entry_id - 1), 1000)
        loaded = await service._load_once(name, False, wrong)
        assert loaded.next_offset == 3
        assert loaded.moving() == MovingTopic(str(name), (last.ledger_id, last.entry_id), 3)
        await service.unload(loaded)

        # The tail names the last entry: its offset is taken without a read
        # (1000 here, which no read of this log would give).
        right = MovingTopic(str(name), (last.ledger_id, last.entry_id), 1000)
        loaded = await service._load_once(name, False, right)
        assert loaded.next_offset == 1000
    finally:
        await close_service(service)
