"""Entries built by the producer's batch builder, parsed the way the consumer does."""
import pytest
from hypothesis import given, settings, strategies as st

from magnetar.client.batch_builder import BatchBuilder, single_entry
from magnetar.client.errors import ChecksumError, InvalidMessage
from magnetar.client.inbound import decode_entry
from magnetar.protocol import FrameDecoder, Type, command, compression, pb
from magnetar.protocol.frames import broker_entry_metadata_block, encode_payload_command, encode_send

TOPIC = "persistent://public/default/t"


def as_delivered(entry, ledger=3, entry_id=9, bem_index=None, ack_set=None, corrupt=False):
    """The MESSAGE frame a broker would build from a SEND of ``entry``."""
    send = encode_send(command(Type.SEND, producer_id=1, sequence_id=entry.sequence_id),
                       entry.metadata, entry.payload)
    decoder = FrameDecoder()
    decoder.feed(send)
    block = bytes(decoder.next_frame().block.raw)
    if bem_index is not None:
        bem = pb.BrokerEntryMetadata(broker_timestamp=1, index=bem_index).SerializeToString()
        block = broker_entry_metadata_block(bem) + block
    if corrupt:
        block = block[:-1] + bytes([block[-1] ^ 1])
    msg = command(Type.MESSAGE, consumer_id=1, message_id=pb.MessageIdData(ledgerId=ledger, entryId=entry_id),
                  ack_set=ack_set)
    decoder = FrameDecoder()
    decoder.feed(b"".join(bytes(p) for p in encode_payload_command(msg, block)))
    frame = decoder.next_frame()
    return frame.command.message, frame.block


def test_single_entry_is_not_a_batch():
    entry = single_entry("p", 5, b"hello", properties={"a": "1"}, partition_key="k", ordering_key=b"o",
                         event_timestamp=77)
    meta = pb.MessageMetadata.FromString(entry.metadata)
    assert not meta.HasField("num_messages_in_batch")
    cmd, block = as_delivered(entry, bem_index=40)
    [msg], count = decode_entry(TOPIC, cmd, block)
    assert count == 1
    assert msg.data() == b"hello" and msg.properties() == {"a": "1"}
    assert msg.partition_key() == "k" and msg.ordering_key() == "o" and msg.event_timestamp() == 77
    assert msg.message_id().batch_index() == -1 and msg.offset == 40
    assert msg.sequence_id() == 5 and msg.producer_name() == "p" and msg.topic_name() == TOPIC


def build_batch(payloads, compression_type=compression.NONE, first_seq=10):
    builder = BatchBuilder(max_messages=len(payloads) + 1)
    for i, data in enumerate(payloads):
        builder.add(first_seq + i, data, properties={"i": str(i)}, partition_key=f"k{i}",
                    completion=i)
    return builder.seal("prod", compression_type)


@pytest.mark.parametrize("codec", [compression.NONE, compression.LZ4, compression.ZSTD, compression.ZLIB])
def test_batch_round_trip(codec):
    payloads = [b"x" * i + bytes([i]) for i in range(20)]
    entry = build_batch(payloads, codec)
    meta = pb.MessageMetadata.FromString(entry.metadata)
    assert meta.num_messages_in_batch == 20 and meta.sequence_id == 10 and meta.highest_sequence_id == 29
    assert entry.num_messages == 20 and entry.completions == list(range(20))
    assert meta.compression == codec
    cmd, block = as_delivered(entry, bem_index=119)
    messages, count = decode_entry(TOPIC, cmd, block)
    assert count == 20
    assert [m.data() for m in messages] == payloads
    assert [m.properties()["i"] for m in messages] == [str(i) for i in range(20)]
    assert [m.partition_key() for m in messages] == [f"k{i}" for i in range(20)]
    assert [m.message_id().batch_index() for m in messages] == list(range(20))
    assert all(m.message_id().batch_size() == 20 for m in messages)
    # index is the offset of the entry's LAST message
    assert [m.offset for m in messages] == list(range(100, 120))
    assert [m.sequence_id() for m in messages] == list(range(10, 30))


def test_offset_is_none_without_broker_entry_metadata():
    cmd, block = as_delivered(build_batch([b"a", b"b"]))
    assert [m.offset for m in decode_entry(TOPIC, cmd, block)[0]] == [None, None]


def test_ack_set_masks_members_but_permits_count_all():
    # bit set = deliver: members 1 and 3 of 4
    cmd, block = as_delivered(build_batch([b"0", b"1", b"2", b"3"]), ack_set=[0b1010])
    messages, count = decode_entry(TOPIC, cmd, block)
    assert [m.data() for m in messages] == [b"1", b"3"] and count == 4


def test_checksum_mismatch_is_reported():
    cmd, block = as_delivered(build_batch([b"abc", b"def"]), corrupt=True)
    with pytest.raises(ChecksumError) as info:
        decode_entry(TOPIC, cmd, block)
    assert info.value.num_messages == 2


def test_truncated_batch_is_invalid():
    entry = build_batch([b"abc", b"def"])
    entry.payload = entry.payload[:-2]
    cmd, block = as_delivered(entry)
    with pytest.raises(InvalidMessage):
        decode_entry(TOPIC, cmd, block)


def test_builder_fullness_and_reset():
    builder = BatchBuilder(max_messages=3, max_bytes=10_000)
    builder.add(0, b"a")
    builder.add(1, b"b")
    assert not builder.is_full and len(builder) == 2
    builder.add(2, b"c")
    assert builder.is_full
    entry = builder.seal("p")
    assert entry.num_messages == 3 and len(builder) == 0 and builder.size_bytes == 0
    with pytest.raises(ValueError):
        builder.seal("p")
    by_size = BatchBuilder(max_messages=1000, max_bytes=100)
    by_size.add(0, b"x" * 60)
    assert not by_size.is_full
    by_size.add(1, b"x" * 60)
    assert by_size.is_full


def test_builder_keeps_payload_objects_until_seal():
    payload = b"y" * 1000
    builder = BatchBuilder()
    builder.add(0, payload)
    assert builder._parts[-1] is payload


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=40),
       st.sampled_from([compression.NONE, compression.LZ4, compression.ZSTD]))
def test_any_batch_round_trips(payloads, codec):
    cmd, block = as_delivered(build_batch(payloads, codec))
    messages, count = decode_entry(TOPIC, cmd, block)
    assert count == len(payloads) and [m.data() for m in messages] == payloads
