"""Unbatched SEND frames of the raw generator: what the official client sends with batching off."""
from __future__ import annotations

import pytest

from magnetar.protocol.commands import Type
from magnetar.protocol.frames import FrameDecoder
from magnetar.perf.payload import filler, stamp_of
from magnetar.perf.raw_plain import PlainEncoder


@pytest.mark.parametrize("first", [0, 127, 16_383, 2**21 - 2, 2**42 + 5])
@pytest.mark.parametrize("fast", [False, True])
def test_frames_decode_into_one_message_each(first, fast):
    data = PlainEncoder(3, "raw-3", 100).frames(first, 4, publish_time_ms=1_700_000_000_123)
    decoder = FrameDecoder(fast_send=fast)
    decoder.feed(data)
    for seq in range(first, first + 4):
        frame = decoder.next_frame()
        send = frame.command.send
        assert frame.command.type == Type.SEND
        assert (send.producer_id, send.sequence_id, send.num_messages) == (3, seq, 1)
        assert not send.HasField("num_messages")
        assert frame.block.verify_checksum()
        meta = frame.block.metadata
        assert (meta.producer_name, meta.sequence_id, meta.publish_time) == ("raw-3", seq, 1_700_000_000_123)
        assert not meta.HasField("num_messages_in_batch")
        assert bytes(frame.block.payload) == filler(100)
    assert decoder.next_frame() is None and decoder.buffered == 0


def test_stamps_every_body():
    data = PlainEncoder(1, "p", 100, stamp=True).frames(5, 2, 1, stamp_us=1_700_000_000_000_000)
    decoder = FrameDecoder()
    decoder.feed(data)
    for _ in range(2):
        assert bytes(decoder.next_frame().block.payload)[:8] == (1_700_000_000_000_000).to_bytes(8, "big")


def test_refuses_an_empty_call():
    with pytest.raises(ValueError):
        PlainEncoder(1, "p", 10).frames(0, 0, 1)
