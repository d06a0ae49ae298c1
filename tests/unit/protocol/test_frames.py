"""Frame codec: round trips, any chunking, garbage input."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.protocol import Connection, ProtocolError, Role, pb
from magnetar.protocol.commands import Type, command
from magnetar.protocol.frames import (
    BufferPool,
    FrameDecoder,
    FrameTooLarge,
    broker_entry_metadata_block,
    checksummed_block,
    encode_command,
    encode_send,
)


def _send(seq: int, payload: bytes, props: dict[str, str]) -> bytes:
    md = pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1)
    for k, v in props.items():
        md.properties.add(key=k, value=v)
    return encode_send(command(Type.SEND, producer_id=7, sequence_id=seq), md.SerializeToString(), payload)


@given(
    frames=st.lists(
        st.tuples(st.integers(0, 2**63), st.binary(max_size=2000), st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)),
        min_size=1, max_size=8,
    ),
    cuts=st.lists(st.integers(1, 500), max_size=20),
)
@settings(max_examples=200, deadline=None)
def test_payload_frames_round_trip_in_any_chunking(frames, cuts):
    wire = b"".join(_send(seq, payload, props) for seq, payload, props in frames)
    decoder = FrameDecoder()
    got = []
    pos = 0
    for cut in cuts + [len(wire)]:
        decoder.feed(wire[pos : pos + cut])
        pos += cut
        while (frame := decoder.next_frame()) is not None:
            got.append(frame)
    assert len(got) == len(frames)
    for frame, (seq, payload, props) in zip(got, frames):
        assert frame.command.send.sequence_id == seq
        assert frame.block.verify_checksum()
        assert bytes(frame.block.payload) == payload
        assert {kv.key: kv.value for kv in frame.block.metadata.properties} == props


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_garbage_raises_only_protocol_error(data):
    decoder = FrameDecoder(max_frame_size=1 << 20)
    decoder.feed(data)
    try:
        while decoder.next_frame() is not None:
            pass
    except ProtocolError:
        pass


def test_a_frame_claiming_two_gib_is_refused_at_once():
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">I", 2**31) + b"\x00" * 10)
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()


def test_wrong_checksum_is_detected():
    wire = bytearray(_send(1, b"payload", {}))
    wire[-1] ^= 0xFF
    decoder = FrameDecoder()
    decoder.feed(bytes(wire))
    frame = decoder.next_frame()
    assert not frame.block.verify_checksum()


def test_missing_required_field_is_a_protocol_error():
    cmd = pb.BaseCommand(type=Type.SEND)
    cmd.send.producer_id = 1  # sequence_id (required) missing
    body = cmd.SerializePartialToString()
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">II", len(body) + 4, len(body)) + body)
    with pytest.raises(ProtocolError, match="required"):
        decoder.next_frame()


def test_broker_entry_metadata_block_is_skipped_for_the_checksum():
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1).SerializeToString()
    bem = pb.BrokerEntryMetadata(broker_timestamp=5, index=9).SerializeToString()
    block = broker_entry_metadata_block(bem) + checksummed_block(md, b"x")
    from magnetar.protocol.frames import encode_payload_command

    wire = b"".join(bytes(p) for p in encode_payload_command(
        command(Type.MESSAGE, consumer_id=1, message_id=pb.MessageIdData(ledgerId=1, entryId=2)), block))
    decoder = FrameDecoder()
    decoder.feed(wire)
    frame = decoder.next_frame()
    assert frame.block.broker_entry_metadata.index == 9
    assert frame.block.verify_checksum()
    assert bytes(frame.block.payload) == b"x"


def test_handshake_rules():
    server = Connection(Role.SERVER)
    with pytest.raises(ProtocolError, match="CONNECT first"):
        server.receive_data(encode_command(command(Type.PING)))
    client = Connection(Role.CLIENT)
    with pytest.raises(ProtocolError):
        client.send(command(Type.PING))
    server = Connection(Role.SERVER)
    server.receive_data(client.send(command(Type.CONNECT, client_version="t", protocol_version=20)))
    with pytest.raises(ProtocolError, match="before CONNECTED"):
        server.send(command(Type.PONG))
    client.receive_data(server.send(command(Type.CONNECTED, server_version="m", protocol_version=20)))
    with pytest.raises(ProtocolError, match="twice"):
        server.receive_data(client.send(command(Type.CONNECT, client_version="t")))


@given(
    sizes=st.lists(st.sampled_from([0, 10, 1000, 70_000, 200_000]), min_size=1, max_size=6),
    cuts=st.lists(st.integers(1, 90_000), max_size=30),
)
@settings(max_examples=100, deadline=None)
def test_large_frames_received_into_buffers_of_their_size(sizes, cuts):
    """With preallocate_from, large frames come out whole in any chunking,
    the same as without it, each a read-only view of a buffer of exactly
    its size (no copy once complete); small frames are untouched."""
    frames = [(i, bytes([i % 251]) * size, {"i": str(i)}) for i, size in enumerate(sizes)]
    wire = b"".join(_send(seq, payload, props) for seq, payload, props in frames)
    plain, big = FrameDecoder(), FrameDecoder(preallocate_from=64 * 1024)
    got: dict[str, list] = {"plain": [], "big": []}
    pos = 0
    for cut in cuts + [len(wire)]:
        for name, decoder in (("plain", plain), ("big", big)):
            decoder.feed(wire[pos : pos + cut])
            while (frame := decoder.next_frame()) is not None:
                got[name].append(frame)
        pos += cut
    assert big.buffered == plain.buffered == 0
    assert len(got["big"]) == len(frames)
    for frame, other, (seq, payload, props) in zip(got["big"], got["plain"], frames):
        assert frame.command == other.command
        assert bytes(frame.block.payload) == bytes(other.block.payload) == payload
        assert frame.block.verify_checksum()
        assert frame.block.raw.readonly


def test_a_large_frame_that_trickles_in_is_one_buffer_of_its_size():
    wire = _send(1, b"x" * 200_000, {}) + _send(2, b"small", {})
    decoder = FrameDecoder(preallocate_from=64 * 1024)
    frames = []
    for start in range(0, len(wire), 65_536):
        decoder.feed(wire[start : start + 65_536])
        while (frame := decoder.next_frame()) is not None:
            frames.append(frame)
    assert [f.command.send.sequence_id for f in frames] == [1, 2]
    raw = frames[0].block.raw
    assert isinstance(raw.obj, bytearray) and len(raw.obj) >= len(wire) - len(_send(2, b"small", {}))
    assert raw.readonly and bytes(frames[0].block.payload) == b"x" * 200_000


def _receive_in_place(decoder: FrameDecoder, wire: bytes) -> list:
    frames, at = [], 0
    while at < len(wire):
        buf = decoder.receive_buffer()
        n = min(len(buf), len(wire) - at, 65_536)
        buf[:n] = wire[at:at + n]
        decoder.received(n)
        at += n
        while (frame := decoder.next_frame()) is not None:
            frames.append(frame)
    return frames


def test_a_large_frames_buffer_is_reused_only_once_nothing_refers_to_it():
    """A client's large frames (fetch responses) go into buffers it had
    before once their frames are gone, never into one a frame (or a view
    of it) still uses."""
    decoder = FrameDecoder(preallocate_from=64 * 1024)
    (first,) = _receive_in_place(decoder, _send(1, b"a" * 200_000, {}))
    kept = first.block.payload[:10]  # a view of the first frame, kept
    (second,) = _receive_in_place(decoder, _send(2, b"b" * 200_000, {}))
    del first
    (third,) = _receive_in_place(decoder, _send(3, b"c" * 200_000, {}))
    assert len({id(f.block.raw.obj) for f in (second, third)} | {id(kept.obj)}) == 3  # all in use: three buffers
    assert bytes(kept) == b"a" * 10 and bytes(second.block.payload) == b"b" * 200_000
    buffers = {id(kept.obj), id(second.block.raw.obj)}
    del kept, second
    (fourth,) = _receive_in_place(decoder, _send(4, b"d" * 200_000, {}))
    assert id(fourth.block.raw.obj) in buffers  # a released one, not a new one
    assert bytes(third.block.payload) == b"c" * 200_000 and bytes(fourth.block.payload) == b"d" * 200_000
    assert [f.command.send.sequence_id for f in (third, fourth)] == [3, 4]


def test_a_client_connection_preallocates_and_a_server_only_once_connected():
    """A server lets no peer make it allocate a frame's size before the
    bytes arrive until the peer has passed the handshake (and any
    authentication: CONNECTED is sent after it)."""
    assert Connection(Role.CLIENT).decoder.preallocate_from == 64 * 1024
    server = Connection(Role.SERVER)
    assert server.decoder.preallocate_from is None
    server.receive_data(encode_command(command(Type.CONNECT, client_version="t", protocol_version=21)))
    assert server.decoder.preallocate_from is None
    server.send(command(Type.CONNECTED, server_version="t", protocol_version=21))
    assert server.decoder.preallocate_from == 64 * 1024
    # A large SEND now arrives into a buffer of its size, reused for the next once it is dropped.
    (first,) = _receive_in_place(server.decoder, _send(1, b"a" * 200_000, {}))
    buffer = id(first.block.raw.obj)
    assert isinstance(first.block.raw.obj, bytearray) and bytes(first.block.payload) == b"a" * 200_000
    del first
    (second,) = _receive_in_place(server.decoder, _send(2, b"b" * 200_000, {}))
    assert id(second.block.raw.obj) == buffer and bytes(second.block.payload) == b"b" * 200_000


def test_a_servers_received_chunks_are_reused_only_once_no_frame_of_them_is_left():
    """With reuse_chunks (a broker's decoder), frames found whole in a read
    are views of the chunk it was read into, and that chunk is read into
    again only once none of them is left anywhere."""
    pool = BufferPool()
    decoder = FrameDecoder(fast_send=True, reuse_chunks=True, buffers=pool)
    wire = b"".join(_send(i, bytes([i]) * 100, {}) for i in range(3))
    buf = decoder.receive_buffer()
    chunk = id(buf.obj)  # ids only: a reference to a chunk would keep it out of reuse
    buf[:len(wire)] = wire
    del buf
    decoder.received(len(wire))
    frames = [decoder.next_frame() for _ in range(3)]
    assert decoder.next_frame() is None
    assert all(id(f.block.raw.obj) == chunk for f in frames)  # no copy of the chunk
    kept = frames[1].block.payload
    del frames
    again = decoder.receive_buffer()
    assert id(again.obj) != chunk  # a payload of it is still held: a second chunk
    again[:len(wire)] = _send(9, b"z" * 100, {}) * 3
    second = id(again.obj)
    del again
    decoder.received(len(wire))
    later = [decoder.next_frame() for _ in range(3)]
    assert bytes(kept) == bytes([1]) * 100 and [bytes(f.block.payload) for f in later] == [b"z" * 100] * 3
    del kept, later
    assert id(decoder.receive_buffer().obj) == chunk  # nothing refers to either: the first kept one again
    assert [id(c) for c in pool._buffers] == [chunk, second]


def test_a_brokers_connections_share_their_receive_buffers():
    """Server connections take their buffers from one pool only while they
    read into them: a thousand connections that each sent a large entry
    hold no buffer of their own once their frames are gone."""
    pool = BufferPool(keep=8, mapped=True)  # as a broker's: pages taken as bytes arrive
    servers = [Connection(Role.SERVER, buffers=pool) for _ in range(1000)]
    wire = _send(1, b"e" * 150_000, {})
    for server in servers:
        server.receive_data(encode_command(command(Type.CONNECT, client_version="t", protocol_version=21)))
        server.send(command(Type.CONNECTED, server_version="t", protocol_version=21))
        (frame,) = _receive_in_place(server.decoder, wire)
        assert bytes(frame.block.payload) == b"e" * 150_000
    # A read's chunk, the large frame being gathered beside it, the last frame still held: not one per connection.
    assert len(pool) <= 3


@given(
    sizes=st.lists(st.sampled_from([0, 10, 1000, 70_000, 300_000]), min_size=1, max_size=6),
    reads=st.lists(st.integers(1, 400_000), max_size=40),
    server=st.booleans(),
    keep=st.sets(st.integers(0, 5)),
)
@settings(max_examples=150, deadline=None)
def test_frames_received_in_place_in_any_chunking(sizes, reads, server, keep):
    """A socket writing into receive_buffer (as a BufferedProtocol's
    transport does, up to the buffer's length per read) gives the frames
    fed bytes give; with a server's reused chunks too, where the frames
    not kept are dropped as soon as they are read and the kept ones must
    stay intact."""
    frames = [(i, bytes([i % 251]) * size, {"i": str(i)}) for i, size in enumerate(sizes)]
    wire = memoryview(b"".join(_send(seq, payload, props) for seq, payload, props in frames))
    decoder = FrameDecoder(preallocate_from=64 * 1024, fast_send=server, reuse_chunks=server)
    got, kept, pos = [], [], 0
    for want in reads + [len(wire)] * (len(wire) // (64 * 1024) + 2):
        if pos >= len(wire):
            break
        buf = decoder.receive_buffer()
        n = min(want, len(buf), len(wire) - pos)
        buf[:n] = wire[pos : pos + n]
        del buf
        decoder.received(n)
        pos += n
        while (frame := decoder.next_frame()) is not None:
            got.append((frame.command.send.sequence_id, bytes(frame.block.payload)))
            if frame.command.send.sequence_id in keep:
                kept.append(frame)
        frame = None
    assert pos == len(wire) and decoder.buffered == 0
    assert got == [(s, p) for s, p, _ in frames]
    assert [(f.command.send.sequence_id, bytes(f.block.payload)) for f in kept] == [
        (s, p) for s, p, _ in frames if s in keep]


def test_a_large_frame_is_received_in_place_after_its_first_read():
    wire = _send(1, b"y" * 300_000, {}) + _send(2, b"small", {})
    decoder = FrameDecoder(preallocate_from=64 * 1024)
    buf = decoder.receive_buffer()
    buf[:1000] = wire[:1000]  # the first read: the size, in the scratch
    decoder.received(1000)
    assert decoder.next_frame() is None
    rest = decoder.receive_buffer()
    assert rest.obj is not decoder._scratch and len(rest) == len(wire) - len(_send(2, b"small", {})) - 1000
    rest[:] = wire[1000 : 1000 + len(rest)]
    decoder.received(len(rest))
    frame = decoder.next_frame()
    assert frame.block.raw.obj is rest.obj and bytes(frame.block.payload) == b"y" * 300_000
    tail = decoder.receive_buffer()
    tail[: len(wire) - 1000 - len(rest)] = wire[1000 + len(rest) :]
    decoder.received(len(wire) - 1000 - len(rest))
    assert decoder.next_frame().command.send.sequence_id == 2
