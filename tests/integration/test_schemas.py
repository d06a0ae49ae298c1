"""Schemas with the official client: String, JSON and Avro; versions and refusals."""
from __future__ import annotations

import socket
import struct

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String, StringSchema

from magnetar.protocol import Connection, Role, pb
from magnetar.protocol.commands import Type, command


class User(Record):
    name = String()
    age = Integer()


class UserWithEmail(Record):  # adds a field with a default: compatible both ways
    name = String()
    age = Integer()
    email = String(default="none", required_default=True)


class UserWithPhone(Record):  # adds a field without a default: old data cannot fill it
    name = String()
    age = Integer()
    phone = String(required=True)


def _version(raw: bytes | str) -> int:
    if isinstance(raw, str):  # Message.schema_version() gives the 8 bytes as a str
        raw = raw.encode("latin-1")
    return struct.unpack(">q", raw)[0]


def _earliest(client, topic, schema, name="s"):
    return client.subscribe(topic, name, schema=schema, initial_position=pulsar.InitialPosition.Earliest)


def test_string_schema_round_trip(pulsar_client):
    consumer = _earliest(pulsar_client, "schema-string", StringSchema())
    producer = pulsar_client.create_producer("schema-string", schema=StringSchema())
    producer.send("héllo")
    msg = consumer.receive(timeout_millis=5000)
    assert msg.value() == "héllo"
    assert _version(msg.schema_version()) == 0


@pytest.mark.parametrize("schema_class", [JsonSchema, AvroSchema])
def test_record_schemas_round_trip_and_evolve(pulsar_client, schema_class):
    topic = f"schema-{schema_class.__name__}"
    producer = pulsar_client.create_producer(topic, schema=schema_class(User))
    consumer = _earliest(pulsar_client, topic, schema_class(User))
    producer.send(User(name="ada", age=36))
    msg = consumer.receive(timeout_millis=5000)
    assert (msg.value().name, msg.value().age) == ("ada", 36)
    assert _version(msg.schema_version()) == 0

    # A compatible change becomes version 1; the same schema again reuses its version.
    evolved = pulsar_client.create_producer(topic, schema=schema_class(UserWithEmail))
    evolved.send(UserWithEmail(name="bob", age=7, email="b@x"))
    msg = consumer.receive(timeout_millis=5000)
    assert _version(msg.schema_version()) == 1
    assert msg.value().name == "bob"
    again = pulsar_client.create_producer(topic, schema=schema_class(User))
    again.send(User(name="cy", age=1))
    assert _version(consumer.receive(timeout_millis=5000).schema_version()) == 0

    # Incompatible: a new field without a default, or another type.
    with pytest.raises(pulsar.IncompatibleSchema):
        pulsar_client.create_producer(topic, schema=schema_class(UserWithPhone))
    with pytest.raises(pulsar.IncompatibleSchema):
        pulsar_client.create_producer(topic, schema=StringSchema())
    with pytest.raises(pulsar.IncompatibleSchema):
        _earliest(pulsar_client, topic, StringSchema(), name="wrong-type")

    # Bytes producers carry no schema: Pulsar admits them (schema validation not enforced).
    raw = pulsar_client.create_producer(topic)
    raw.send(b'{"name": "raw", "age": 2}')


def test_consumer_schema_on_an_idle_topic_becomes_the_first_version(pulsar_client):
    consumer = _earliest(pulsar_client, "schema-consumer-first", JsonSchema(User))
    with pytest.raises(pulsar.IncompatibleSchema):
        pulsar_client.create_producer("schema-consumer-first", schema=StringSchema())
    producer = pulsar_client.create_producer("schema-consumer-first", schema=JsonSchema(User))
    producer.send(User(name="z", age=3))
    assert consumer.receive(timeout_millis=5000).value().name == "z"


def test_get_schema_and_get_or_create_schema_on_the_wire(broker, pulsar_client):
    pulsar_client.create_producer("schema-wire", schema=JsonSchema(User)).close()
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    conn = Connection(Role.CLIENT)
    sock.sendall(conn.send(command(Type.CONNECT, client_version="raw-test", protocol_version=20)))
    frames: list = []

    def read_one():
        while not frames:
            frames.extend(conn.receive_data(sock.recv(65536)))
        return frames.pop(0).command

    assert read_one().type == Type.CONNECTED

    def ask(cmd):
        sock.sendall(conn.send(cmd))
        return read_one()

    topic = "persistent://public/default/schema-wire"
    latest = ask(command(Type.GET_SCHEMA, request_id=1, topic=topic)).getSchemaResponse
    assert not latest.HasField("error_code")
    assert latest.schema.type == pb.Schema.Json and b'"User"' in latest.schema.schema_data
    assert _version(latest.schema_version) == 0
    v0 = ask(command(Type.GET_SCHEMA, request_id=2, topic=topic, schema_version=struct.pack(">q", 0)))
    assert v0.getSchemaResponse.schema.schema_data == latest.schema.schema_data
    missing = ask(command(Type.GET_SCHEMA, request_id=3, topic=topic, schema_version=struct.pack(">q", 9)))
    assert missing.getSchemaResponse.error_code == pb.TopicNotFound
    none = ask(command(Type.GET_SCHEMA, request_id=4, topic="persistent://public/default/no-schema-here"))
    assert none.getSchemaResponse.error_code == pb.TopicNotFound
    same = ask(command(Type.GET_OR_CREATE_SCHEMA, request_id=5, topic=topic, schema=latest.schema))
    assert _version(same.getOrCreateSchemaResponse.schema_version) == 0
    string = pb.Schema(name="s", schema_data=b"", type=pb.Schema.String)
    refused = ask(command(Type.GET_OR_CREATE_SCHEMA, request_id=6, topic=topic, schema=string))
    assert refused.getOrCreateSchemaResponse.error_code == pb.IncompatibleSchema
    sock.close()
