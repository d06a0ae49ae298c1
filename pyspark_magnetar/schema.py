"""The rows a read produces, and how messages become Arrow record batches.

Columns (all derived from one message):

==============  ===================  ==============================================
key             binary, nullable     the partition key's bytes (UTF-8, or a binary key's); null if none
value           binary               the payload
topic           string               fully qualified topic (the base name for a partition)
partition       int                  partition index, -1 for a non-partitioned topic
offset          long                 the message's dense topic offset
publish_time    timestamp            producer's publish time
event_time      timestamp, nullable  application event time; null if unset (0)
properties      map<string,string>   message properties (empty map if none)
producer_name   string               name of the producer that wrote it
==============  ===================  ==============================================

Spark accepts a yielded RecordBatch only if its Arrow schema equals the one
Spark derives from :data:`READ_SCHEMA` (UTC microsecond timestamps,
non-null map entries), so :data:`ARROW_READ_SCHEMA` is derived the same way
rather than written by hand.
"""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (BinaryType, IntegerType, LongType, MapType, StringType, StructField, StructType,
                               TimestampType)

from magnetar.client import Message

from .offsets import TopicPartition

READ_SCHEMA = StructType([
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("publish_time", TimestampType(), True),
    StructField("event_time", TimestampType(), True),
    StructField("properties", MapType(StringType(), StringType(), False), True),
    StructField("producer_name", StringType(), True),
])

ARROW_READ_SCHEMA: pa.Schema = to_arrow_schema(READ_SCHEMA, timezone="UTC")
_TS = ARROW_READ_SCHEMA.field("publish_time").type
_PROPS = ARROW_READ_SCHEMA.field("properties").type


def messages_to_batch(tp: TopicPartition, messages: Sequence[Message]) -> pa.RecordBatch:
    """One record batch holding ``messages`` (all of partition ``tp``), in order.

    Every message must carry an offset (Magnetar's broker entry metadata);
    the caller checks that while reading.
    """
    n = len(messages)
    keys = [m.partition_key_bytes() if m.has_partition_key() else None for m in messages]
    event_us = []
    for m in messages:
        et = m.event_timestamp()
        event_us.append(et * 1000 if et else None)
    arrays = [
        pa.array(keys, pa.binary()),
        pa.array([m.data() for m in messages], pa.binary()),
        pa.array([tp.topic] * n, pa.string()),
        pa.array([tp.partition] * n, pa.int32()),
        pa.array([m.offset for m in messages], pa.int64()),
        pa.array([m.publish_timestamp() * 1000 for m in messages], _TS),
        pa.array(event_us, _TS),
        pa.array([list(m.properties().items()) for m in messages], _PROPS),
        pa.array([m.producer_name() for m in messages], pa.string()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_READ_SCHEMA)
