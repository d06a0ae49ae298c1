"""Schemas: ``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...``, Pulsar's paths and shapes.

Versions live in the broker's schema registry (``broker/topics/schemas.py``),
which producers and consumers use too; a partitioned topic's partitions
share their topic's schema. Answers use Pulsar's GetSchemaResponse shape:
``{"version", "type" ("AVRO", "JSON", "STRING"...), "timestamp", "data" (the
definition as text), "properties"}``; uploads Pulsar's PostSchemaPayload
``{"type", "schema", "properties"}``.

Failure modes: 404 for a topic with no schema (or no such version), 409 for
an upload the compatibility strategy refuses (``schemaCompatibilityStrategy``
of the broker), 400 for a malformed payload or an unknown type.
"""
from __future__ import annotations

import re

from aiohttp import web

from magnetar.broker.topic_name import TopicName, parse
from magnetar.broker.topics.schemas import IncompatibleSchema, check_compatible, to_proto
from magnetar.protocol import pb

from .errors import AdminError, bad_request, not_found, precondition_failed
from .params import json_body, service_of
from .routes import INTEGER, OBJECT, RouteTable, json_answer

table = RouteTable("schemas")
BASE = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"
PAYLOAD = {"type": "object", "properties": {"type": {"type": "string"}, "schema": {"type": "string"},
                                            "properties": OBJECT}, "required": ["type"]}
VERSION = {"type": "object", "properties": {"version": INTEGER}}


def type_name(value: int) -> str:
    """``pb.Schema.Type`` as Pulsar's SchemaType name (``KeyValue`` -> ``KEY_VALUE``)."""
    name = pb.Schema.Type.Name(value)
    if name == "Bool":
        return "BOOLEAN"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


_TYPES = {type_name(v): v for v in pb.Schema.Type.values()}


def _topic(request: web.Request) -> TopicName:
    try:
        return parse("persistent://{tenant}/{namespace}/{topic}".format(**request.match_info))
    except ValueError as exc:
        raise precondition_failed(f"Topic name is not valid: {exc}") from None


def _answer(version: int, doc: dict) -> dict:
    schema = to_proto(doc)
    return {"version": version, "type": type_name(schema.type), "timestamp": doc.get("created", 0),
            "data": schema.schema_data.decode(errors="replace"),
            "properties": {kv.key: kv.value for kv in schema.properties}}


async def _payload(request: web.Request) -> pb.Schema:
    body = await json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        raise bad_request('the body must be {"type": "AVRO"|"JSON"|..., "schema": "...", "properties": {}}')
    kind = _TYPES.get(body["type"].upper())
    if kind is None:
        raise bad_request(f"unknown schema type {body['type']!r}: one of {', '.join(sorted(_TYPES))}")
    definition = body.get("schema", "")
    properties = body.get("properties") or {}
    if not isinstance(definition, str) or not isinstance(properties, dict):
        raise bad_request("schema must be a string and properties an object of strings")
    schema = pb.Schema(name=body.get("name", ""), type=kind, schema_data=definition.encode())
    for key, value in sorted(properties.items()):
        schema.properties.add(key=str(key), value=str(value))
    return schema


@table.route("GET", BASE + "/schema", "The topic's latest schema", answer=OBJECT, errors=(404, 412))
async def latest(request: web.Request) -> web.Response:
    versions = await service_of(request).schemas.versions(_topic(request))
    if not versions:
        raise not_found("the topic has no schema")
    return json_answer(_answer(len(versions) - 1, versions[-1]))


@table.route("GET", BASE + "/schema/{version}", "One version of the topic's schema", answer=OBJECT,
             errors=(404, 412))
async def one_version(request: web.Request) -> web.Response:
    versions = await service_of(request).schemas.versions(_topic(request))
    raw = request.match_info["version"]
    if not raw.isdigit() or int(raw) >= len(versions):
        raise not_found(f"the topic has no schema version {raw}")
    return json_answer(_answer(int(raw), versions[int(raw)]))


@table.route("GET", BASE + "/schemas", "Every version of the topic's schema", answer=OBJECT, errors=(412,))
async def all_versions(request: web.Request) -> web.Response:
    versions = await service_of(request).schemas.versions(_topic(request))
    return json_answer({"getSchemaResponses": [_answer(i, doc) for i, doc in enumerate(versions)]})


@table.route("POST", BASE + "/schema", "Register a schema version (if compatible)", body=PAYLOAD, answer=VERSION,
             errors=(400, 409, 412))
async def upload(request: web.Request) -> web.Response:
    schema = await _payload(request)
    try:
        version = await service_of(request).schemas.add(_topic(request), schema)
    except IncompatibleSchema as exc:
        raise AdminError(409, str(exc)) from None
    return json_answer({"version": version})


@table.route("POST", BASE + "/compatibility", "Whether a schema may be registered now", body=PAYLOAD,
             answer=OBJECT, errors=(400, 412))
async def compatibility(request: web.Request) -> web.Response:
    schema = await _payload(request)
    registry = service_of(request).schemas
    versions = await registry.versions(_topic(request))
    try:
        if versions:
            check_compatible(schema, versions[-1], registry.strategy)
        ok = True
    except IncompatibleSchema:
        ok = False
    return json_answer({"compatibility": ok, "schemaCompatibilityStrategy": registry.strategy})


@table.route("POST", BASE + "/version", "The version a schema was registered as", body=PAYLOAD, answer=VERSION,
             errors=(400, 404, 412))
async def version_of(request: web.Request) -> web.Response:
    schema = await _payload(request)
    for i, doc in enumerate(await service_of(request).schemas.versions(_topic(request))):
        if doc["type"] == schema.type and to_proto(doc).schema_data == schema.schema_data:
            return json_answer({"version": i})
    raise not_found("that schema is not registered on the topic")


@table.route("DELETE", BASE + "/schema", "Delete every version of the topic's schema", answer=VERSION,
             errors=(412,))
async def delete(request: web.Request) -> web.Response:
    registry = service_of(request).schemas
    name = _topic(request)
    versions = await registry.versions(name)
    await registry.delete(name)
    return json_answer({"version": len(versions) - 1 if versions else -1})
