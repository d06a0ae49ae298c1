"""A topic's registered schema, as the connector needs it: which kind it is
(JSON, Avro, or something read as bytes), its Avro record definition, and
its version.

Schemas live in the broker's registry (one list of versions per topic; the
partitions of a partitioned topic share their topic's). :func:`fetch_schema`
asks for one with GET_SCHEMA over the client's pooled connection (any broker
answers: the registry is in the metadata store). On the wire a version is 8
bytes, big-endian; here it is an int.

Failure modes: the client's errors (Timeout, ConnectError); a definition that
is not an Avro record raises OptionError (on the driver) naming the topic.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, Sequence

from magnetar.client import AsyncClient
from magnetar.protocol import Type, command, pb

from .errors import OptionError
from .offsets import TopicPartition

_VERSION = struct.Struct(">q")
#: The schema kinds whose values become a struct column.
STRUCT_KINDS = {pb.Schema.Json: "JSON", pb.Schema.Avro: "AVRO"}


@dataclass(frozen=True)
class TopicSchema:
    """One version of a topic's schema. ``kind`` is ``"JSON"``, ``"AVRO"`` or
    None (a schema this connector reads as bytes: STRING, PROTOBUF, ...)."""

    kind: str | None
    definition: Any  # the Avro record schema (parsed JSON) for JSON and AVRO; None otherwise
    version: int
    data: bytes  # the definition exactly as registered (a producer announcing it gets this version)

    @property
    def structured(self) -> bool:
        return self.kind is not None


def encode_version(version: int) -> bytes:
    return _VERSION.pack(version)


def decode_version(raw: bytes) -> int | None:
    """A message's schema version (None unless 8 bytes)."""
    return _VERSION.unpack(raw)[0] if len(raw) == 8 else None


def parse_schema(topic: str, schema: pb.Schema, version: int) -> TopicSchema:
    kind = STRUCT_KINDS.get(schema.type)
    data = bytes(schema.schema_data)
    if kind is None:
        return TopicSchema(None, None, version, data)
    try:
        definition = json.loads(data)
    except ValueError:
        raise OptionError(f"topic {topic}: its {kind} schema (version {version}) is not valid JSON") from None
    if not isinstance(definition, dict) or definition.get("type") != "record":
        raise OptionError(f"topic {topic}: its {kind} schema (version {version}) is not an Avro record definition")
    return TopicSchema(kind, definition, version, data)


def to_proto(kind: str, data: bytes) -> pb.Schema:
    """The protocol Schema of a ``"JSON"`` or ``"AVRO"`` definition, for a producer to announce."""
    code = next(c for c, k in STRUCT_KINDS.items() if k == kind)
    return pb.Schema(name="", schema_data=data, type=code)


async def fetch_schema(client: AsyncClient, topic: str, version: int | None = None) -> TopicSchema | None:
    """``topic``'s schema ``version`` (latest if None); None if the topic has
    no schema (or no such version)."""
    fields = {"schema_version": encode_version(version)} if version is not None else {}
    reply = await client.ask_any_host(
        lambda: command(Type.GET_SCHEMA, request_id=client.new_request_id(), topic=topic, **fields))
    resp = reply.getSchemaResponse
    if resp.HasField("error_code") or not resp.HasField("schema"):
        return None
    return parse_schema(topic, resp.schema, decode_version(resp.schema_version) or 0)


async def common_schema(client: AsyncClient, parts: Sequence[TopicPartition]) -> TopicSchema | None:
    """The latest schema shared by every topic of ``parts`` if it is JSON or
    Avro; None if none of them has one (values stay bytes). OptionError if
    they disagree: one DataFrame has one value type."""
    found: dict[str, TopicSchema | None] = {}
    for topic in sorted({tp.topic for tp in parts}):
        found[topic] = await fetch_schema(client, topic)
    structured = {t: s for t, s in found.items() if s is not None and s.structured}
    if not structured:
        return None
    definitions = {(s.kind, json.dumps(s.definition, sort_keys=True)) for s in structured.values()}
    if len(structured) != len(found) or len(definitions) > 1:
        described = ", ".join(f"{t}: {s.kind if s and s.kind else 'bytes'}" for t, s in found.items())
        raise OptionError("the topics read have different value schemas (" + described + "); read them "
                          "separately, or set valueFormat=binary to read every value as bytes")
    return next(iter(structured.values()))
