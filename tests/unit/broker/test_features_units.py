"""Unit tests: Key_Shared hashing and selectors, the delayed index, schema compatibility,
compaction's batch rebuild, metadata peeking."""
from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, strategies as st

from magnetar.broker.topics.compaction import _parse, _rebuild
from magnetar.broker.subscriptions.consumer import Consumer
from magnetar.broker.subscriptions.delayed import DelayedIndex, now_ms
from magnetar.broker.entries.entry_format import build_entry, entry_info
from magnetar.broker.subscriptions.key_shared import (AutoSplitSelector, ConsumerAssignError, StickySelector, murmur3_32,
                                        slot_of)
from magnetar.broker.entries.message_peek import NONE_KEY, deliver_at, sticky_key
from magnetar.broker.topics.schemas import IncompatibleSchema, check_compatible, decode_version, encode_version
from magnetar.protocol import pb
from magnetar.protocol.batch import SingleMessage, encode_batch
from magnetar.protocol.compression import compress
from magnetar.protocol.frames import checksummed_block
from magnetar.storage import Position


def _entry(meta: pb.MessageMetadata, payload: bytes = b"x", n: int = 1) -> bytes:
    return build_entry(checksummed_block(meta.SerializeToString(), payload), 1, 0, n)


def _meta(**kw) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, **kw)


def test_murmur3_known_vectors():
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"hello") == 0x248BFA47
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723
    assert 0 <= slot_of(b"any key") < 65536


def test_sticky_key_prefers_ordering_key():
    assert sticky_key(_entry(_meta(partition_key="p", ordering_key=b"o"))) == b"o"
    assert sticky_key(_entry(_meta(partition_key="p"))) == b"p"
    assert sticky_key(_entry(_meta())) == NONE_KEY


def test_deliver_at_is_read_only_when_present():
    assert deliver_at(_entry(_meta())) is None
    assert deliver_at(_entry(_meta(deliver_at_time=12345))) == 12345


def _consumer(name: str, ranges=None) -> Consumer:
    c = Consumer(consumer_id=hash(name) & 0xFFFF, name=name, subscription=None)  # type: ignore[arg-type]
    if ranges is not None:
        c.key_shared_meta = pb.KeySharedMeta(keySharedMode=pb.STICKY,
                                             hashRanges=[pb.IntRange(start=s, end=e) for s, e in ranges])
    return c


def test_auto_split_selector_splits_and_merges():
    sel = AutoSplitSelector()
    a, b, c = _consumer("a"), _consumer("b"), _consumer("c")
    sel.add(a)
    assert sel.ranges() == [(0, 65535, "a")]
    sel.add(b)
    assert sel.ranges() == [(0, 32767, "a"), (32768, 65535, "b")]
    sel.add(c)
    assert sel.ranges() == [(0, 16383, "a"), (16384, 32767, "c"), (32768, 65535, "b")]
    assert sel.select(20000) is c and sel.select(65535) is b and sel.select(0) is a
    sel.remove(c)  # its range goes to the owner of the range after it
    assert sel.ranges() == [(0, 16383, "a"), (16384, 65535, "b")]
    sel.remove(b)
    assert sel.ranges() == [(0, 65535, "a")]
    sel.remove(a)
    assert sel.select(5) is None


def test_sticky_selector_refuses_overlaps_and_leaves_gaps_unserved():
    sel = StickySelector()
    a = _consumer("a", [(0, 99), (200, 299)])
    sel.add(a, a.key_shared_meta)
    with pytest.raises(ConsumerAssignError):
        b = _consumer("b", [(250, 400)])
        sel.add(b, b.key_shared_meta)
    with pytest.raises(ConsumerAssignError):
        bad = _consumer("bad", [(10, 70000)])
        sel.add(bad, bad.key_shared_meta)
    assert sel.select(50) is a and sel.select(150) is None and sel.select(299) is a


async def test_delayed_index_hands_back_due_positions_in_time_order():
    due: list[Position] = []
    index = DelayedIndex(due.extend)
    now = now_ms()
    index.add(Position(1, 2), now + 60)
    index.add(Position(1, 1), now + 30)
    index.add(Position(1, 1), now + 30)  # twice: once
    assert len(index) == 2
    for _ in range(100):
        if len(due) == 2:
            break
        await asyncio.sleep(0.01)
    assert due == [Position(1, 1), Position(1, 2)]
    index.close()


def _record(*fields) -> pb.Schema:
    doc = {"type": "record", "name": "R", "fields": list(fields)}
    return pb.Schema(name="R", schema_data=json.dumps(doc).encode(), type=pb.Schema.Json)


def _doc(schema: pb.Schema) -> dict:
    import base64

    return {"type": schema.type, "data": base64.b64encode(schema.schema_data).decode()}


def test_schema_compatibility_rules():
    v1 = _record({"name": "a", "type": "int"})
    with_default = _record({"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""})
    without_default = _record({"name": "a", "type": "int"}, {"name": "b", "type": "string"})
    widened = _record({"name": "a", "type": "long"})
    for strategy in ("BACKWARD", "FORWARD", "FULL"):
        check_compatible(with_default, _doc(v1), strategy)
    check_compatible(without_default, _doc(v1), "FORWARD")  # old readers ignore the new field
    with pytest.raises(IncompatibleSchema):
        check_compatible(without_default, _doc(v1), "BACKWARD")
    check_compatible(widened, _doc(v1), "BACKWARD")  # int data reads as long
    with pytest.raises(IncompatibleSchema):
        check_compatible(widened, _doc(v1), "FULL")  # long data does not read as int
    with pytest.raises(IncompatibleSchema):
        check_compatible(pb.Schema(name="s", schema_data=b"", type=pb.Schema.String), _doc(v1), "ALWAYS_COMPATIBLE")
    assert decode_version(encode_version(7)) == 7


def test_compaction_rebuilds_a_compressed_batch_with_only_the_kept_messages():
    singles = [SingleMessage(pb.SingleMessageMetadata(partition_key=k, payload_size=0), v)
               for k, v in (("a", b"1"), ("b", b""), ("a", b"2"))]
    raw = encode_batch(singles)
    meta = _meta(num_messages_in_batch=3, compression=pb.LZ4, uncompressed_size=len(raw))
    data = _entry(meta, compress(pb.LZ4, raw), n=3)
    parsed = _parse(data)
    assert parsed.keys == [("a", False), ("b", True), ("a", False)]
    rebuilt = _rebuild(data, parsed, [2])
    again = _parse(rebuilt)
    assert again.keys == [("a", False)] and again.singles[0].payload == b"2"
    assert again.metadata.compression == pb.NONE and entry_info(rebuilt).num_messages == 1


def test_a_rate_meter_measures_between_looks_a_window_apart():
    from magnetar.broker.topics.stats import RateMeter, iso

    meter = RateMeter(window=1.0)
    assert meter.rates((0, 0), now=100.0) == (0.0, 0.0)  # the first look only marks
    assert meter.rates((50, 5000), now=100.5) == (0.0, 0.0)  # too soon: the last rates
    assert meter.rates((200, 20000), now=102.0) == (100.0, 10000.0)
    assert meter.rates((100, 0), now=103.0) == (0.0, 0.0)  # a reset counter never gives a negative rate
    assert iso(0) == "1970-01-01T00:00:00.000Z"


@given(st.integers(0, (1 << 200) - 1))
def test_ack_set_words_round_trip(mask):
    from magnetar.broker.server.handlers.consume import ack_set_mask, ack_set_words

    words = ack_set_words(mask)
    assert all(-(1 << 63) <= w < (1 << 63) for w in words)  # protobuf int64
    assert ack_set_mask(words) == mask
