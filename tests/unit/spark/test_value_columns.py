"""JSON and Avro values as struct columns: the Spark type of an Avro record,
the JSON codec's bulk path against its value-by-value path, Avro values of
two schema versions, and a bad value named by its offset."""
import datetime as dt
import io
import json

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.types import (ArrayType, BinaryType, DateType, DoubleType, IntegerType, LongType, MapType,
                               StringType, StructField, StructType, TimestampType)

from pyspark_magnetar.avro_types import record_type
from pyspark_magnetar.errors import MagnetarSparkError, OptionError
from pyspark_magnetar.offsets import TopicPartition
from pyspark_magnetar.schema import ARROW_READ_SCHEMA
from pyspark_magnetar.topic_schemas import TopicSchema
from pyspark_magnetar.value_codecs import JsonCodec
from pyspark_magnetar.value_columns import ValueReader, ValueSpec

V1 = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"},
    {"name": "item", "type": ["null", "string"]},
    {"name": "price", "type": ["null", "double"]},
    {"name": "tags", "type": ["null", {"type": "array", "items": "string"}]},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "qty", "type": ["null", "int"], "default": None}]}
TP = TopicPartition("persistent://public/default/orders")


def test_avro_record_types():
    t = record_type({"type": "record", "name": "R", "fields": [
        {"name": "b", "type": "bytes"}, {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "m", "type": {"type": "map", "values": "long"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
        {"name": "r", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}}]})
    assert t == StructType([StructField("b", BinaryType()), StructField("d", DateType()),
                            StructField("m", MapType(StringType(), LongType())), StructField("e", StringType()),
                            StructField("r", StructType([StructField("x", IntegerType())]))])
    assert record_type(V1)["tags"].dataType == ArrayType(StringType())
    assert record_type(V1)["at"].dataType == TimestampType()
    assert record_type(V1)["price"].dataType == DoubleType()
    with pytest.raises(OptionError, match="union"):
        record_type({"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]})
    with pytest.raises(OptionError, match="recursive"):
        record_type({"type": "record", "name": "N", "fields": [{"name": "next", "type": ["null", "N"]}]})


def _binary_batch(values: list[bytes]) -> pa.RecordBatch:
    n = len(values)
    cols = {f.name: pa.nulls(n, f.type) for f in ARROW_READ_SCHEMA}
    cols["value"] = pa.array(values, pa.binary())
    cols["offset"] = pa.array(range(100, 100 + n), pa.int64())
    cols["properties"] = pa.array([[]] * n, ARROW_READ_SCHEMA.field("properties").type)
    return pa.RecordBatch.from_arrays(list(cols.values()), schema=ARROW_READ_SCHEMA)


def test_json_bulk_path_equals_value_by_value():
    plain = {"type": "record", "name": "P", "fields": [
        {"name": "id", "type": "long"}, {"name": "item", "type": ["null", "string"]},
        {"name": "tags", "type": ["null", {"type": "array", "items": "string"}]}]}
    values = [json.dumps({"id": i, "item": f"i{i}", "tags": ["a", "b"][: i % 3], "extra": 1}, indent=1).encode()
              for i in range(50)] + [b'{"id": 7}']
    reader = ValueReader(ValueSpec("JSON", plain, 0))
    codec = reader._codec
    assert isinstance(codec, JsonCodec) and codec._bulk
    versions = pa.repeat(pa.scalar(0, pa.int64()), len(values))
    bulk = codec.decode(pa.array(values, pa.binary()), versions)
    codec._bulk = False
    assert codec.decode(pa.array(values, pa.binary()), versions).equals(bulk)
    assert bulk.to_pylist()[-1] == {"id": 7, "item": None, "tags": None}


def test_json_timestamps_and_bad_value():
    reader = ValueReader(ValueSpec("JSON", V1, 0))
    batch = reader.apply(TP, _binary_batch([b'{"id": 1, "at": 86400000}']), pa.array([0], pa.int64()))
    assert batch.column("value").to_pylist()[0]["at"] == dt.datetime(1970, 1, 2, tzinfo=dt.timezone.utc)
    assert batch.column("schema_version").to_pylist() == [0]
    with pytest.raises(MagnetarSparkError, match="offset 101.*not JSON"):
        reader.apply(TP, _binary_batch([b'{"id": 1, "at": 0}', b"{oops"]), pa.array([0, 0], pa.int64()))


def _avro(definition, record) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(definition), record)
    return buf.getvalue()


def test_avro_values_of_two_versions():
    at = dt.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=dt.timezone.utc)
    old = _avro(V1, {"id": 1, "item": "a", "price": 2.5, "tags": ["x"], "at": at})
    new = _avro(V2, {"id": 2, "item": None, "price": None, "tags": None, "at": at, "qty": 3})
    reader = ValueReader(ValueSpec("AVRO", V2, 1))
    assert reader.missing([0, 1, None]) == {0}
    reader.add_version(0, TopicSchema("AVRO", V1, 0, json.dumps(V1).encode()))
    batch = reader.apply(TP, _binary_batch([old, new]), pa.array([0, 1], pa.int64()))
    assert batch.column("value").to_pylist() == [
        {"id": 1, "item": "a", "price": 2.5, "tags": ["x"], "at": at, "qty": None},
        {"id": 2, "item": None, "price": None, "tags": None, "at": at, "qty": 3}]
    assert reader.arrow_schema.names[-1] == "schema_version"
    assert ValueSpec("AVRO", V2, 1).read_schema()["value"].dataType == record_type(V2)
