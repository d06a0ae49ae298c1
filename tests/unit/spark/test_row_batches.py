"""Arrow rows -> batch payloads: the compiled encoder and its pure-Python
twin give the same bytes, and the client's batch decoder reads back every
row's value, key, properties, event time and sequence id."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyarrow as pa

from magnetar.protocol.batch import decode_batch
from pyspark_magnetar import row_batches
from pyspark_magnetar.row_batches import encode_batches_python, prepare
from tests.helpers import as_bytes



def compiled():
    """The compiled encoder, imported directly: a missing build fails the
    test instead of skipping it (setup.py builds it; make install)."""
    from pyspark_magnetar import _columns
    return _columns
text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=5)
row = st.fixed_dictionaries({
    "value": st.binary(max_size=30),
    "key": st.none() | text,
    "props": st.none() | st.dictionaries(text, text, max_size=3),
    "event": st.none() | st.sampled_from([0, 1, 1_700_000_000_123]),
})


def batch_of(rows: list[dict], offset: int) -> pa.RecordBatch:
    batch = pa.RecordBatch.from_pydict({
        "value": pa.array([r["value"] for r in rows], pa.binary()),
        "key": pa.array([None if r["key"] is None else r["key"].encode() for r in rows], pa.binary()),
        "properties": pa.array([None if r["props"] is None else list(r["props"].items()) for r in rows],
                               pa.map_(pa.string(), pa.string())),
        "event_time": pa.array([r["event"] for r in rows], pa.int64()),
    })
    return batch.slice(offset)  # a sliced batch exercises the encoder's row-0 rule


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row, min_size=1, max_size=30), st.integers(0, 3), st.integers(1, 7), st.integers(1, 200))
def test_encoded_batches_decode_to_the_rows(rows, offset, max_messages, max_bytes):
    offset = min(offset, len(rows) - 1)
    cols = prepare(batch_of(rows, offset), "t", 100)["t"]
    encoded = encode_batches_python(cols, max_messages, max_bytes)
    if row_batches._hot is not None:
        assert row_batches.encode_batches(cols, max_messages, max_bytes) == encoded
    back = []
    for payload, count, first, highest in encoded:
        assert count <= max_messages
        members = decode_batch(payload, count)
        assert [m.metadata.sequence_id for m in members] == list(range(first, highest + 1))
        back += members
    want = rows[offset:]
    assert [m.payload for m in back] == [r["value"] for r in want]
    assert [m.metadata.partition_key if m.metadata.HasField("partition_key") else None for m in back] == \
        [r["key"] for r in want]
    assert [{kv.key: kv.value for kv in m.metadata.properties} for m in back] == [r["props"] or {} for r in want]
    assert [m.metadata.event_time for m in back] == [r["event"] or 0 for r in want]
    assert [m.metadata.sequence_id for m in back] == list(range(100, 100 + len(want)))


def test_compiled_encoder_refuses_short_buffers():
    with pytest.raises(ValueError, match="shorter than the rows"):
        compiled().encode_batches(5, b"", b"\0" * 4, b"", *([None] * 12), 10, 100)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.none() | st.binary(max_size=12), min_size=1, max_size=20))
def test_binary_keys_round_trip(keys):
    """Keys that are not UTF-8 go as base64 text flagged partition_key_b64_encoded;
    both decoders (and the client's Message) give back the original bytes."""
    from magnetar.client.message import Message
    from magnetar.client.message_id import MessageId
    from pyspark_magnetar import entry_columns
    from pyspark_magnetar.entry_columns import EntryInput, decode_entries_python
    from pyspark_magnetar.row_batches import entry_metadata

    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"v"] * len(keys), pa.binary()),
                                        "key": pa.array(keys, pa.binary())})
    cols = prepare(batch, "t", 0)["t"]
    encoded = encode_batches_python(cols, 1000, 1 << 20)
    assert row_batches.encode_batches(cols, 1000, 1 << 20) == encoded
    ((payload, count, first, highest),) = encoded
    members = decode_batch(payload, count)
    flagged = [m.metadata.partition_key_b64_encoded for m in members]
    assert flagged == [k is not None and not row_batches._utf8(k) for k in keys]
    meta = entry_metadata("p", 1, count, first, highest)
    entries = [EntryInput(meta, payload, 0)]
    twin = decode_entries_python(entries, 0, len(keys))
    assert as_bytes(compiled().decode_entries(entries, 0, len(keys))) == twin
    got = entry_columns.buffers_to_batch(entry_columns.TopicPartition("t"), twin).column("key").to_pylist()
    assert got == keys
    from magnetar.protocol import pb
    outer = pb.MessageMetadata.FromString(meta)
    assert [Message("t", MessageId(0, 0), outer, m.metadata, m.payload).partition_key_bytes() if k is not None
            else None for m, k in zip(members, keys)] == keys


@pytest.mark.parametrize("first, n", [(0, 1), (7, 10_000), (1 << 40, 3), (123, 200_000)])
def test_rows_are_numbered_from_the_first_position(first, n):
    """Each row's sequence id is its position in the task's input; batches
    longer than the prebuilt counting array grow it."""
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"v"] * n, pa.binary())})
    positions = prepare(batch, "t", first)["t"].positions
    assert positions.type == pa.int64() and len(positions) == n
    assert positions[0].as_py() == first and positions[n - 1].as_py() == first + n - 1
    assert positions.equals(pa.array(range(first, first + n), pa.int64()))
