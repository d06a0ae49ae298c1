"""Values of JSON and Avro topics to and from the ``value`` struct column.

A :class:`ValueCodec` turns a column of encoded values into a struct column
of the Spark type derived from the topic's schema (:mod:`.avro_types`), and
back. Two codecs:

- :class:`JsonCodec`: reads a whole column in one call to Arrow's JSON
  reader when the struct holds only booleans, numbers, strings, structs and
  arrays (values joined as newline-delimited JSON; a newline in a JSON
  value can only be whitespace, so it is replaced by a space first); other
  types (bytes, maps, dates, timestamps) go value by value through
  ``json.loads``. JSON holds bytes as text: a ``bytes`` field is the text's
  UTF-8 bytes. Dates are days since 1970, timestamps milliseconds (or
  microseconds, ``timestamp-micros``) since 1970, as Avro's logical types.
  The schema version does not matter: fields are matched by name.
- :class:`AvroCodec`: decodes each value with the schema version it was
  written with (``writers``: version -> Avro definition; fields the struct
  has and that version lacks are null), encodes with the topic's latest.

Failure modes: :class:`BadValue` naming the row index of the first value
that does not parse or does not match the schema; the caller turns it into
a task error naming the offset (reads) or the row (writes).
"""
from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any, Callable, Mapping, Protocol

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DAY = dt.date(1970, 1, 1)


class BadValue(ValueError):
    def __init__(self, row: int, why: str) -> None:
        super().__init__(f"row {row}: {why}")
        self.row = row
        self.why = why


class ValueCodec(Protocol):
    """Encoded values <-> a struct column of ``arrow_type``."""

    arrow_type: pa.StructType

    def decode(self, values: pa.Array, versions: pa.Array) -> pa.Array:
        """``values`` (binary, no nulls) as a struct array; ``versions`` (int64,
        null when a message has none) is each value's schema version."""

    def encode(self, rows: pa.Array) -> pa.Array:
        """A struct array as binary values (a null row raises BadValue)."""


def codec_for(kind: str, arrow_type: pa.StructType, definition: dict,
              writers: Mapping[int, dict] | None = None) -> ValueCodec:
    """The codec of a ``"JSON"`` or ``"AVRO"`` topic whose latest schema is ``definition``."""
    if kind == "JSON":
        return JsonCodec(arrow_type, definition)
    return AvroCodec(arrow_type, definition, writers or {})


# -- JSON --------------------------------------------------------------------------------------
class JsonCodec:
    def __init__(self, arrow_type: pa.StructType, definition: dict) -> None:
        self.arrow_type = arrow_type
        self._bulk = _json_readable(arrow_type)
        self._from_json = _converter(definition, _FROM_JSON)
        self._to_json = _converter(definition, _TO_JSON)

    def decode(self, values: pa.Array, versions: pa.Array) -> pa.Array:
        if len(values) == 0:
            return pa.array([], self.arrow_type)
        if self._bulk:
            try:
                return self._decode_bulk(values)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass  # one value is not a JSON object of this shape: find which, below
        rows = []
        for i, raw in enumerate(values.to_pylist()):
            try:
                doc = json.loads(raw)
            except ValueError as exc:
                raise BadValue(i, f"the value is not JSON ({exc})") from None
            if not isinstance(doc, dict):
                raise BadValue(i, f"the value is JSON {type(doc).__name__}, not an object")
            rows.append(self._from_json(doc))
        return _to_struct(rows, self.arrow_type)

    def _decode_bulk(self, values: pa.Array) -> pa.Array:
        flat = pc.replace_substring(pc.replace_substring(values, b"\n", b" "), b"\r", b" ")
        joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(flat)], pa.int32()), flat), b"\n")
        table = pj.read_json(io.BytesIO(joined[0].as_py()), parse_options=pj.ParseOptions(
            explicit_schema=pa.schema(list(self.arrow_type)), unexpected_field_behavior="ignore"))
        if table.num_rows != len(values):
            raise pa.ArrowInvalid("row count differs")
        table = table.combine_chunks()
        return pa.StructArray.from_arrays([table.column(i).chunk(0) if table.column(i).num_chunks else
                                           pa.array([], f.type) for i, f in enumerate(self.arrow_type)],
                                          fields=list(self.arrow_type))

    def encode(self, rows: pa.Array) -> pa.Array:
        out = []
        for i, row in enumerate(rows.to_pylist()):
            if row is None:
                raise BadValue(i, "'value' is null")
            try:
                out.append(json.dumps(self._to_json(row), separators=(",", ":")).encode())
            except (TypeError, ValueError) as exc:
                raise BadValue(i, f"cannot write the value as JSON: {exc}") from None
        return pa.array(out, pa.binary())


def _json_readable(t: pa.DataType) -> bool:
    """Whether Arrow's JSON reader reads ``t`` as the struct column holds it."""
    if pa.types.is_struct(t):
        return all(_json_readable(f.type) for f in t)
    if pa.types.is_list(t):
        return _json_readable(t.value_type)
    return pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t)


# Conversions between JSON (or Avro) values and what pyarrow builds a column from, by Avro type.
def _from_json_scalar(kind: str, logical: str | None) -> Callable[[Any], Any] | None:
    if kind in ("bytes", "fixed"):
        return lambda v: v.encode("utf-8") if isinstance(v, str) else v
    if logical == "date":
        return lambda v: _EPOCH_DAY + dt.timedelta(days=v) if isinstance(v, int) else v
    if logical == "timestamp-millis":
        return lambda v: _EPOCH + dt.timedelta(milliseconds=v) if isinstance(v, (int, float)) else v
    if logical == "timestamp-micros":
        return lambda v: _EPOCH + dt.timedelta(microseconds=v) if isinstance(v, (int, float)) else v
    return None


def _to_json_scalar(kind: str, logical: str | None) -> Callable[[Any], Any] | None:
    if kind in ("bytes", "fixed"):
        return lambda v: v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else v
    if logical == "date":
        return lambda v: (v - _EPOCH_DAY).days if isinstance(v, dt.date) else v
    if logical in ("timestamp-millis", "timestamp-micros"):
        unit = 1000 if logical == "timestamp-millis" else 1_000_000

        def ts(v):
            if not isinstance(v, dt.datetime):
                return v
            v = v if v.tzinfo else v.replace(tzinfo=dt.timezone.utc)
            delta = v - _EPOCH
            return (delta.days * 86400 + delta.seconds) * unit + delta.microseconds * unit // 1_000_000
        return ts
    return None


_FROM_JSON, _TO_JSON = _from_json_scalar, _to_json_scalar


def _converter(avro: Any, scalar) -> Callable[[Any], Any]:
    """A function applying ``scalar``'s conversions through records, arrays and maps (identity elsewhere)."""
    if isinstance(avro, list):
        inner = [t for t in avro if t != "null"]
        return _converter(inner[0], scalar) if len(inner) == 1 else _same
    if isinstance(avro, str):
        return scalar(avro, None) or _same
    if not isinstance(avro, dict):
        return _same
    kind = avro.get("type")
    if kind == "record":
        fields = [(f["name"], _converter(f.get("type"), scalar)) for f in avro.get("fields", [])]
        convert = [(n, c) for n, c in fields if c is not _same]
        if not convert:
            return _same

        def record(v):
            if not isinstance(v, dict):
                return v
            v = dict(v)
            for name, c in convert:
                if v.get(name) is not None:
                    v[name] = c(v[name])
            return v
        return record
    if kind == "array":
        item = _converter(avro.get("items"), scalar)
        return _same if item is _same else (lambda v: [None if x is None else item(x) for x in v]
                                            if isinstance(v, list) else v)
    if kind == "map":
        item = _converter(avro.get("values"), scalar)
        if item is _same:
            return _same
        return lambda v: ({k: None if x is None else item(x) for k, x in v.items()} if isinstance(v, dict)
                          else [(k, None if x is None else item(x)) for k, x in v] if isinstance(v, list) else v)
    return scalar(kind, avro.get("logicalType")) or _converter(kind, scalar)


def _same(v):
    return v


def _to_struct(rows: list, arrow_type: pa.StructType) -> pa.Array:
    try:
        return pa.array(rows, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        for i, row in enumerate(rows):  # name the first row that does not fit
            try:
                pa.array([row], arrow_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as one:
                raise BadValue(i, f"the value does not match the schema: {one}") from None
        raise BadValue(0, f"the values do not match the schema: {exc}") from None


# -- Avro --------------------------------------------------------------------------------------
class AvroCodec:
    def __init__(self, arrow_type: pa.StructType, definition: dict, writers: Mapping[int, dict]) -> None:
        self.arrow_type = arrow_type
        self._latest = fastavro.parse_schema(definition)
        self._writers = {v: fastavro.parse_schema(d) for v, d in writers.items()}

    def add_writer(self, version: int, definition: dict) -> None:
        self._writers[version] = fastavro.parse_schema(definition)

    def decode(self, values: pa.Array, versions: pa.Array) -> pa.Array:
        rows = []
        for i, (raw, version) in enumerate(zip(values.to_pylist(), versions.to_pylist())):
            schema = self._writers.get(version, self._latest) if version is not None else self._latest
            try:
                rows.append(fastavro.schemaless_reader(io.BytesIO(raw), schema, None))
            except Exception as exc:  # fastavro raises several kinds for truncated or foreign bytes
                raise BadValue(i, f"the value is not Avro of schema version {version}: "
                                  f"{type(exc).__name__}: {exc}") from None
        return _to_struct(rows, self.arrow_type)

    def encode(self, rows: pa.Array) -> pa.Array:
        out = []
        for i, row in enumerate(rows.to_pylist()):
            if row is None:
                raise BadValue(i, "'value' is null")
            buf = io.BytesIO()
            try:
                fastavro.schemaless_writer(buf, self._latest, row)
            except Exception as exc:
                raise BadValue(i, f"cannot write the value with the topic's Avro schema: "
                                  f"{type(exc).__name__}: {exc}") from None
            out.append(buf.getvalue())
        return pa.array(out, pa.binary())
