"""Arrow record batches to batch entries (the write path's hot loop).

A write task's rows become batch payloads (``[u32 size][SingleMessageMetadata]
[value]`` per row, the bytes the client's BatchBuilder writes) straight from
the Arrow columns, without a Python object per row: :func:`encode_batches`
runs compiled (``pyspark_magnetar._columns``) or, when that extension is
missing or ``MAGNETAR_PURE_PYTHON=1``, as its pure-Python twin
:func:`encode_batches_python` (same bytes; the unit tests compare them).

Each row carries ``sequence_id`` = its position in the task's input (the
exactly-once identity, see :mod:`.identity`); an entry carries its first
and highest sequence ids so the broker's deduplication covers every member.

:func:`prepare` checks and normalises a batch's columns with vectorised
Arrow calls and raises SinkError for a bad row (null value, null topic
without a ``topic`` option, null property value, event time
before 1970), naming the row. Binary keys that are not UTF-8 are sent as
their base64 text with ``partition_key_b64_encoded`` (what Pulsar clients do
for binary keys); a read returns the original bytes.
"""
from __future__ import annotations

import base64
import struct
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from magnetar.protocol import pb

from .entry_columns import _hot
from .errors import SinkError

_U32 = struct.Struct(">I")
_DIV = {"us": 1000, "ns": 1_000_000}


@dataclass
class RowColumns:
    """One destination's rows, normalised: ``values`` binary (no nulls),
    ``keys`` binary or None, ``properties`` map<string,string> or None,
    ``event_ms`` int64 or None, ``positions`` int64 (the rows' sequence ids),
    ``key_b64`` boolean (no nulls) or None: rows whose key is the base64
    text of a binary key (sent with ``partition_key_b64_encoded``)."""

    values: pa.Array
    keys: pa.Array | None
    properties: pa.Array | None
    event_ms: pa.Array | None
    positions: pa.Array
    key_b64: pa.Array | None = None

    def __len__(self) -> int:
        return len(self.values)

    def take(self, indices: pa.Array) -> "RowColumns":
        pick = lambda a: None if a is None else _compact(a.take(indices))  # noqa: E731
        return RowColumns(self.values.take(indices), pick(self.keys), pick(self.properties), pick(self.event_ms),
                          self.positions.take(indices), pick(self.key_b64))


def prepare(batch: pa.RecordBatch, default_topic: str | None, first_position: int) -> dict[str, RowColumns]:
    """The batch's rows by destination topic (in row order within each);
    row ``i`` has position ``first_position + i``. Raises SinkError."""
    n = batch.num_rows
    names = batch.schema.names
    values = _binary(batch.column("value"))
    if values.null_count:
        raise SinkError(f"row {_first_null(values)} of a write batch has a null 'value'")
    keys = key_b64 = None
    if "key" in names:
        raw = batch.column("key")
        if pa.types.is_binary(raw.type) or pa.types.is_large_binary(raw.type):
            try:
                raw.cast(pa.string())  # Pulsar keys are strings: UTF-8 keys go as they are
            except pa.ArrowInvalid:
                raw, key_b64 = _base64_keys(raw)
        keys = _binary(raw) if raw.null_count < n else None
    props = None
    if "properties" in names:
        props = batch.column("properties")
        if props.null_count == n or len(props.values) == 0:
            props = None
        else:
            props = _compact(props)
            if props.items.null_count:
                bad = next(i for i, p in enumerate(props.to_pylist()) if p and any(v is None for _, v in p))
                raise SinkError(f"row {bad}: 'properties' has a null value")
    event = _event_ms(batch.column("event_time")) if "event_time" in names else None
    positions = _positions(first_position, n)
    cols = RowColumns(values, keys, props, event, positions, key_b64 if keys is not None else None)
    if default_topic is not None or "topic" not in names:
        return {default_topic: cols}
    topics = batch.column("topic")
    if topics.null_count:
        raise SinkError(f"row {_first_null(topics)} has a null 'topic' and there is no 'topic' option")
    distinct = pc.unique(topics).to_pylist()
    if len(distinct) == 1:
        return {distinct[0]: cols}
    return {t: cols.take(pc.indices_nonzero(pc.equal(topics, t))) for t in distinct}


#: 0, 1, 2, ...: sliced and shifted for each batch's positions (grown when a batch is longer).
_COUNTING = pa.array(range(65536), pa.int64())


def _positions(first: int, n: int) -> pa.Array:
    """``first, first + 1, ..., first + n - 1`` as int64, vectorised (a
    Python range per batch cost more than the encoding)."""
    global _COUNTING
    if len(_COUNTING) < n:
        _COUNTING = pa.array(range(max(n, 2 * len(_COUNTING))), pa.int64())
    return pc.add(_COUNTING.slice(0, n), pa.scalar(first, pa.int64()))


def _base64_keys(raw: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Binary keys, some not UTF-8: those become their base64 text (as Pulsar
    clients send binary keys), flagged in the returned boolean array."""
    keys, flags = [], []
    for k in raw.to_pylist():
        if k is None or _utf8(k):
            keys.append(k)
            flags.append(False)
        else:
            keys.append(base64.b64encode(k))
            flags.append(True)
    return pa.array(keys, pa.binary()), pa.array(flags, pa.bool_())


def _utf8(b: bytes) -> bool:
    try:
        bytes(b).decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _first_null(arr: pa.Array) -> int:
    return pc.index(pc.is_null(arr), True).as_py()


def _compact(arr: pa.Array) -> pa.Array:
    """``arr`` without an Arrow slice offset, its map children too (the
    encoder reads buffers from row 0)."""
    if arr.offset or (pa.types.is_map(arr.type) and (arr.keys.offset or arr.items.offset)):
        return pa.concat_arrays([arr])
    return arr


def _binary(arr: pa.Array) -> pa.Array:
    if not pa.types.is_binary(arr.type):
        arr = arr.cast(pa.binary())  # strings (UTF-8 bytes), large binary
    return _compact(arr)


def _event_ms(column: pa.Array) -> pa.Array | None:
    """Milliseconds since the epoch (long columns are ms already; 0 / null: unset)."""
    if column.null_count == len(column):
        return None
    ints = column.cast(pa.int64())
    low = pc.min(ints).as_py()
    if low is not None and low < 0:
        bad = pc.index(pc.less(ints, 0), True).as_py()
        raise SinkError(f"row {bad}: 'event_time' is before 1970 (Pulsar event times are unsigned)")
    if pa.types.is_timestamp(column.type):
        unit = column.type.unit
        if unit in _DIV:
            ints = pc.divide(ints, _DIV[unit])  # integer division of non-negative values: floor
        elif unit == "s":
            ints = pc.multiply(ints, 1000)
    return _compact(ints)


def _buffers(cols: RowColumns) -> list:
    """The encoder's 15 buffer arguments (None for an absent column or bitmap)."""
    v = cols.values.buffers()
    out = [cols.positions.buffers()[1], v[1], v[2]]
    if cols.keys is not None:
        k = cols.keys.buffers()
        out += [k[0] if cols.keys.null_count else None, k[1], k[2]]
    else:
        out += [None, None, None]
    if cols.properties is not None:
        m = cols.properties
        keys, items = m.keys, m.items
        out += [m.buffers()[0] if m.null_count else None, m.buffers()[1], keys.buffers()[1], keys.buffers()[2],
                items.buffers()[1], items.buffers()[2]]
    else:
        out += [None] * 6
    if cols.event_ms is not None:
        e = cols.event_ms.buffers()
        out += [e[0] if cols.event_ms.null_count else None, e[1]]
    else:
        out += [None, None]
    out.append(cols.key_b64.buffers()[1] if cols.key_b64 is not None else None)
    return out


Encoded = list  # [(payload bytes, count, first sequence id, highest sequence id)]


def encode_batches(cols: RowColumns, max_messages: int, max_bytes: int) -> Encoded:
    """Batch payloads for ``cols`` in row order: at most ``max_messages``
    rows each, closed once one holds ``max_bytes``."""
    if _hot is not None:
        return _hot.encode_batches(len(cols), *_buffers(cols), max_messages, max_bytes)
    return encode_batches_python(cols, max_messages, max_bytes)


def encode_batches_python(cols: RowColumns, max_messages: int, max_bytes: int) -> Encoded:
    """The pure-Python twin of ``_columns.encode_batches``."""
    out: Encoded = []
    parts: list[bytes] = []
    size = count = 0
    first = highest = 0
    values = cols.values.to_pylist()
    keys = cols.keys.to_pylist() if cols.keys is not None else None
    props = cols.properties.to_pylist() if cols.properties is not None else None
    events = cols.event_ms.to_pylist() if cols.event_ms is not None else None
    b64 = cols.key_b64.to_pylist() if cols.key_b64 is not None else None
    for r, seq in enumerate(cols.positions.to_pylist()):
        meta = pb.SingleMessageMetadata(payload_size=len(values[r]), sequence_id=seq)
        if props is not None and props[r]:
            meta.properties.extend(pb.KeyValue(key=k, value=v) for k, v in props[r])
        if keys is not None and keys[r] is not None:
            meta.partition_key = keys[r].decode("utf-8")
        if events is not None and events[r]:
            meta.event_time = events[r]
        if b64 is not None and b64[r]:
            meta.partition_key_b64_encoded = True
        header = meta.SerializeToString()
        parts += [_U32.pack(len(header)), header, values[r]]
        size += 4 + len(header) + len(values[r])
        if count == 0:
            first = highest = seq
        highest = max(highest, seq)
        count += 1
        if count >= max_messages or size >= max_bytes:
            out.append((b"".join(parts), count, first, highest))
            parts, size, count = [], 0, 0
    if count:
        out.append((b"".join(parts), count, first, highest))
    return out


def entry_metadata(producer_name: str, publish_ms: int, count: int, first: int, highest: int,
                   schema_version: bytes | None = None) -> bytes:
    """The MessageMetadata of one encoded batch (with the producer's schema version, if any)."""
    meta = pb.MessageMetadata(producer_name=producer_name, sequence_id=first, publish_time=publish_ms,
                              num_messages_in_batch=count, highest_sequence_id=highest)
    if schema_version is not None:
        meta.schema_version = schema_version
    return meta.SerializeToString()
