"""SEND_RECEIPTs read in runs (protocol/receipt_runs.py and its compiled
twin) against protobuf: what is read is what protobuf reads, runs stop at
the first frame that is not a plain receipt, and the client's
``receive_data_in_runs`` gives the same stream as ``receive_data``."""
from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.protocol import Connection, Role, pb
from magnetar.protocol.commands import Type, command
from magnetar.protocol.compiled import hot
from magnetar.protocol.frames import Frame, encode_command
from magnetar.protocol.receipt_runs import plain_receipt, receipt_runs_python
from magnetar.protocol.receipts import receipt_encoder

MAX_FRAME = 5 * 1024 * 1024
U64 = st.integers(0, (1 << 64) - 1)


def runs_of(data: bytes, start: int = 0):
    """Both twins, which must agree; the Python one's answer."""
    got = receipt_runs_python(data, start, MAX_FRAME)
    if hot is not None:
        assert hot.receipt_runs(data, start, MAX_FRAME) == got
    return got


def expand(runs) -> list[tuple[int, int]]:
    out = []
    for pid, first, last, count in runs:
        assert last - first + 1 == count >= 1
        out += [(pid, seq) for seq in range(first, last + 1)]
    return out


@st.composite
def receipts(draw):
    """A SEND_RECEIPT as protobuf encodes it, with any optional fields."""
    body = pb.CommandSendReceipt(producer_id=draw(st.integers(0, 3)), sequence_id=draw(U64))
    if draw(st.booleans()):
        body.message_id.ledgerId = draw(U64)
        body.message_id.entryId = draw(U64)
    if draw(st.booleans()):
        body.highest_sequence_id = draw(U64)
    if draw(st.booleans()):
        body.offset = draw(U64)
    return encode_command(pb.BaseCommand(type=Type.SEND_RECEIPT, send_receipt=body))


#: Frames that are not plain receipts: the runs stop before them.
OTHERS = [
    encode_command(command(Type.PING)),
    encode_command(command(Type.SEND_ERROR, producer_id=1, sequence_id=2, error=pb.PersistenceError,
                           message="disk")),
    # A receipt with a field this reader does not take (message_id.partition).
    encode_command(pb.BaseCommand(type=Type.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(
        producer_id=1, sequence_id=3, message_id=pb.MessageIdData(ledgerId=1, entryId=2, partition=4)))),
]


def decoded(frame: bytes) -> tuple[int, int]:
    cmd = pb.BaseCommand()
    cmd.ParseFromString(frame[8:])
    return cmd.send_receipt.producer_id, cmd.send_receipt.sequence_id


@given(st.lists(receipts(), max_size=30), st.sampled_from([None, *range(len(OTHERS))]), st.integers(0, 30))
@settings(max_examples=300, deadline=None)
def test_runs_read_what_protobuf_reads_up_to_the_first_other_frame(frames, other, cut):
    data = b"".join(frames)
    if other is not None:
        data += OTHERS[other] + b"".join(frames)
    whole = receipt_encoder(1)(1, 1, 1, 1, 1)
    data += whole[:min(cut, len(whole) - 1)]  # and a partial frame (or not)
    runs, pos = runs_of(data)
    assert expand(runs) == [decoded(f) for f in frames]
    assert pos == sum(map(len, frames))
    # Runs are maximal: two in a row are another producer or not the next id.
    for a, b in zip(runs, runs[1:]):
        assert a[0] != b[0] or a[2] + 1 != b[1]


def test_consecutive_ids_of_one_producer_make_one_run():
    p1, p2 = receipt_encoder(1), receipt_encoder(2)
    top = (1 << 64) - 1
    data = b"".join([p1(5, 5, 9, 0, 0), p1(6, 6, 9, 1, 1), p1(7, 7, 9, 2, 2), p2(8, 8, 9, 3, 0),
                     p1(9, 9, 9, 4, 3), p1(top, top, 9, 5, 4), p1(0, 0, 9, 6, 5)])
    runs, pos = runs_of(data)
    assert runs == [(1, 5, 7, 3), (2, 8, 8, 1), (1, 9, 9, 1), (1, top, top, 1), (1, 0, 0, 1)]
    assert pos == len(data)
    # From the middle of the buffer, and from its end.
    assert runs_of(data, len(p1(5, 5, 9, 0, 0)))[0][0] == (1, 6, 7, 2)
    assert runs_of(data, len(data)) == ([], len(data))


@given(st.binary(max_size=200), st.binary(max_size=60))
@settings(max_examples=500, deadline=None)
def test_any_bytes_are_read_alike_by_both_twins_and_never_raise(prefix, tail):
    data = receipt_encoder(1)(1, 1, 2, 3, 4) + prefix + tail
    runs, pos = runs_of(data)
    assert 0 < pos <= len(data)
    # Whatever was read as a receipt is one to protobuf too.
    at = 0
    for pid, seq in expand(runs):
        (total,) = struct.unpack_from(">I", data, at)
        assert decoded(data[at:at + 4 + total]) == (pid, seq)
        at += 4 + total
    assert at == pos


@given(st.binary(min_size=12, max_size=80))
@settings(max_examples=500, deadline=None)
def test_a_frame_read_as_plain_decodes_the_same_with_protobuf(body):
    frame = struct.pack(">II", len(body) + 4, len(body)) + body
    got = plain_receipt(frame, 0, len(frame))
    if got is not None:
        assert decoded(frame) == got


@given(st.lists(st.one_of(receipts(), st.sampled_from(OTHERS)), max_size=25),
       st.lists(st.integers(1, 400), max_size=10))
@settings(max_examples=200, deadline=None)
def test_a_client_reading_in_runs_sees_the_stream_receive_data_sees(frames, cuts):
    connected = encode_command(command(Type.CONNECTED, server_version="t", protocol_version=20))
    stream = connected + b"".join(frames)
    by_frame, in_runs = Connection(Role.CLIENT), Connection(Role.CLIENT)
    for conn in (by_frame, in_runs):
        conn.send(command(Type.CONNECT, client_version="t", protocol_version=20))
    plain, runs = [], []
    at = 0
    for size in [*cuts, len(stream)]:
        chunk = stream[at:at + size]
        at += size
        plain += by_frame.receive_data(chunk)
        runs += in_runs.receive_data_in_runs(chunk)
    # Expand the runs back into receipts and compare command by command.
    flat = []
    for item in runs:
        if type(item) is tuple:
            flat += [(Type.SEND_RECEIPT, pid, seq) for pid, seq in expand([item])]
        else:
            assert isinstance(item, Frame)
            flat.append(_key(item))
    assert flat == [_key(f) for f in plain]


def _key(frame: Frame):
    cmd = frame.command
    if cmd.type == Type.SEND_RECEIPT:
        return (Type.SEND_RECEIPT, cmd.send_receipt.producer_id, cmd.send_receipt.sequence_id)
    return (cmd.type, cmd.SerializeToString())
