"""Produce one message from the console:
``POST /console/api/produce/{tenant}/{namespace}/{topic}`` with
``{"key": "...", "properties": {"k": "v"}, "value": "..."}``, answered by the
topic's owner.

The owner attaches a short-lived producer (Shared access, a name of its own,
as a client's producer would: an exclusive producer on the topic refuses it),
publishes the one message through the topic's ordinary append path (same
rules: terminated topics, fencing, backlog quota, publish rate), waits for
its receipt (the entry is on disk under the sync policy) and detaches it.
A partitioned topic's base name routes the message as Pulsar's clients do:
a key to the partition of its Java string hash (the Java client's default;
the Python client's default is another hash), no key to a random one.

The value is UTF-8 text: stored as is for a topic with no schema, a String
or Bytes schema; a JSON schema's topic must get valid JSON. Other schema
types are refused (400): their encodings are not typed in a text box.
Producing needs the ``produce`` permission on the topic.

Failure modes: 400 a body that is not that shape, a value that is not JSON
for a JSON topic, an unsupported schema; 403 no produce permission; 404 an
unknown topic; 412 refused by the topic (terminated, an exclusive producer
holds it, quota); 502 the owner did not answer; 503 not stored within 30 s
(the topic was moving: the message may or may not land, as for a client
whose send timed out).
"""
from __future__ import annotations

import asyncio
import itertools
import json
import random
import time

from aiohttp import web

from magnetar.broker.errors import AuthorizationError
from magnetar.broker.server import permissions
from magnetar.broker.topics.producer import Producer
from magnetar.broker.topics.schemas import encode_version, to_proto
from magnetar.broker.namespaces import resources
from magnetar.client.partition_routing import java_string_hash
from magnetar.protocol import pb
from magnetar.protocol.frames import PayloadBlock, checksummed_block

from ..access import ROLE
from ..errors import AdminError, bad_request, not_found
from ..params import service_of, topic_of
from ..routes import OBJECT, RouteTable, json_answer
from .forward import forward, owner_of

table = RouteTable("console")
MAX_VALUE = 1 << 20
SEND_TIMEOUT_S = 30.0
_ids = itertools.count(1)
#: Producer ids far from a connection's (those count up from 0 per connection).
_ID_BASE = 1 << 62
TEXT_SCHEMAS = (None, "NONE", "STRING", "BYTES", "JSON")


def parse_message(body: object) -> tuple[str | None, dict[str, str], str]:
    """``(key, properties, value)`` of the request body, or 400 with what is wrong."""
    if not isinstance(body, dict):
        raise bad_request('the body must be a JSON object {"key": ..., "properties": {...}, "value": ...}')
    unknown = set(body) - {"key", "properties", "value"}
    if unknown:
        raise bad_request(f"unknown field(s) {', '.join(sorted(unknown))}: expected key, properties, value")
    key = body.get("key")
    if key is not None and not isinstance(key, str):
        raise bad_request("key must be a string or null")
    props = body.get("properties") or {}
    if not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        raise bad_request("properties must be an object of string values")
    if any(not k for k in props):
        raise bad_request("a property needs a name")
    value = body.get("value", "")
    if not isinstance(value, str):
        raise bad_request("value must be a string (the message's text)")
    if len(value.encode()) > MAX_VALUE:
        raise bad_request(f"value is larger than {MAX_VALUE} bytes")
    return key or None, props, value


async def _body(request: web.Request) -> object:
    try:
        return await request.json()
    except ValueError:
        raise bad_request("the body is not JSON") from None


@table.route("POST", "/console/api/produce/{tenant}/{namespace}/{topic}", "Produce one message (key, "
             "properties, text value) to a topic (answered by the owner; a partitioned topic routes by key)",
             answer=OBJECT, errors=(400, 401, 403, 404, 412, 502, 503))
async def produce(request: web.Request) -> web.Response:
    service = service_of(request)
    name = topic_of(request)
    key, props, value = parse_message(await _body(request))
    try:
        await permissions.check(service.authorizer, service.store, request.get(ROLE), "produce", name)
    except AuthorizationError as exc:
        raise AdminError(403, str(exc)) from None
    count = await resources.get_partitions(service.store, name)
    if count:
        index = java_string_hash(key) % count if key is not None else random.randrange(count)
        name = name.partition(index)
        path = f"/console/api/produce/{name.tenant}/{name.namespace}/{name.local}"
    else:
        path = None
    owner = await owner_of(request, name)
    if owner is not None:
        return await forward(request, owner, path)
    if not await service.topic_exists(name):
        raise not_found(f"Topic {name} does not exist")
    topic = await service.get_topic(name, create=False)
    versions = await service.schemas.versions(name)
    schema_type = pb.Schema.Type.Name(to_proto(versions[-1]).type).upper() if versions else None
    if schema_type not in TEXT_SCHEMAS:
        raise bad_request(f"{name} has a {schema_type} schema: the console produces text, JSON or bytes only")
    if schema_type == "JSON":
        try:
            json.loads(value)
        except ValueError as exc:
            raise bad_request(f"{name} has a JSON schema and the value is not JSON: {exc}") from None
    meta = pb.MessageMetadata(producer_name=f"console-{service.broker_id}-{next(_ids)}", sequence_id=0,
                              publish_time=int(time.time() * 1000))
    if key is not None:
        meta.partition_key = key
    for k, v in props.items():
        meta.properties.add(key=k, value=v)
    if versions:
        meta.schema_version = encode_version(len(versions) - 1)
    producer = Producer(producer_id=_ID_BASE + next(_ids), name=meta.producer_name, topic=topic,
                        address=request.remote or "", connected_since=time.time())
    waiter = await topic.add_producer(producer, None)
    if waiter is not None:  # only exclusive modes wait; a Shared producer is admitted or refused
        await waiter
    try:
        block = PayloadBlock(memoryview(checksummed_block(meta.SerializeToString(), value.encode())))
        send = pb.CommandSend(producer_id=producer.producer_id, sequence_id=0, num_messages=1)
        # A send held while the topic moves to another broker is never settled here.
        result = await asyncio.wait_for(topic.publish(producer, send, block), SEND_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise AdminError(503, f"{name} did not store the message within {SEND_TIMEOUT_S:.0f} s "
                              "(moving to another broker?); nothing was acknowledged: try again") from None
    finally:
        topic.remove_producer(producer)
    return json_answer({"topic": str(name), "messageId": f"{result.ledger_id}:{result.entry_id}",
                        "offset": result.first_offset})
