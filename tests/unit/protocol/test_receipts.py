"""SEND_RECEIPT templates and varints: byte for byte what protobuf writes."""
from __future__ import annotations

import os

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from google.protobuf.internal.encoder import _VarintBytes

from magnetar.broker.entries.entry_format import build_entry, build_entry_python
from magnetar.protocol import pb, varint
from magnetar.protocol.compiled import hot
from magnetar.protocol.commands import Type
from magnetar.protocol.frames import FrameDecoder, broker_entry_metadata_block, encode_command
from magnetar.protocol.receipts import ReceiptTemplate, broker_entry_metadata_prefix

U64 = st.integers(0, 2**64 - 1)


@given(value=U64)
@example(value=0)
@example(value=127)
@example(value=128)
@example(value=16383)
@example(value=16384)
@example(value=2**28 - 1)
@example(value=2**28)
@example(value=2**42 - 1)
@example(value=2**42)
@example(value=1_700_000_000_123)
@example(value=2**64 - 1)
def test_varint_matches_protobuf_and_reads_back(value):
    data = varint.encode(value)
    assert data == _VarintBytes(value)
    assert varint.decode(b"\xff" + data + b"\x00", 1) == (value, 1 + len(data))


@pytest.mark.parametrize("value", [-1, 2**64])
def test_varint_refuses_numbers_outside_uint64(value):
    with pytest.raises(ValueError):
        varint.encode(value)


@pytest.mark.parametrize("data", [b"\xff" * 10 + b"\x01", b"\xff" * 9 + b"\x02"])
def test_varint_decode_refuses_over_long_or_too_large(data):
    with pytest.raises(ValueError):
        varint.decode(data, 0)


def test_varint_decode_truncated():
    with pytest.raises(IndexError):
        varint.decode(b"\x80\x80", 0)


@settings(max_examples=500)
@given(pid=U64, seq=U64, highest=U64, ledger=U64, entry=U64, offset=U64)
@example(pid=0, seq=0, highest=0, ledger=0, entry=0, offset=0)
@example(pid=1, seq=5, highest=5, ledger=2**64 - 1, entry=2**64 - 1, offset=0)
def test_receipt_is_byte_for_byte_the_protobuf_encoding(pid, seq, highest, ledger, entry, offset):
    expected = encode_command(pb.BaseCommand(type=Type.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(
        producer_id=pid, sequence_id=seq, highest_sequence_id=highest, offset=offset,
        message_id=pb.MessageIdData(ledgerId=ledger, entryId=entry))))
    frame = ReceiptTemplate(pid).frame(seq, highest, ledger, entry, offset)
    assert frame == expected
    assert ReceiptTemplate(pid).frame_python(seq, highest, ledger, entry, offset) == expected
    decoder = FrameDecoder()
    decoder.feed(frame)
    receipt = decoder.next_frame().command.send_receipt
    assert (receipt.producer_id, receipt.sequence_id, receipt.highest_sequence_id, receipt.offset,
            receipt.message_id.ledgerId, receipt.message_id.entryId) == (pid, seq, highest, offset, ledger, entry)


@pytest.mark.parametrize("numbers", [(-1, 0, 0, 0, 0), (0, 0, 0, 0, 2**64), (0, -3, 0, 0, 0)])
def test_receipt_refuses_numbers_outside_uint64(numbers):
    with pytest.raises(ValueError):
        ReceiptTemplate(1).frame(*numbers)
    with pytest.raises(ValueError):
        ReceiptTemplate(1).frame_python(*numbers)


def test_the_compiled_hot_path_is_built():
    """``make install`` builds ``_hot.c``; without it the broker runs the
    slower Python twins. MAGNETAR_PURE_PYTHON=1 is the only way to ask for them."""
    if os.environ.get("MAGNETAR_PURE_PYTHON") == "1":
        assert hot is None
    else:
        assert hot is not None, "magnetar/protocol/_hot.c was not built: run make install (needs gcc)"


@settings(max_examples=300)
@given(block=st.binary(max_size=300), time_ms=U64, first=st.integers(0, 2**63), n=st.integers(1, 2**32 - 1))
@example(block=b"", time_ms=0, first=0, n=1)
def test_build_entry_twins_write_the_same_bytes(block, time_ms, first, n):
    expected = broker_entry_metadata_block(pb.BrokerEntryMetadata(
        broker_timestamp=time_ms, index=first + n - 1, magnetar_num_messages=n).SerializeToString()) + block
    assert build_entry_python(block, time_ms, first, n) == expected
    assert build_entry(memoryview(block), time_ms, first, n) == expected


@pytest.mark.parametrize("args", [(0, 0, 2**32), (-1, 0, 1), (0, -1, 1), (0, 2**64 - 1, 2)])
def test_build_entry_refuses_numbers_that_do_not_fit(args):
    for build in (build_entry, build_entry_python):
        with pytest.raises(ValueError):
            build(b"x", *args)


@settings(max_examples=300)
@given(time_ms=U64, index=U64, n=st.integers(0, 2**32 - 1))
@example(time_ms=0, index=0, n=0)
def test_broker_entry_metadata_prefix_is_the_protobuf_encoding(time_ms, index, n):
    bem = pb.BrokerEntryMetadata(broker_timestamp=time_ms, index=index, magnetar_num_messages=n).SerializeToString()
    assert broker_entry_metadata_prefix(time_ms, index, n) == broker_entry_metadata_block(bem)


def test_broker_entry_metadata_prefix_refuses_a_count_over_uint32():
    with pytest.raises(ValueError):
        broker_entry_metadata_prefix(0, 0, 2**32)


@settings(max_examples=100)
@given(pid=U64, receipts=st.lists(st.tuples(U64, U64, st.integers(0, 3), U64, U64), min_size=1, max_size=20))
def test_one_template_across_ledgers(pid, receipts):
    """The kept ledger-id encoding never leaks into a receipt of another ledger."""
    template = ReceiptTemplate(pid)
    for seq, highest, ledger, entry, offset in receipts:
        expected = encode_command(pb.BaseCommand(type=Type.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(
            producer_id=pid, sequence_id=seq, highest_sequence_id=highest, offset=offset,
            message_id=pb.MessageIdData(ledgerId=ledger, entryId=entry))))
        assert template.frame(seq, highest, ledger, entry, offset) == expected
        assert template.frame(seq, seq, ledger, entry, offset) == encode_command(pb.BaseCommand(
            type=Type.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(
                producer_id=pid, sequence_id=seq, highest_sequence_id=seq, offset=offset,
                message_id=pb.MessageIdData(ledgerId=ledger, entryId=entry))))
