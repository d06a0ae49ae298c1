"""Message -> Arrow rows (reads) and Arrow rows -> message fields (writes)."""
from __future__ import annotations

import datetime as dt

import pytest

import pyspark  # noqa: E402,F401  (a test dependency: missing must fail, not skip)
import pyarrow as pa  # noqa: E402

from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402
from pyspark.sql.types import (BinaryType, IntegerType, LongType, MapType, StringType, StructField,  # noqa: E402
                               StructType, TimestampType)

from magnetar.client import Message, MessageId  # noqa: E402
from magnetar.protocol import pb  # noqa: E402
from pyspark_magnetar.errors import OptionError, SinkError  # noqa: E402
from pyspark_magnetar.identity import producer_name  # noqa: E402
from pyspark_magnetar.offsets import TopicPartition  # noqa: E402
from pyspark_magnetar.records import check_write_schema  # noqa: E402
from pyspark_magnetar.row_batches import prepare  # noqa: E402
from pyspark_magnetar.schema import ARROW_READ_SCHEMA, READ_SCHEMA, messages_to_batch  # noqa: E402


def _message(offset: int, key: str | None, event_time: int, props: dict[str, str]) -> Message:
    meta = pb.MessageMetadata(producer_name="p1", sequence_id=offset, publish_time=1_700_000_000_123)
    if key is not None:
        meta.partition_key = key
    if event_time:
        meta.event_time = event_time
    meta.properties.extend(pb.KeyValue(key=k, value=v) for k, v in props.items())
    return Message("persistent://public/default/t", MessageId(1, offset), meta, None, f"v{offset}".encode(),
                   offset=offset)


def test_arrow_schema_is_what_spark_expects():
    assert ARROW_READ_SCHEMA.equals(to_arrow_schema(READ_SCHEMA, timezone="UTC"))


def test_messages_to_batch():
    tp = TopicPartition("persistent://public/default/t")
    batch = messages_to_batch(tp, [_message(0, "k", 0, {}), _message(1, None, 1_700_000_000_000, {"a": "b"})])
    assert batch.schema.equals(ARROW_READ_SCHEMA)
    rows = batch.to_pylist()
    assert rows[0]["key"] == b"k" and rows[1]["key"] is None
    assert [r["value"] for r in rows] == [b"v0", b"v1"]
    assert [r["offset"] for r in rows] == [0, 1] and rows[0]["partition"] == -1
    assert rows[0]["event_time"] is None
    assert rows[1]["event_time"] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc)
    assert rows[0]["publish_time"].microsecond == 123_000
    assert rows[0]["properties"] == [] and rows[1]["properties"] == [("a", "b")]
    assert rows[0]["producer_name"] == "p1" and rows[0]["topic"] == tp.topic


def _schema(*fields: StructField) -> StructType:
    return StructType(list(fields))


def test_write_schema_checks():
    check_write_schema(_schema(StructField("value", StringType()), StructField("extra", IntegerType())), "t")
    with pytest.raises(OptionError, match="needs a 'value' column"):
        check_write_schema(_schema(StructField("key", StringType())), "t")
    with pytest.raises(OptionError, match="column 'value' must be binary or string"):
        check_write_schema(_schema(StructField("value", IntegerType())), "t")
    with pytest.raises(OptionError, match="map<string,string>"):
        check_write_schema(_schema(StructField("value", BinaryType()),
                                   StructField("properties", MapType(StringType(), IntegerType()))), "t")
    with pytest.raises(OptionError, match="'topic' option or a 'topic' column"):
        check_write_schema(_schema(StructField("value", BinaryType())), None)
    check_write_schema(_schema(StructField("value", BinaryType()), StructField("topic", StringType()),
                               StructField("event_time", TimestampType()), StructField("key", BinaryType()),
                               StructField("ts", LongType())), None)


def test_prepare_normalises_and_groups_by_topic():
    batch = pa.RecordBatch.from_pydict({
        "value": pa.array(["a", "b", "c"]),
        "key": pa.array([b"k1", None, b"k3"], pa.binary()),
        "topic": pa.array(["x", "y", "x"]),
        "properties": pa.array([[("p", "1")], None, []], pa.map_(pa.string(), pa.string())),
        "event_time": pa.array([1_700_000_000_123_456, None, 0], pa.timestamp("us", tz="UTC")),
    })
    by_topic = prepare(batch, None, 10)
    assert sorted(by_topic) == ["x", "y"]
    x = by_topic["x"]
    assert x.values.to_pylist() == [b"a", b"c"] and x.keys.to_pylist() == [b"k1", b"k3"]
    assert x.positions.to_pylist() == [10, 12] and x.event_ms.to_pylist() == [1_700_000_000_123, 0]
    assert x.properties.to_pylist() == [[("p", "1")], []]
    assert by_topic["y"].positions.to_pylist() == [11]
    assert list(prepare(batch, "forced", 0)) == ["forced"]


@pytest.mark.parametrize("column, array, fragment", [
    ("value", pa.array([b"a", None], pa.binary()), "row 1 of a write batch has a null 'value'"),
    ("event_time", pa.array([1, -5], pa.int64()), "row 1: 'event_time' is before 1970"),
    ("properties", pa.array([[("a", "1")], [("b", None)]], pa.map_(pa.string(), pa.string())),
     "row 1: 'properties' has a null value"),
    ("topic", pa.array(["t", None]), "row 1 has a null 'topic'"),
])
def test_bad_rows(column, array, fragment):
    data = {"value": pa.array([b"a", b"b"], pa.binary()), column: array}
    with pytest.raises(SinkError, match=fragment):
        prepare(pa.RecordBatch.from_pydict(data), None if column == "topic" else "t", 0)


def test_producer_names_are_deterministic():
    assert producer_name("spark", "q", 3, 1) == "spark-q-3-1"
