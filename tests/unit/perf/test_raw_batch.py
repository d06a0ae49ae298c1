"""The raw generator's batch encoder against Magnetar's own decoder: every
frame must parse back (frame codec, checksum, batch codec) into the messages
asked for, with their sequence ids and bodies."""
from __future__ import annotations

import time

import pytest

from magnetar.perf.payload import filler, stamp_of
from magnetar.perf.raw_batch import BatchEncoder, messages_per_batch
from magnetar.protocol import FrameDecoder, Type
from magnetar.protocol.batch import decode_batch


def _decode(frame: bytes):
    decoder = FrameDecoder()
    decoder.feed(frame)
    decoded = decoder.next_frame()
    assert decoded is not None and decoder.next_frame() is None and decoder.buffered == 0
    return decoded


# Sequence ids around every varint length change the fast path meets (and
# straddling ones, which take the slow path), small and full batches.
@pytest.mark.parametrize("first", [0, 1, 126, 16_000, 16_384 - 500, 2**21 + 17, 2**28 - 3, 2**42 + 5])
@pytest.mark.parametrize("count", [1, 127, 128, 129, 1000])
def test_frame_decodes_into_the_batch_asked_for(first, count):
    encoder = BatchEncoder(7, "raw-7", 100, 1000)
    frame = encoder.frame(first, count, publish_time_ms=1_700_000_000_123)
    decoded = _decode(frame)

    cmd = decoded.command
    assert cmd.type == Type.SEND
    assert (cmd.send.producer_id, cmd.send.sequence_id, cmd.send.highest_sequence_id, cmd.send.num_messages) == (
        7, first, first + count - 1, count)
    block = decoded.block
    assert block.verify_checksum()
    assert bytes(block.checksummed[:2]) == b"\x0e\x01"  # checksummed, as the official client sends
    meta = block.metadata
    assert meta.producer_name == "raw-7"
    assert meta.sequence_id == first and meta.highest_sequence_id == first + count - 1
    assert meta.num_messages_in_batch == count
    assert meta.publish_time == 1_700_000_000_123
    assert not meta.HasField("compression")

    messages = decode_batch(block.payload, count)
    assert [m.metadata.sequence_id for m in messages] == list(range(first, first + count))
    assert all(m.metadata.payload_size == 100 and m.payload == filler(100) for m in messages)
    # Nothing after the last message.
    assert len(block.payload) == sum(4 + m.metadata.ByteSize() + 100 for m in messages)


def test_consecutive_frames_reuse_buffers_without_leaking_old_bytes():
    encoder = BatchEncoder(0, "p", 40, 300)
    frames = [encoder.frame(seq, n, 1) for seq, n in ((0, 300), (300, 17), (317, 300))]
    for frame, (seq, n) in zip(frames, ((0, 300), (300, 17), (317, 300))):
        messages = decode_batch(_decode(frame).block.payload, n)
        assert [m.metadata.sequence_id for m in messages] == list(range(seq, seq + n))


def test_a_corrupted_byte_fails_the_checksum():
    frame = bytearray(BatchEncoder(0, "p", 100, 10).frame(0, 10, 1))
    frame[-50] ^= 0xFF
    assert not _decode(bytes(frame)).block.verify_checksum()


def test_stamped_bodies_carry_the_send_time():
    now_us = time.time_ns() // 1000
    frame = BatchEncoder(0, "p", 64, 500, stamp=True).frame(10_000, 500, 1, stamp_us=now_us)
    messages = decode_batch(_decode(frame).block.payload, 500)
    assert all(stamp_of(m.payload) == now_us and m.payload[8:] == filler(64)[8:] for m in messages)
    # Bodies too short for a stamp stay plain.
    short = BatchEncoder(0, "p", 4, 10, stamp=True).frame(0, 10, 1, stamp_us=now_us)
    assert all(m.payload == b"magn" for m in decode_batch(_decode(short).block.payload, 10))


def test_batches_are_bounded_like_the_official_clients():
    assert messages_per_batch(100, 1000, 128 * 1024) == 1000
    assert messages_per_batch(1024, 1000, 128 * 1024) == 128  # bodies only count toward the byte limit
    assert messages_per_batch(1_000_000, 1000, 128 * 1024) == 1  # never empty
    assert messages_per_batch(100, 1000, 128 * 1024, max_pending=300) == 300


def test_frame_refuses_counts_beyond_the_batch():
    encoder = BatchEncoder(0, "p", 10, 5)
    with pytest.raises(ValueError):
        encoder.frame(0, 6, 1)
    with pytest.raises(ValueError):
        encoder.frame(0, 0, 1)
