"""Topics with a JSON or Avro schema read as struct columns (with each
message's schema version), and a DataFrame of structs writes with the
topic's schema: the official client, with the same schema, reads what
Spark wrote. Written and read by the official client on the other side."""
from __future__ import annotations

import pulsar
import pytest
from pulsar.schema import AvroSchema, Double, Integer, JsonSchema, Record, String

from pyspark_magnetar.errors import OptionError


class Order(Record):
    id = Integer(required=True)
    item = String()
    price = Double()


class OrderV2(Record):
    _avro_namespace = None
    id = Integer(required=True)
    item = String()
    price = Double()
    qty = Integer(required_default=True)  # "default": null, so the new version is compatible


OrderV2.__name__ = "Order"  # the same record, one field more (compatible: it may be null)


def _read(spark, url, topic, **options):
    r = spark.read.format("magnetar").option("service_url", url).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_json_topic_reads_as_a_struct_with_each_schema_version(spark, broker):
    url, topic = broker.service_url, "persistent://public/default/json-orders"
    client = pulsar.Client(url)
    try:
        p1 = client.create_producer(topic, schema=JsonSchema(Order))
        for i in range(3):
            p1.send(Order(id=i, item=f"item{i}", price=i + 0.5))
        p1.close()
        p2 = client.create_producer(topic, schema=JsonSchema(OrderV2))
        for i in range(3, 5):
            p2.send(OrderV2(id=i, item=None, price=None, qty=i * 10))
        p2.close()
    finally:
        client.close()

    df = _read(spark, url, topic)
    assert df.schema["value"].dataType.simpleString() == "struct<id:int,item:string,price:double,qty:int>"
    rows = df.orderBy("offset").select("value.*", "schema_version").collect()
    assert [tuple(r) for r in rows] == [(0, "item0", 0.5, None, 0), (1, "item1", 1.5, None, 0),
                                        (2, "item2", 2.5, None, 0), (3, None, None, 30, 1), (4, None, None, 40, 1)]
    raw = _read(spark, url, topic, valueFormat="binary")
    assert "schema_version" not in raw.columns and raw.schema["value"].dataType.simpleString() == "binary"


def test_avro_topic_reads_as_a_struct_and_a_struct_dataframe_writes_with_its_schema(spark, broker):
    url, topic = broker.service_url, "persistent://public/default/avro-orders"
    client = pulsar.Client(url)
    try:
        producer = client.create_producer(topic, schema=AvroSchema(Order))
        for i in range(3):
            producer.send(Order(id=i, item=f"item{i}", price=i * 2.0))
        producer.close()

        df = _read(spark, url, topic)
        assert [tuple(r) for r in df.orderBy("offset").select("value.*", "schema_version").collect()] == \
            [(0, "item0", 0.0, 0), (1, "item1", 2.0, 0), (2, "item2", 4.0, 0)]

        # Spark writes structs back (ids + 100) with the topic's Avro schema.
        df.selectExpr("named_struct('id', value.id + 100, 'item', upper(value.item), 'price', value.price) as value") \
            .write.format("magnetar").option("service_url", url).option("topic", topic).mode("append").save()
        reader = client.create_reader(topic, pulsar.MessageId.earliest, schema=AvroSchema(Order))
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(10_000).value())
        reader.close()
    finally:
        client.close()
    assert sorted((o.id, o.item, o.price) for o in got[3:]) == [(100, "ITEM0", 0.0), (101, "ITEM1", 2.0),
                                                                 (102, "ITEM2", 4.0)]
    assert {r.schema_version for r in _read(spark, url, topic).collect()} == {0}

    with pytest.raises(Exception, match="does not have"):
        spark.sql("select named_struct('id', 1, 'colour', 'red') as value").write.format("magnetar") \
            .option("service_url", url).option("topic", topic).mode("append").save()
    with pytest.raises(Exception, match="no JSON or Avro schema"):
        spark.sql("select named_struct('id', 1) as value").write.format("magnetar") \
            .option("service_url", url).option("topic", "no-schema-topic").mode("append").save()
    assert issubclass(OptionError, ValueError)


def test_binary_keys_round_trip_and_reach_other_clients_as_base64(spark, broker):
    import base64
    url, topic = broker.service_url, "persistent://public/default/binary-keys"
    keys = [b"\xff\x00\x01", b"text", None]
    spark.createDataFrame([(k, f"v{i}".encode()) for i, k in enumerate(keys)], "key binary, value binary") \
        .coalesce(1).write.format("magnetar").option("service_url", url).option("topic", topic) \
        .mode("append").save()
    assert [r.key for r in _read(spark, url, topic).orderBy("offset").collect()] == keys
    client = pulsar.Client(url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        first = reader.read_next(10_000)
        reader.close()
    finally:
        client.close()
    assert first.partition_key() == base64.b64encode(keys[0]).decode()
