"""JSON and Avro topics: the ``value`` column as a struct, read and written.

When every topic a query reads has the same JSON or Avro schema (and
``valueFormat`` is not ``binary``), the rows are those of :mod:`.schema`
with two changes: ``value`` is a struct of the schema's fields
(:mod:`.avro_types`), and a last column ``schema_version`` (long, null if
the message names none) keeps the version each message was written with.

:class:`ValueSpec` is fixed on the driver (picklable, part of the read
options); each task makes a :class:`ValueReader` from it, which turns the
binary record batches of :mod:`.entry_columns` into the struct form. Avro
values are decoded with the version they were written with, so the task
fetches the versions it meets (:meth:`ValueReader.missing`).

Writes: a DataFrame whose ``value`` is a struct writes to a topic with a
JSON or Avro schema (the ``topic`` option): :func:`check_value_struct` on the
driver (every field must be one of the schema's), :func:`encode_values` in
the tasks, and the task's producers announce the topic's schema, so every
entry carries its version.

Failure modes: a value that does not parse raises MagnetarSparkError naming
the partition and offset (read with ``valueFormat=binary`` to get the bytes);
a row that cannot be encoded raises SinkError naming the row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from .avro_types import record_type
from .errors import MagnetarSparkError, OptionError, SinkError
from .offsets import TopicPartition
from .schema import READ_SCHEMA
from .topic_schemas import TopicSchema
from .value_codecs import AvroCodec, BadValue, ValueCodec, codec_for

SCHEMA_VERSION = "schema_version"


@dataclass(frozen=True)
class ValueSpec:
    kind: str          # "JSON" or "AVRO"
    definition: dict   # the latest Avro record definition when the query was planned
    version: int
    data: bytes = b""  # the definition exactly as registered

    @classmethod
    def of(cls, schema: TopicSchema) -> "ValueSpec":
        return cls(schema.kind, schema.definition, schema.version, schema.data)

    @property
    def struct(self) -> StructType:
        return record_type(self.definition)

    def read_schema(self) -> StructType:
        fields = [StructField("value", self.struct, True) if f.name == "value" else f for f in READ_SCHEMA.fields]
        return StructType(fields + [StructField(SCHEMA_VERSION, LongType(), True)])


class ValueReader:
    """One task's converter of binary batches to the struct form of ``spec``."""

    def __init__(self, spec: ValueSpec) -> None:
        self.spec = spec
        self.arrow_schema = to_arrow_schema(spec.read_schema(), timezone="UTC")
        self._codec = codec_for(spec.kind, self.arrow_schema.field("value").type, spec.definition,
                                {spec.version: spec.definition})
        self._known = {spec.version}

    def missing(self, versions: Iterable[int | None]) -> set[int]:
        """Schema versions these values need that the task has not fetched (Avro only)."""
        if not isinstance(self._codec, AvroCodec):
            return set()
        return {v for v in versions if v is not None and v not in self._known}

    def add_version(self, version: int, schema: TopicSchema | None) -> None:
        """The definition of ``version`` (None: the registry does not have it;
        its values are then decoded with the latest)."""
        self._known.add(version)
        if schema is not None and schema.kind == "AVRO":
            self._codec.add_writer(version, schema.definition)

    def apply(self, tp: TopicPartition, batch: pa.RecordBatch, versions: pa.Array) -> pa.RecordBatch:
        """``batch`` (of :data:`.schema.ARROW_READ_SCHEMA`) with ``value`` decoded and
        ``versions`` (one per row) as the ``schema_version`` column."""
        try:
            value = self._codec.decode(batch.column("value"), versions)
        except BadValue as exc:
            offset = batch.column("offset")[exc.row].as_py()
            raise MagnetarSparkError(
                f"{tp}: the value at offset {offset} cannot be read with the topic's {self.spec.kind} schema "
                f"({exc.why}); read with valueFormat=binary to get the bytes") from None
        arrays = [value if name == "value" else batch.column(name) for name in batch.schema.names]
        return pa.RecordBatch.from_arrays(arrays + [versions], schema=self.arrow_schema)


def check_value_struct(topic: str, spec: ValueSpec | None, struct: StructType) -> None:
    """Raise OptionError unless a ``value`` column of type ``struct`` can be written to ``topic``."""
    if spec is None:
        raise OptionError(f"column 'value' is a struct, but topic {topic} has no JSON or Avro schema to write it "
                          "with: write binary or string values, or give the topic a schema first")
    known = {f.name for f in spec.struct.fields}
    unknown = [f.name for f in struct.fields if f.name not in known]
    if unknown:
        raise OptionError(f"column 'value' has fields {unknown} that the {spec.kind} schema of topic {topic} "
                          f"(version {spec.version}) does not have; its fields are {sorted(known)}")


def value_encoder(spec: ValueSpec) -> ValueCodec:
    """A task's encoder for ``spec`` (the struct type is the DataFrame's, taken per batch)."""
    arrow_type = to_arrow_schema(spec.read_schema(), timezone="UTC").field("value").type
    return codec_for(spec.kind, arrow_type, spec.definition)


def encode_values(codec: ValueCodec, batch: pa.RecordBatch, first_row: int) -> pa.RecordBatch:
    """``batch`` with its struct ``value`` column encoded to bytes. SinkError names a bad row."""
    try:
        encoded = codec.encode(batch.column("value"))
    except BadValue as exc:
        raise SinkError(f"row {first_row + exc.row}: {exc.why}") from None
    i = batch.schema.get_field_index("value")
    return batch.set_column(i, pa.field("value", pa.binary()), encoded)
