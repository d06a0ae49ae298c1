"""What a write accepts, and how Arrow rows become message fields.

Columns (others are ignored, so a DataFrame read from Magnetar can be
written back after a transformation):

===========  =====================================  ===================================
value        binary or string (required, not null)  the payload (strings as UTF-8)
key          binary or string, nullable             partition key; binary must be UTF-8
topic        string, nullable                       destination when no ``topic`` option
properties   map<string,string>, nullable           message properties
event_time   timestamp or long (ms), nullable       the message's event time
===========  =====================================  ===================================

Pulsar keys are strings, hence the UTF-8 rule for binary keys (a read
returns the key as its UTF-8 bytes, so read -> write round-trips).
:func:`check_write_schema` runs on the driver and fails before any task;
:func:`columns_of` runs in the tasks and raises SinkError for a bad row.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.types import (BinaryType, DataType, LongType, MapType, StringType, StructType, TimestampNTZType,
                               TimestampType)

from .errors import OptionError, SinkError

_ALLOWED: dict[str, tuple[type[DataType], ...]] = {
    "value": (BinaryType, StringType),
    "key": (BinaryType, StringType),
    "topic": (StringType,),
    "properties": (MapType,),
    "event_time": (TimestampType, TimestampNTZType, LongType),
}
_TO_MS = {"s": lambda v: v * 1000, "ms": lambda v: v, "us": lambda v: v // 1000, "ns": lambda v: v // 1_000_000}


def check_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Raise OptionError unless ``schema`` can be written."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError(f"a write needs a 'value' column (binary or string); columns are {sorted(fields)}")
    for name, types in _ALLOWED.items():
        dtype = fields.get(name)
        if dtype is None:
            continue
        if not isinstance(dtype, types):
            wanted = " or ".join(t.typeName() if hasattr(t, "typeName") else t.__name__ for t in types)
            raise OptionError(f"column {name!r} must be {wanted}, got {dtype.simpleString()}")
        if name == "properties" and not (isinstance(dtype.keyType, StringType)
                                          and isinstance(dtype.valueType, StringType)):
            raise OptionError(f"column 'properties' must be map<string,string>, got {dtype.simpleString()}")
    if topic_option is None and "topic" not in fields:
        raise OptionError("a write needs the 'topic' option or a 'topic' column")


@dataclass(slots=True)
class Columns:
    """One record batch as per-row field lists (None where absent)."""

    values: list
    keys: list
    topics: list
    properties: list
    event_times_ms: list

    def __len__(self) -> int:
        return len(self.values)


def columns_of(batch: pa.RecordBatch, default_topic: str | None) -> Columns:
    """Field lists of ``batch``; the ``topic`` option, if set, wins over the column.

    Raises SinkError for a null value, a null topic without a ``topic``
    option, a binary key that is not UTF-8, or a null property value.
    """
    n = batch.num_rows
    names = batch.schema.names
    values = [v.encode() if isinstance(v, str) else v for v in batch.column("value").to_pylist()]
    if None in values:
        raise SinkError(f"row {values.index(None)} of a write batch has a null 'value'")
    keys = _keys(batch.column("key").to_pylist()) if "key" in names else [None] * n
    if default_topic is not None or "topic" not in names:
        topics = [default_topic] * n
    else:
        topics = batch.column("topic").to_pylist()
        if None in topics:
            raise SinkError(f"row {topics.index(None)} has a null 'topic' and there is no 'topic' option")
    props = _properties(batch.column("properties").to_pylist()) if "properties" in names else [None] * n
    times = _event_times(batch.column("event_time")) if "event_time" in names else [None] * n
    return Columns(values, keys, topics, props, times)


def _keys(raw: list) -> list:
    out = []
    for i, key in enumerate(raw):
        if isinstance(key, (bytes, bytearray)):
            try:
                key = bytes(key).decode("utf-8")
            except UnicodeDecodeError:
                raise SinkError(f"row {i}: 'key' is not valid UTF-8 (Pulsar keys are strings)") from None
        out.append(key)
    return out


def _properties(raw: list) -> list:
    out = []
    for i, pairs in enumerate(raw):
        if not pairs:
            out.append(None)
            continue
        props = dict(pairs)
        if any(v is None for v in props.values()):
            raise SinkError(f"row {i}: 'properties' has a null value")
        out.append(props)
    return out


def _event_times(column: pa.Array) -> list:
    """Milliseconds since the epoch (long columns are taken as ms already).
    Event time 0 means "unset" in Pulsar, so 1970-01-01T00:00:00 is written as unset."""
    if pa.types.is_timestamp(column.type):
        scale = _TO_MS[column.type.unit]
        out = [None if v is None else scale(v) for v in column.cast(pa.int64()).to_pylist()]
    else:
        out = column.to_pylist()
    for i, ms in enumerate(out):
        if ms is not None and ms < 0:
            raise SinkError(f"row {i}: 'event_time' is before 1970 (Pulsar event times are unsigned)")
    return out
