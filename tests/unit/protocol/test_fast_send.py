"""The hand-written SEND decoder agrees with protobuf, or steps aside (None)."""
from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from magnetar.protocol import ProtocolError, pb
from magnetar.protocol.commands import Type, command
from magnetar.protocol.compiled import hot
from magnetar.protocol.fast_send import SendCommandView, parse_send_python
from magnetar.protocol.checksum import crc32c
from magnetar.protocol.frames import FrameDecoder, PayloadBlock, encode_command, encode_send, send_frames_python


def parse_send(buf, start, end):
    """Both twins (Python, and the compiled one of ``_hot.c``), which must agree
    value for value and type for type; their answer."""
    answer = parse_send_python(buf, start, end)
    if hot is not None:
        compiled = hot.parse_send(buf, start, end)
        assert compiled == answer
        if answer is not None:
            assert type(compiled) is SendCommandView
            assert [type(v) for v in compiled] == [type(v) for v in answer]
    return answer

U64 = st.integers(0, 2**64 - 1)
FIELDS = ("producer_id", "sequence_id", "num_messages", "txnid_least_bits", "txnid_most_bits",
          "highest_sequence_id", "is_chunk", "marker", "expected_offset", "offset_epoch")
OPTIONAL = FIELDS[2:]

sends = st.fixed_dictionaries(
    {"producer_id": U64, "sequence_id": U64},
    optional={"num_messages": st.integers(-2**31, 2**31 - 1), "txnid_least_bits": U64, "txnid_most_bits": U64,
              "highest_sequence_id": U64, "is_chunk": st.booleans(), "marker": st.booleans(),
              "expected_offset": U64, "offset_epoch": U64},
)


def _protobuf(data: bytes) -> pb.CommandSend | None:
    """What the protobuf path decodes, or None where it refuses the bytes."""
    cmd = pb.BaseCommand()
    try:
        cmd.ParseFromString(data)
    except Exception:
        return None
    if not cmd.IsInitialized() or cmd.type != Type.SEND or not cmd.HasField("send"):
        return None
    return cmd.send


def _agrees(view: SendCommandView, ref: pb.CommandSend) -> None:
    assert view.type == Type.SEND and view.send is view
    for name in FIELDS:
        assert getattr(view, name) == getattr(ref, name), name
    for name in OPTIONAL:
        assert view.HasField(name) == ref.HasField(name), name


@settings(max_examples=500)
@given(fields=sends)
@example(fields={"producer_id": 0, "sequence_id": 0})
@example(fields={"producer_id": 2**64 - 1, "sequence_id": 2**64 - 1, "num_messages": -1,
                 "expected_offset": 2**63, "offset_epoch": 1})
def test_round_trip_against_the_protobuf_encoder(fields):
    data = command(Type.SEND, **fields).SerializeToString()
    view = parse_send(data, 0, len(data))
    assert view is not None  # every plain SEND the encoder writes takes the fast path
    _agrees(view, _protobuf(data))


@settings(max_examples=300)
@given(fields=sends, prefix=st.binary(max_size=8), suffix=st.binary(max_size=8))
def test_reads_only_its_slice_of_the_buffer(fields, prefix, suffix):
    data = command(Type.SEND, **fields).SerializeToString()
    buf = prefix + data + suffix
    view = parse_send(buf, len(prefix), len(prefix) + len(data))
    assert view is not None
    _agrees(view, _protobuf(data))


@settings(max_examples=1000)
@given(fields=sends, cut=st.integers(0, 80), junk=st.binary(max_size=12), at=st.integers(0, 80))
def test_damaged_bytes_never_decode_differently(fields, cut, junk, at):
    """Truncate, splice in junk: the fast path returns None or protobuf's answer."""
    data = command(Type.SEND, **fields).SerializeToString()
    at = min(at, len(data))
    for damaged in (data[:cut], data[:at] + junk + data[at:], data[:at] + junk):
        view = parse_send(damaged, 0, len(damaged))
        if view is not None:
            ref = _protobuf(damaged)
            assert ref is not None, damaged.hex()
            _agrees(view, ref)


@settings(max_examples=1000)
@given(body=st.binary(max_size=60))
def test_arbitrary_send_bodies(body):
    data = bytes([0x08, Type.SEND, 0x32, len(body)]) + body
    view = parse_send(data, 0, len(data))
    if view is not None:
        ref = _protobuf(data)
        assert ref is not None, data.hex()
        _agrees(view, ref)


@pytest.mark.parametrize("cmd", [
    command(Type.SEND, producer_id=1, sequence_id=2, message_id=pb.MessageIdData(ledgerId=1, entryId=2)),
    command(Type.PING),
    pb.BaseCommand(type=Type.SEND),  # no send sub-message
])
def test_steps_aside_for_what_it_does_not_read(cmd):
    data = cmd.SerializeToString()
    assert parse_send(data, 0, len(data)) is None


def test_missing_required_field_is_left_to_protobuf():
    data = bytes([0x08, Type.SEND, 0x32, 2, 0x08, 0x01])  # no sequence_id
    assert parse_send(data, 0, len(data)) is None
    decoder = FrameDecoder(fast_send=True)
    block = b"\x0e\x01" + b"\0" * 8
    decoder.feed((4 + len(data) + len(block)).to_bytes(4, "big") + len(data).to_bytes(4, "big") + data + block)
    with pytest.raises(ProtocolError, match="lacks required fields"):
        decoder.next_frame()


def test_has_field_knows_the_message():
    data = command(Type.SEND, producer_id=1, sequence_id=2, expected_offset=0).SerializeToString()
    view = parse_send(data, 0, len(data))
    assert view.HasField("expected_offset") and not view.HasField("offset_epoch")
    assert view.HasField("producer_id")
    with pytest.raises(ValueError):
        view.HasField("nonsense")


@settings(max_examples=200)
@given(fields=sends, metadata=st.binary(max_size=30), payload=st.binary(max_size=200))
def test_frame_decoder_gives_the_same_frame_either_way(fields, metadata, payload):
    frame = encode_send(command(Type.SEND, **fields), metadata, payload)
    slow, fast = FrameDecoder(), FrameDecoder(fast_send=True)
    slow.feed(frame * 2)
    fast.feed(frame * 2)
    for _ in range(2):
        a, b = slow.next_frame(), fast.next_frame()
        assert isinstance(b.command, SendCommandView)
        _agrees(b.command, a.command.send)
        assert bytes(a.block.raw) == bytes(b.block.raw)
        assert a.block.verify_checksum() and b.block.verify_checksum()
    assert slow.next_frame() is None and fast.next_frame() is None


@settings(max_examples=300)
@given(frames=st.lists(st.binary(min_size=0, max_size=12), min_size=1, max_size=5), chunk=st.integers(1, 7))
def test_tiny_and_garbage_frames_fail_cleanly(frames, chunk):
    """Short frames (under the SEND peek) and junk give frames or ProtocolError, nothing else."""
    data = b"".join(len(f).to_bytes(4, "big") + f for f in frames)
    decoder = FrameDecoder(fast_send=True)
    try:
        for i in range(0, len(data), chunk):
            decoder.feed(data[i:i + chunk])
            while decoder.next_frame() is not None:
                pass
    except ProtocolError:
        pass


@settings(max_examples=300)
@given(fields=sends, metadata=st.binary(max_size=30), payload=st.binary(max_size=200),
       flip=st.one_of(st.none(), st.integers(0, 10_000)), meta_size=st.one_of(st.none(), st.integers(0, 2**32 - 1)))
def test_the_checksum_verdict_is_the_same_on_every_path(fields, metadata, payload, flip, meta_size):
    """A damaged byte anywhere in the block, or a lying metadata size: the
    compiled decoder's verdict (taken while splitting the frame) is the one
    the Python check gives on the same block."""
    frame = bytearray(encode_send(command(Type.SEND, **fields), metadata, payload))
    block_at = 8 + int.from_bytes(frame[4:8], "big")
    if flip is not None:
        frame[block_at + flip % (len(frame) - block_at)] ^= 0x5A
    if meta_size is not None:
        frame[block_at + 6:block_at + 10] = meta_size.to_bytes(4, "big")
    fast = FrameDecoder(fast_send=True)
    fast.feed(bytes(frame))
    got = fast.next_frame()
    again = PayloadBlock(got.block.raw)  # checked = -1: the Python check
    try:
        expected = again.verify_checksum()
    except ProtocolError:
        expected = ProtocolError
    try:
        verdict = got.block.verify_checksum()
    except ProtocolError:
        verdict = ProtocolError
    assert verdict == expected
    if hot is not None and isinstance(got.command, SendCommandView) and got.block.checked >= 0:
        assert got.block.checked == (expected is True)


@settings(max_examples=300)
@given(data=st.binary(max_size=3000), initial=st.integers(0, 2**32 - 1))
def test_the_compiled_crc32c_is_the_packages(data, initial):
    if hot is None:
        return  # test_the_compiled_hot_path_is_built says why
    assert hot.crc32c(data, initial) == crc32c(data, initial)
    assert hot.crc32c(memoryview(data)[1:]) == crc32c(data[1:])



@pytest.mark.parametrize("length", [767, 768, 769, 24575, 24576, 24577, 3 * 24576 + 3 * 256 + 13, 4 * 1024 * 1024 + 5])
def test_the_compiled_crc32c_is_the_packages_over_three_chains(length):
    """Buffers long enough for the three chains at once (three blocks of 256
    bytes or of 8 KiB, then the rest): the same sum as the package's, from
    any start and alignment, and a byte changed in any block changes it."""
    if hot is None:
        return  # test_the_compiled_hot_path_is_built says why
    data = bytes((i * 7919 + (i >> 8) * 31) & 0xFF for i in range(length + 3))
    for skip, initial in ((0, 0), (1, 0x12345678), (3, 0xFFFFFFFF)):
        view = memoryview(data)[skip:skip + length]
        assert hot.crc32c(view, initial) == crc32c(bytes(view), initial)
    whole = hot.crc32c(data[:length])
    for at in (0, length // 3, length // 2, 2 * length // 3 + 1, length - 1):
        changed = bytearray(data[:length])
        changed[at] ^= 0x01
        assert hot.crc32c(changed) == crc32c(bytes(changed)) != whole


MAX_FRAME = 5 * 1024 * 1024


def _same_frames(got, expected) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert type(a.command) is type(b.command)
        assert a.command == b.command
        assert (a.block is None) == (b.block is None)
        if a.block is not None:
            assert bytes(a.block.raw) == bytes(b.block.raw)
            assert a.block.verify_checksum() == b.block.verify_checksum()


@settings(max_examples=200)
@given(run=st.lists(sends, max_size=5), payload=st.binary(max_size=64),
       tail=st.sampled_from(["nothing", "partial", "flow", "too large", "too small"]))
def test_a_run_of_sends_is_split_as_one_frame_at_a_time_would(run, payload, tail):
    """``send_frames`` takes exactly the plain SENDs ahead, both twins alike,
    and stops before anything else for the general decoder."""
    frames = [encode_send(command(Type.SEND, **fields), b"\x0a\x01p", payload) for fields in run]
    data = b"".join(frames)
    ends_at = len(data)
    data += {"nothing": b"", "partial": frames[0][:-1] if frames else b"\x00\x00",
             "flow": encode_command(command(Type.FLOW, consumer_id=1, messagePermits=5)),
             "too large": (MAX_FRAME + 1).to_bytes(4, "big") + bytes(20),
             "too small": (3).to_bytes(4, "big") + bytes(20)}[tail]
    one_by_one = FrameDecoder(MAX_FRAME, fast_send=True)
    one_by_one.feed(data)
    expected = [one_by_one.next_frame() for _ in run]
    got, pos = send_frames_python(data, 0, MAX_FRAME)
    assert pos == ends_at
    _same_frames(got, expected)
    if hot is not None:
        compiled, compiled_pos = hot.send_frames(data, 0, MAX_FRAME)
        assert compiled_pos == ends_at
        _same_frames(compiled, expected)


@settings(max_examples=100)
@given(kinds=st.lists(st.sampled_from(["send", "flow", "ping"]), max_size=8), chunk=st.integers(1, 200))
def test_the_decoder_gives_the_same_frames_with_or_without_runs(kinds, chunk):
    """Taking runs of SENDs with ``next_sends`` between ``next_frame`` calls
    yields the frames, in order, that ``next_frame`` alone yields, however the
    bytes are chunked."""
    parts = []
    for i, kind in enumerate(kinds):
        if kind == "send":
            parts.append(encode_send(command(Type.SEND, producer_id=1, sequence_id=i), b"\x0a\x01p", b"x" * i))
        elif kind == "flow":
            parts.append(encode_command(command(Type.FLOW, consumer_id=1, messagePermits=i + 1)))
        else:
            parts.append(encode_command(command(Type.PING)))
    data = b"".join(parts)
    alone, runs = FrameDecoder(fast_send=True), FrameDecoder(fast_send=True)
    expected, got = [], []
    for i in range(0, len(data), chunk):
        alone.feed(data[i:i + chunk])
        runs.feed(data[i:i + chunk])
        while (frame := alone.next_frame()) is not None:
            expected.append(frame)
        while True:
            got += runs.next_sends()
            frame = runs.next_frame()
            if frame is None:
                break
            got.append(frame)
    assert len(expected) == len(kinds)
    _same_frames(got, expected)
