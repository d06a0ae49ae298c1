"""Stored entries straight to Arrow record batches (the read path's hot loop).

An *entry* is what the broker stores and delivers: one MessageMetadata and a
payload that is one message or a batch of them (``[u32 size]
[SingleMessageMetadata][payload]`` per message), maybe compressed. A task
hands the entries of its range to :func:`entries_to_batch`, which returns
the rows with offsets in ``[lo, hi)`` without building a Python object per
message: :func:`decode_entries` fills the columns' buffers, compiled
(``pyspark_magnetar._columns``, built by setup.py from ``_columns_decode.c``) or,
when that extension is missing or ``MAGNETAR_PURE_PYTHON=1``, by its
pure-Python twin :func:`decode_entries_python` (same buffers, slower; the
unit tests compare both on the same inputs).

Row values follow the message path exactly (:func:`.schema.messages_to_batch`):
a key is present when the field is set (even empty), a key flagged
``partition_key_b64_encoded`` is its decoded bytes, a member's event time
falls back to the entry's, 0 means none, repeated property keys keep their
first position and last value.

Failure modes: a malformed entry raises ValueError (the caller names the
topic and offset); decompression errors come from :func:`entry_payload`.
"""
from __future__ import annotations

import base64
import os
import struct
from typing import NamedTuple, Sequence

import pyarrow as pa

from magnetar.protocol import pb
from magnetar.protocol.compression import decompress

from .offsets import TopicPartition
from .schema import ARROW_READ_SCHEMA

_TS = ARROW_READ_SCHEMA.field("publish_time").type
_PROPS = ARROW_READ_SCHEMA.field("properties").type
_U32 = struct.Struct(">I")

_hot = None
if os.environ.get("MAGNETAR_PURE_PYTHON", "") not in ("1", "true", "yes"):
    try:
        from . import _columns as _hot
    except ImportError:  # not built in this install: the twin runs
        _hot = None


def implementation() -> str:
    """``"compiled"`` or ``"python"``: which decoder this process runs."""
    return "compiled" if _hot is not None else "python"


class EntryInput(NamedTuple):
    """One entry as the decoder takes it: raw MessageMetadata bytes, the
    payload decompressed, and the topic offset of the entry's first message."""

    metadata: bytes | memoryview
    payload: bytes | memoryview
    first_offset: int


def entry_payload(meta: pb.MessageMetadata, payload: bytes | memoryview) -> bytes | memoryview:
    """The payload as the decoder wants it (decompressed). Raises the
    protocol's ProtocolError for a corrupt or unsupported compressed payload."""
    if meta.compression == pb.NONE:
        return payload
    return decompress(meta.compression, payload, meta.uncompressed_size)


Buffers = tuple  # the 19-tuple documented in _columns_decode.c


def decode_entries_python(entries: Sequence[EntryInput], lo: int, hi: int, rows: int | None = None) -> Buffers:
    """The pure-Python twin of ``_columns.decode_entries``: same arguments
    (``rows``, a sizing hint there, is ignored), same buffers, same
    ValueError for a malformed entry."""
    out = _Builder()
    for meta_bytes, payload, first in entries:
        meta = pb.MessageMetadata()
        try:
            meta.ParseFromString(bytes(meta_bytes))
        except Exception:
            raise ValueError(f"entry at offset {first}: malformed MessageMetadata") from None
        producer = meta.producer_name.encode()
        publish_us = meta.publish_time * 1000
        if not meta.HasField("num_messages_in_batch"):
            if lo <= first < hi:
                key = _key(meta) if meta.HasField("partition_key") else None
                out.row(key, bytes(payload), first, publish_us, meta.event_time, meta.properties, producer)
            continue
        count = meta.num_messages_in_batch
        if count < 0:
            raise ValueError(f"entry at offset {first}: negative num_messages_in_batch")
        view = memoryview(payload)
        pos = 0
        for i in range(count):
            if pos + 4 > len(view):
                raise ValueError(f"entry at offset {first}: batch truncated")
            (size,) = _U32.unpack_from(view, pos)
            pos += 4
            if pos + size > len(view):
                raise ValueError(f"entry at offset {first}: batch message metadata overruns the payload")
            single = pb.SingleMessageMetadata()
            try:
                single.ParseFromString(bytes(view[pos:pos + size]))
            except Exception:
                raise ValueError(f"entry at offset {first}: malformed SingleMessageMetadata") from None
            pos += size
            if not single.HasField("payload_size") or single.payload_size < 0 \
                    or pos + single.payload_size > len(view):
                raise ValueError(f"entry at offset {first}: batch message payload overruns the batch")
            value = bytes(view[pos:pos + single.payload_size])
            pos += single.payload_size
            offset = first + i
            if lo <= offset < hi:
                key = _key(single) if single.HasField("partition_key") else None
                out.row(key, value, offset, publish_us, single.event_time or meta.event_time, single.properties,
                        producer)
    return out.buffers()


def _key(meta) -> bytes:
    """A key's bytes: base64-decoded when the producer flagged it so (a binary
    key), else its UTF-8; base64 flags on text that is not base64 keep the text."""
    if meta.partition_key_b64_encoded:
        try:
            return base64.b64decode(meta.partition_key, validate=True)
        except ValueError:
            pass
    return meta.partition_key.encode()


class _Builder:
    """The twin's column buffers, grown row by row."""

    def __init__(self) -> None:
        self.rows = 0
        self.key_valid: list[bool] = []
        self.key_off, self.key_data = [0], bytearray()
        self.val_off, self.val_data = [0], bytearray()
        self.offsets: list[int] = []
        self.publish: list[int] = []
        self.event_valid: list[bool] = []
        self.event: list[int] = []
        self.map_off = [0]
        self.pk_off, self.pk_data = [0], bytearray()
        self.pv_off, self.pv_data = [0], bytearray()
        self.prod_off, self.prod_data = [0], bytearray()

    def row(self, key, value, offset, publish_us, event_ms, props, producer) -> None:
        self.key_valid.append(key is not None)
        if key is not None:
            self.key_data += key
        self.key_off.append(len(self.key_data))
        self.val_data += value
        self.val_off.append(len(self.val_data))
        self.offsets.append(offset)
        self.publish.append(publish_us)
        self.event_valid.append(bool(event_ms))
        self.event.append(event_ms * 1000)
        merged = {kv.key: kv.value for kv in props}  # a repeated key: first position, last value
        for k, v in merged.items():
            self.pk_data += k.encode()
            self.pk_off.append(len(self.pk_data))
            self.pv_data += v.encode()
            self.pv_off.append(len(self.pv_data))
        self.map_off.append(self.map_off[-1] + len(merged))
        self.prod_data += producer
        self.prod_off.append(len(self.prod_data))
        self.rows += 1

    def buffers(self) -> Buffers:
        i32 = lambda xs: struct.pack(f"<{len(xs)}i", *xs)  # noqa: E731
        i64 = lambda xs: struct.pack(f"<{len(xs)}q", *xs)  # noqa: E731
        return (self.rows, _bitmap(self.key_valid), i32(self.key_off), bytes(self.key_data), i32(self.val_off),
                bytes(self.val_data), i64(self.offsets), i64(self.publish), _bitmap(self.event_valid),
                i64(self.event), i32(self.map_off), i32(self.pk_off), bytes(self.pk_data), i32(self.pv_off),
                bytes(self.pv_data), i32(self.prod_off), bytes(self.prod_data),
                self.key_valid.count(False), self.event_valid.count(False))


def _bitmap(bits: list[bool]) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def decode_entries(entries: Sequence[EntryInput], lo: int, hi: int, rows: int | None = None) -> Buffers:
    """The buffers of the rows of ``entries`` with offsets in ``[lo, hi)``;
    ``rows``, the count expected, lets the compiled decoder size its buffers
    once."""
    if _hot is not None:
        return _hot.decode_entries(entries, lo, hi, rows or 0)
    return decode_entries_python(entries, lo, hi)


def buffers_to_batch(tp: TopicPartition, buffers: Buffers) -> pa.RecordBatch:
    """A record batch of :data:`.schema.ARROW_READ_SCHEMA` over ``buffers``
    (zero-copy; ``topic`` and ``partition`` are constant columns)."""
    (n, key_valid, key_off, key_data, val_off, val_data, offsets, publish, event_valid, event, map_off,
     pk_off, pk_data, pv_off, pv_data, prod_off, prod_data, key_nulls, event_nulls) = buffers
    buf = pa.py_buffer
    props_count = (len(pk_off) // 4) - 1
    entries = pa.StructArray.from_arrays(
        [pa.Array.from_buffers(pa.string(), props_count, [None, buf(pk_off), buf(pk_data)]),
         pa.Array.from_buffers(pa.string(), props_count, [None, buf(pv_off), buf(pv_data)])],
        fields=[_PROPS.key_field, _PROPS.item_field])
    arrays = [
        pa.Array.from_buffers(pa.binary(), n, [buf(key_valid) if key_nulls else None, buf(key_off), buf(key_data)],
                              null_count=key_nulls),
        pa.Array.from_buffers(pa.binary(), n, [None, buf(val_off), buf(val_data)], null_count=0),
        *_constant_columns(tp, n),
        pa.Array.from_buffers(pa.int64(), n, [None, buf(offsets)], null_count=0),
        pa.Array.from_buffers(_TS, n, [None, buf(publish)], null_count=0),
        pa.Array.from_buffers(_TS, n, [buf(event_valid) if event_nulls else None, buf(event)],
                              null_count=event_nulls),
        pa.Array.from_buffers(_PROPS, n, [None, buf(map_off)], null_count=0, children=[entries]),
        pa.Array.from_buffers(pa.string(), n, [None, buf(prod_off), buf(prod_data)], null_count=0),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_READ_SCHEMA)


#: Per partition, its topic and partition columns, built once and sliced.
_CONSTANTS: dict[TopicPartition, tuple[pa.Array, pa.Array]] = {}


def _constant_columns(tp: TopicPartition, n: int) -> tuple[pa.Array, pa.Array]:
    """The ``topic`` and ``partition`` columns of ``n`` rows of ``tp``:
    zero-copy slices of arrays built once (and again when a batch is longer)."""
    have = _CONSTANTS.get(tp)
    if have is None or len(have[0]) < n:
        size = max(n, 2 * len(have[0]) if have else 0)
        have = (pa.repeat(pa.scalar(tp.topic, pa.string()), size), pa.repeat(pa.scalar(tp.partition, pa.int32()), size))
        if len(_CONSTANTS) >= 256:  # a task reads few partitions; a long-lived worker must not collect them all
            _CONSTANTS.clear()
        _CONSTANTS[tp] = have
    return have[0].slice(0, n), have[1].slice(0, n)


def entries_to_batch(tp: TopicPartition, entries: Sequence[EntryInput], lo: int, hi: int,
                     rows: int | None = None) -> pa.RecordBatch:
    """The rows of ``entries`` (of partition ``tp``) with offsets in ``[lo, hi)``,
    in order (``rows``: how many are expected, a sizing hint)."""
    return buffers_to_batch(tp, decode_entries(entries, lo, hi, rows))
