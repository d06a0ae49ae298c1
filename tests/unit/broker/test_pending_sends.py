"""Reports leave a producer in arrival order (``topics/producer.py``), with
sends settled by a real topic on real storage: stored ones when their fsync
completes, refusals at once, duplicates when their original settles."""
from __future__ import annotations

import asyncio

from magnetar.broker.errors import ExpectedOffsetMismatch

from tests.helpers import wait_until

from .harness import RecordingSink, close_service, make_service, producer, send_of, topic_of

NOW_MS = 1_700_000_000_000  # the publish time the connection would have read


async def _attached(tmp_path, name=None, **config):
    """A topic on real storage with one attached producer whose reports land in a list."""
    service = await make_service(tmp_path, **config)
    topic = await topic_of(service)
    p = producer(topic, 1, name=name)
    await topic.add_producer(p, None)
    p.sink = RecordingSink()
    return service, topic, p, p.sink.results


async def test_a_refusal_known_at_once_is_reported_after_the_stored_sends_before_it(tmp_path):
    service, topic, p, reported = await _attached(tmp_path)
    for seq, expected in enumerate([0, 1, 7, 2]):  # the third is refused at once
        send, block = send_of(p.name, seq, expected_offset=expected)
        topic.publish_into(p, send, block, p.expect(send.sequence_id, send.highest_sequence_id), NOW_MS)
    assert reported == []  # the refusal waits behind the two entries being synced
    await wait_until(lambda: len(reported) == 4)
    assert [r.sequence_id for r in reported] == [0, 1, 2, 3]
    assert [r.entry_id for r in reported[:2]] == [0, 1] and reported[0].error is None
    assert all(isinstance(r.error, ExpectedOffsetMismatch) for r in reported[2:])
    assert p.pending_count == 0
    await close_service(service)


async def test_a_resend_of_an_entry_in_flight_gets_the_originals_place(tmp_path):
    service, topic, first, reported = await _attached(tmp_path, name="writer", deduplication_enabled=True)
    send, block = send_of("writer", 0)
    topic.publish_into(first, send, block, first.expect(0, 0), NOW_MS)
    # The same producer reconnects before the receipt and resends sequence 0.
    topic.remove_producer(first)
    second = producer(topic, 2, name="writer")
    await topic.add_producer(second, None)
    second.sink = first.sink
    topic.publish_into(second, send, block, second.expect(0, 0), NOW_MS)
    await wait_until(lambda: len(reported) == 2)
    original, resend = reported
    assert (resend.ledger_id, resend.entry_id) == (original.ledger_id, original.entry_id) != (-1, -1)
    assert topic.ledger.entry_count == 1
    await close_service(service)


async def test_when_reported_waits_for_every_send_accepted_so_far(tmp_path):
    service, topic, p, reported = await _attached(tmp_path)
    for seq in range(50):
        send, block = send_of(p.name, seq)
        topic.publish_into(p, send, block, p.expect(seq, seq), NOW_MS)
    drained = []
    p.when_reported(lambda: drained.append(len(reported)))
    await p.reported()
    assert drained == [50] and [r.sequence_id for r in reported] == list(range(50))
    await close_service(service)


async def test_a_send_refused_by_a_closing_ledger_fails_alone_and_the_earlier_ones_keep_their_places(tmp_path):
    """Storage refuses at once while closing; the sends it accepted before are
    told their own places (the topic matches answers to sends by order)."""
    service, topic, p, reported = await _attached(tmp_path)
    for seq in range(3):
        send, block = send_of(p.name, seq)
        topic.publish_into(p, send, block, p.expect(seq, seq), NOW_MS)
    closing = asyncio.ensure_future(topic.ledger.close())
    await asyncio.sleep(0)
    send, block = send_of(p.name, 3)
    topic.publish_into(p, send, block, p.expect(3, 3), NOW_MS)
    await closing
    await wait_until(lambda: len(reported) == 4)
    assert [(r.sequence_id, r.entry_id, r.error) for r in reported[:3]] == [(0, 0, None), (1, 1, None), (2, 2, None)]
    assert reported[3].sequence_id == 3 and reported[3].error is not None
    await close_service(service)


async def test_conditional_sends_as_the_broker_decodes_them_are_checked(tmp_path):
    """The broker receives SENDs as the fast decoder's views (``fast_send``),
    whose expected offset is read by its presence bit: a conditional send at
    the wrong offset is refused, one at the right offset and a plain one are stored."""
    from magnetar.protocol.fast_send import SendCommandView
    from magnetar.protocol.frames import FrameDecoder, encode_payload_command
    from magnetar.protocol import pb

    service, topic, p, reported = await _attached(tmp_path)
    decoder = FrameDecoder(fast_send=True)
    for seq, expected in enumerate([0, 5, None]):  # the second is at the wrong offset
        send, block = send_of(p.name, seq, expected_offset=expected)
        decoder.feed(b"".join(encode_payload_command(pb.BaseCommand(type=pb.BaseCommand.SEND, send=send),
                                                     block.raw)))
        (frame,) = decoder.next_sends()
        assert type(frame.command) is SendCommandView
        topic.publish_into(p, frame.command, frame.block, p.expect(seq, seq), NOW_MS)
    await wait_until(lambda: len(reported) == 3)
    assert [r.error is None for r in reported] == [True, False, True]
    assert isinstance(reported[1].error, ExpectedOffsetMismatch)
    assert topic.next_offset == 2
    await close_service(service)
