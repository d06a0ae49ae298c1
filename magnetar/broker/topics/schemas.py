"""Topic schemas: versions per topic in the metadata store, and compatibility.

Storage: one key per topic, ``/schemas/<tenant>/<namespace>/<domain>/<local>``
(partitions share their partitioned topic's key), holding JSON
``{"versions": [{"type", "name", "data" (base64), "properties", "created"}]}``.
Updates are compare-and-set on that key, retried on conflict, so two brokers
(or two producers) registering at once cannot lose a version. Versions are
numbered from 0; on the wire a version is 8 bytes, big-endian (Pulsar's).

Rules (Pulsar's defaults unless said):

- A producer or consumer without a schema (the official client sends none for
  BytesSchema) is admitted on any topic, unless ``schema_validation_enforced``;
  its producer gets no schema version.
- A producer's schema identical (type and definition) to any stored version
  reuses that version; otherwise it must be compatible with the latest
  version and becomes the next one. The first schema of a topic is always
  accepted. Refusals raise :class:`IncompatibleSchema` (fatal for the client).
- A consumer's schema is checked the same way but never stored, except on an
  idle topic (no schema, no stored entries, no producers), where it becomes
  version 0, as in Pulsar. A consumer with a schema on a topic that has data
  but no schema is refused ("topic does not have schema to check").
- Compatibility (``schema_compatibility_strategy``): the type never changes.
  For AVRO and JSON (record definitions in Avro's JSON form) the record
  fields are compared: BACKWARD = a reader of the new version can read data
  written with the old one (every field the new version adds has a
  ``default``; a field in both keeps its type, or widens it: int -> long ->
  float -> double, or a union that contains the old type); FORWARD = the
  same with old and new swapped; FULL = both; ALWAYS_COMPATIBLE = type check
  only. Other types (STRING, PROTOBUF, ...) are compatible whenever the type
  matches. Definitions that are not parseable Avro records are compatible
  only when byte-identical.
"""
from __future__ import annotations

import asyncio
import base64
import json
import struct
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from magnetar.formats import check_format
from magnetar.metadata.store import BadVersion, MetadataStore
from magnetar.protocol import ServerError, pb

from magnetar.broker.errors import BrokerError
from magnetar.broker.topic_name import TopicName

if TYPE_CHECKING:
    from .topic import Topic

ROOT = "/schemas"
_VERSION = struct.Struct(">q")
_RECORD_TYPES = (pb.Schema.Avro, pb.Schema.Json)
_NONE = pb.Schema.Type.Value("None")  # "None" is not a usable attribute name
_WIDENINGS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
              ("float", "double"), ("string", "bytes"), ("bytes", "string")}


class IncompatibleSchema(BrokerError):
    code = ServerError.IncompatibleSchema


#: A topic's schema record: ``{"format": 1, "versions": [...]}`` (no ``format``: 1).
FORMAT = 1


def _versions(key: str, raw: bytes) -> list[dict]:
    """The versions of a stored schema record; NewerFormatError for a newer format."""
    doc = json.loads(raw)
    check_format("schema record", key, doc.get("format", 1), FORMAT)
    return doc["versions"]


def encode_version(version: int) -> bytes:
    return _VERSION.pack(version)


def decode_version(raw: bytes) -> int:
    """A wire schema version; raises ValueError unless it is 8 bytes."""
    if len(raw) != 8:
        raise ValueError(f"schema version must be 8 bytes, got {len(raw)}")
    return _VERSION.unpack(raw)[0]


def schema_key(topic: TopicName) -> str:
    base = topic.partitioned_base
    return f"{ROOT}/{base.tenant}/{base.namespace}/{base.domain}/{base.local}"


def _doc(schema: pb.Schema) -> dict:
    return {
        "type": int(schema.type),
        "name": schema.name,
        "data": base64.b64encode(schema.schema_data).decode(),
        "properties": {kv.key: kv.value for kv in schema.properties},
        "created": int(time.time() * 1000),
    }


def to_proto(doc: dict) -> pb.Schema:
    schema = pb.Schema(name=doc.get("name", ""), schema_data=base64.b64decode(doc["data"]), type=doc["type"])
    for k, v in sorted(doc.get("properties", {}).items()):
        schema.properties.add(key=k, value=v)
    return schema


def _same(doc: dict, schema: pb.Schema) -> bool:
    return doc["type"] == schema.type and base64.b64decode(doc["data"]) == schema.schema_data


# -- compatibility -------------------------------------------------------------
def _record(data: bytes) -> dict | None:
    try:
        parsed = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(parsed, dict) and parsed.get("type") == "record" and isinstance(parsed.get("fields"), list):
        return parsed
    return None


def _type_name(t: Any) -> Any:
    """A comparable form of an Avro type (records by name, unions as tuples)."""
    if isinstance(t, list):
        return tuple(_type_name(x) for x in t)
    if isinstance(t, dict):
        kind = t.get("type")
        if kind in ("record", "enum", "fixed"):
            return t.get("name", kind)
        if kind == "array":
            return ("array", _type_name(t.get("items")))
        if kind == "map":
            return ("map", _type_name(t.get("values")))
        return _type_name(kind)
    return t


def _readable(reader: Any, writer: Any) -> bool:
    """Can a field of type ``reader`` be read from data written as ``writer``?"""
    r, w = _type_name(reader), _type_name(writer)
    if r == w or (r, w) in {(b, a) for a, b in _WIDENINGS}:
        return True
    if isinstance(w, tuple):  # every branch the writer may have used must be readable
        return all(_readable(reader, branch) for branch in writer)
    if isinstance(r, tuple):
        return any(_readable(branch, writer) for branch in reader)
    return False


def can_read(reader: dict, writer: dict) -> str | None:
    """None if records written with ``writer`` can be read with ``reader``; else why not."""
    written = {f.get("name"): f for f in writer["fields"] if isinstance(f, dict)}
    for field in reader["fields"]:
        if not isinstance(field, dict):
            return "a field definition is not an object"
        name = field.get("name")
        old = written.get(name)
        if old is None:
            if "default" not in field:
                return f"field {name!r} is missing in the other version and has no default"
        elif not _readable(field.get("type"), old.get("type")):
            return f"field {name!r} changes type from {_type_name(old.get('type'))} to {_type_name(field.get('type'))}"
    return None


#: Pulsar's SchemaCompatibilityStrategy values a namespace may set (UNDEFINED: the broker's default).
STRATEGIES = ("UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
              "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")


def check_against(new: pb.Schema, versions: list[dict], strategy: str) -> None:
    """Raise IncompatibleSchema unless ``new`` may follow ``versions`` under
    ``strategy``: the latest version, or every one for the ``_TRANSITIVE``
    strategies; ALWAYS_INCOMPATIBLE refuses any new version."""
    if strategy == "ALWAYS_INCOMPATIBLE":
        raise IncompatibleSchema("the namespace's schema compatibility strategy is ALWAYS_INCOMPATIBLE: "
                                 "no new schema version is accepted")
    base = strategy.removesuffix("_TRANSITIVE")
    for old in (versions if strategy.endswith("_TRANSITIVE") else versions[-1:]):
        check_compatible(new, old, base)


def check_compatible(new: pb.Schema, latest: dict, strategy: str) -> None:
    """Raise IncompatibleSchema unless ``new`` may follow ``latest`` under ``strategy``."""
    if new.type != latest["type"]:
        raise IncompatibleSchema(
            f"schema type {pb.Schema.Type.Name(new.type)} differs from the topic's "
            f"{pb.Schema.Type.Name(latest['type'])}")
    if strategy == "ALWAYS_COMPATIBLE" or new.type not in _RECORD_TYPES:
        return
    old_data = base64.b64decode(latest["data"])
    new_rec, old_rec = _record(new.schema_data), _record(old_data)
    if new_rec is None or old_rec is None:
        if new.schema_data != old_data:
            raise IncompatibleSchema("schema definitions differ and are not Avro records that can be compared")
        return
    problems = []
    if strategy in ("BACKWARD", "FULL"):
        problems.append(can_read(new_rec, old_rec))
    if strategy in ("FORWARD", "FULL"):
        problems.append(can_read(old_rec, new_rec))
    reason = next((p for p in problems if p), None)
    if reason:
        raise IncompatibleSchema(f"schema is not {strategy} compatible with the latest version: {reason}")


# -- the registry --------------------------------------------------------------
class SchemaRegistry:
    def __init__(self, store: MetadataStore, strategy: str = "FULL", validation_enforced: bool = False,
                 namespace_policies: Callable[[str], Awaitable[dict]] | None = None) -> None:
        """``strategy`` is the broker's; ``namespace_policies`` (a namespace's
        policies, unset fields None) lets a namespace choose its own."""
        self.namespace_policies = namespace_policies
        self.store = store
        self.strategy = strategy
        self.validation_enforced = validation_enforced

    async def versions(self, topic: TopicName) -> list[dict]:
        record = await self.store.get(schema_key(topic))
        if record is None:
            return []
        return _versions(schema_key(topic), record.value)

    async def get(self, topic: TopicName, version: int | None = None) -> tuple[int, pb.Schema] | None:
        """The given version (latest if None), or None if there is no such version."""
        versions = await self.versions(topic)
        if not versions:
            return None
        if version is None:
            version = len(versions) - 1
        if not 0 <= version < len(versions):
            return None
        return version, to_proto(versions[version])

    async def add(self, topic: TopicName, schema: pb.Schema) -> int:
        """The version of ``schema`` on ``topic``, registering it if new and compatible."""
        key = schema_key(topic)
        while True:
            record = await self.store.get(key)
            versions = _versions(key, record.value) if record is not None else []
            for i, doc in enumerate(versions):
                if _same(doc, schema):
                    return i
            if versions:
                check_against(schema, versions, await self.strategy_of(topic))
            value = json.dumps({"format": FORMAT, "versions": versions + [_doc(schema)]}).encode()
            try:
                await self.store.put(key, value, record.version if record is not None else -1)
            except BadVersion:
                await asyncio.sleep(0)  # someone registered meanwhile: look again
                continue
            return len(versions)

    async def for_producer(self, topic: "Topic", schema: pb.Schema | None) -> bytes | None:
        """The schema version to answer in PRODUCER_SUCCESS (None: the producer has no schema)."""
        if schema is None or schema.type == _NONE:
            await self._without_schema(topic)
            return None
        return encode_version(await self.add(topic.name, schema))

    async def for_consumer(self, topic: "Topic", schema: pb.Schema | None) -> None:
        """Admit a subscribing consumer's schema or raise IncompatibleSchema."""
        if schema is None or schema.type == _NONE:
            await self._without_schema(topic)
            return
        versions = await self.versions(topic.name)
        if not versions:
            idle = topic.stored_entries == 0 and not topic.producers
            if idle:
                await self.add(topic.name, schema)
                return
            raise IncompatibleSchema(f"topic {topic.name} has data but no schema to check a consumer's schema against")
        if any(_same(doc, schema) for doc in versions):
            return
        check_against(schema, versions, await self.strategy_of(topic.name))

    async def strategy_of(self, topic: TopicName) -> str:
        """The namespace's ``schema_compatibility_strategy``, or the broker's when UNDEFINED or unset."""
        chosen = None
        if self.namespace_policies is not None:
            chosen = (await self.namespace_policies(topic.namespace_name)).get("schema_compatibility_strategy")
        return chosen if chosen and chosen != "UNDEFINED" else self.strategy

    async def _without_schema(self, topic: "Topic") -> None:
        if self.validation_enforced and await self.versions(topic.name):
            raise IncompatibleSchema(f"topic {topic.name} has a schema: producers and consumers must give one")

    async def delete(self, topic: TopicName) -> None:
        try:
            await self.store.delete(schema_key(topic))
        except Exception:  # KeyNotFound: nothing to delete
            pass

    # -- protocol answers --------------------------------------------------------
    async def get_schema_response(self, req: pb.CommandGetSchema, topic: TopicName) -> dict:
        """The fields of GET_SCHEMA_RESPONSE for ``req``."""
        version = None
        if req.HasField("schema_version") and req.schema_version:
            try:
                version = decode_version(req.schema_version)
            except ValueError as exc:
                return {"error_code": ServerError.IncompatibleSchema, "error_message": str(exc)}
        found = await self.get(topic, version)
        if found is None:
            what = "no schema" if version is None else f"no schema version {version}"
            return {"error_code": ServerError.TopicNotFound, "error_message": f"topic {topic} has {what}"}
        v, schema = found
        return {"schema": schema, "schema_version": encode_version(v)}

    async def get_or_create_response(self, req: pb.CommandGetOrCreateSchema, topic: TopicName) -> dict:
        try:
            return {"schema_version": encode_version(await self.add(topic, req.schema))}
        except BrokerError as exc:
            return {"error_code": exc.code, "error_message": str(exc)}
