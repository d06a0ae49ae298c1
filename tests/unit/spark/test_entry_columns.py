"""Entries -> Arrow columns: the compiled decoder, its pure-Python twin and
the message path (the client's decode_entry + messages_to_batch) must give
the same record batch for the same entries."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyarrow as pa  # noqa: F401  (a test dependency: missing must fail, not skip)

from magnetar.client.inbound import decode_entry
from magnetar.protocol import compression, pb
from magnetar.protocol.batch import SingleMessage, encode_batch
from magnetar.protocol.frames import PayloadBlock
from pyspark_magnetar import entry_columns
from pyspark_magnetar.entry_columns import (EntryInput, buffers_to_batch, decode_entries_python, entry_payload)
from pyspark_magnetar.offsets import TopicPartition
from pyspark_magnetar.schema import messages_to_batch
from tests.helpers import as_bytes

TP = TopicPartition("persistent://public/default/t", 3)


def compiled():
    """The compiled decoder, imported directly (MAGNETAR_PURE_PYTHON only
    changes what the connector picks): a missing build fails these tests
    instead of skipping them (setup.py builds it; make install)."""
    from pyspark_magnetar import _columns
    return _columns


def test_the_compiled_decoder_is_built():
    assert compiled().decode_entries is not None

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
member = st.fixed_dictionaries({
    "key": st.none() | text,
    "event": st.sampled_from([0, 0, 1_700_000_000_001]),
    "props": st.lists(st.tuples(st.sampled_from(["a", "b", "é"]), text), max_size=4),
    "value": st.binary(max_size=40),
})
entry = st.fixed_dictionaries({
    "batch": st.booleans(),
    "members": st.lists(member, min_size=1, max_size=6),
    "event": st.sampled_from([0, 1_600_000_000_000]),
    "key": st.none() | text,
    "props": st.lists(st.tuples(st.sampled_from(["x", "y"]), text), max_size=3),
    "compression": st.sampled_from([pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY]),
    "producer": st.sampled_from(["p", "producer-é"]),
})


def build(spec: dict, first: int) -> tuple[pb.MessageMetadata, bytes]:
    """An entry as a producer would store it: metadata and (compressed) payload."""
    meta = pb.MessageMetadata(producer_name=spec["producer"], sequence_id=first, publish_time=1_700_000_000_123 + first)
    if spec["event"]:
        meta.event_time = spec["event"]
    if spec["batch"]:
        singles = []
        for m in spec["members"]:
            single = pb.SingleMessageMetadata(event_time=m["event"] or None)
            if m["key"] is not None:
                single.partition_key = m["key"]
            single.properties.extend(pb.KeyValue(key=k, value=v) for k, v in m["props"])
            singles.append(SingleMessage(single, m["value"]))
        payload = encode_batch(singles)
        meta.num_messages_in_batch = len(singles)
    else:
        if spec["key"] is not None:
            meta.partition_key = spec["key"]
        meta.properties.extend(pb.KeyValue(key=k, value=v) for k, v in spec["props"])
        payload = spec["members"][0]["value"]
    if spec["compression"] != pb.NONE:
        meta.compression = spec["compression"]
        meta.uncompressed_size = len(payload)
        payload = compression.compress(spec["compression"], payload)
    return meta, payload


def count_of(spec: dict) -> int:
    return len(spec["members"]) if spec["batch"] else 1


def block_of(meta: pb.MessageMetadata, payload: bytes, last_offset: int) -> PayloadBlock:
    """The MESSAGE frame's payload block a broker sends (entry metadata first)."""
    bem = pb.BrokerEntryMetadata(index=last_offset).SerializeToString()
    m = meta.SerializeToString()
    return PayloadBlock(memoryview(struct.pack(">HI", 0x0E02, len(bem)) + bem + struct.pack(">I", len(m)) + m + payload))


def three_ways(specs: list[dict], lo: int, hi: int):
    inputs, messages, first = [], [], 0
    for spec in specs:
        meta, payload = build(spec, first)
        n = count_of(spec)
        inputs.append(EntryInput(meta.SerializeToString(), entry_payload(meta, payload), first))
        cmd = pb.CommandMessage(consumer_id=1, message_id=pb.MessageIdData(ledgerId=1, entryId=len(inputs)))
        msgs, _ = decode_entry(TP.name, cmd, block_of(meta, payload, first + n - 1), TP.partition)
        messages.extend(m for m in msgs if lo <= m.offset < hi)
        first += n
    via_messages = messages_to_batch(TP, messages)
    via_python = buffers_to_batch(TP, decode_entries_python(inputs, lo, hi))
    return inputs, via_messages, via_python


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry, min_size=0, max_size=5), st.integers(0, 8), st.integers(0, 40))
def test_twin_matches_the_message_path(specs, lo, width):
    _, via_messages, via_python = three_ways(specs, lo, lo + width)
    via_python.validate(full=True)
    assert via_python.equals(via_messages), (via_python.to_pylist(), via_messages.to_pylist())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry, min_size=0, max_size=5), st.integers(0, 8), st.integers(0, 40))
def test_compiled_matches_the_twin(specs, lo, width):
    inputs, via_messages, via_python = three_ways(specs, lo, lo + width)
    buffers = compiled().decode_entries(inputs, lo, lo + width)
    twin = decode_entries_python(inputs, lo, lo + width)
    assert as_bytes(buffers) == twin
    for rows in (1, twin[0], 10 * twin[0] + 5):  # the sizing hint changes no byte, right or wrong
        assert as_bytes(compiled().decode_entries(inputs, lo, lo + width, rows)) == twin
    via_c = buffers_to_batch(TP, buffers)
    via_c.validate(full=True)
    assert via_c.equals(via_messages)


def test_rows_are_what_the_message_had():
    spec = {"batch": True, "event": 5, "key": None, "props": [], "compression": pb.ZSTD, "producer": "p",
            "members": [{"key": "k", "event": 0, "props": [("a", "1"), ("b", "2"), ("a", "3")], "value": b"v0"},
                        {"key": None, "event": 9, "props": [], "value": b""}]}
    meta, payload = build(spec, 10)
    rows = entry_columns.entries_to_batch(TP, [EntryInput(meta.SerializeToString(),
                                                          entry_payload(meta, payload), 10)], 0, 100).to_pylist()
    assert [(r["key"], r["value"], r["offset"], r["partition"], r["properties"]) for r in rows] == [
        (b"k", b"v0", 10, 3, [("a", "3"), ("b", "2")]), (None, b"", 11, 3, [])]
    assert rows[0]["event_time"].timestamp() == 0.005 and rows[1]["event_time"].timestamp() == 0.009
    assert rows[0]["producer_name"] == "p" and rows[0]["topic"] == TP.topic


@pytest.mark.parametrize("decode", [decode_entries_python,
                                    "compiled"])
@pytest.mark.parametrize("damage", ["truncated", "overrun", "bad_meta"])
def test_malformed_entries_are_one_value_error(decode, damage):
    if decode == "compiled":
        decode = compiled().decode_entries
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=2)
    payload = encode_batch([SingleMessage(pb.SingleMessageMetadata(), b"abc"),
                            SingleMessage(pb.SingleMessageMetadata(), b"def")])
    meta_bytes = meta.SerializeToString()
    if damage == "truncated":
        payload = payload[:-5]
    elif damage == "overrun":
        payload = payload[:4] + b"\xff" + payload[5:]
    else:
        meta_bytes = b"\x0a\xff\xff"
    with pytest.raises(ValueError, match="entry at offset 7"):
        decode([EntryInput(meta_bytes, payload, 7)], 0, 100)


def test_the_compiled_decoder_lets_other_threads_run():
    """While it decodes, a Python thread (the session's loop receiving the
    next entries) runs. The switch interval is raised so the decoding thread
    never hands the GIL over by itself: the other thread only counts while
    decode_entries has released it."""
    import sys
    import threading
    import time

    spec = {"batch": True, "event": 0, "key": None, "props": [], "compression": pb.NONE, "producer": "p",
            "members": [{"key": "k", "event": 0, "props": [], "value": b"v" * 100}] * 1000}
    meta, payload = build(spec, 0)
    entries = [EntryInput(meta.SerializeToString(), payload, 1000 * i) for i in range(200)]
    count, done = [0], threading.Event()

    def counter() -> None:
        while not done.is_set():
            count[0] += 1
            time.sleep(0)  # gives the GIL back after every count

    old = sys.getswitchinterval()
    sys.setswitchinterval(30)
    thread = threading.Thread(target=counter, daemon=True)
    try:
        thread.start()
        counted = 0
        deadline = time.monotonic() + 10
        while counted == 0 and time.monotonic() < deadline:
            before = count[0]
            compiled().decode_entries(entries, 0, 200_000)
            counted = count[0] - before
    finally:
        done.set()
        sys.setswitchinterval(old)
        thread.join(5)
    assert counted > 0, "no other thread ran while the decoder worked: it held the GIL"
