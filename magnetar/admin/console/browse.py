"""The console's message browser: ``GET /console/api/messages/{tenant}/{namespace}/{topic}``
reads stored entries without any subscription, answered by the owner.

Where to start: ``offset=N`` (the topic's dense offset of a message: the
entry that holds it), ``messageId=L:E`` (a ledger and entry id), or neither
(the first stored entry). ``count`` entries (1..100, default 20) follow; a
batch is split into its messages. Each message carries its id
(``L:E`` or ``L:E:batch index``), offset, publish and event time, producer,
sequence id, key, properties, and its payload decoded by the topic's schema:
JSON and String as text (JSON parsed), the numeric and boolean types as
numbers; anything else, or bytes that do not decode, as base64 with a note.
Markers (replication's own entries) are left out.

Filters (Kafka UI's and Redpanda Console's): ``key=`` (a substring of the
key), ``property=name`` or ``property=name=value`` (substring of the value),
``text=`` (a substring of the payload as shown), ``from=`` / ``to=`` (publish
time, ms since the epoch; ``from`` alone starts the read at that time). With
a filter the read goes on past non-matching messages until ``count`` match
or ``SCAN_LIMIT`` messages were looked at; ``scanned`` says how many, and
``next`` where to go on.

Reading messages is a tenant admin's (or super-user's) right, like peeking.
Failure modes: 400 for a malformed offset, message id or count; 404 for an
unknown topic; an entry that cannot be parsed is shown with its error.
"""
from __future__ import annotations

import base64
import json
import struct

from aiohttp import web

from magnetar.broker.entries.entry_format import entry_info
from magnetar.broker.namespaces import resources
from magnetar.broker.topics.schemas import to_proto
from magnetar.protocol import ProtocolError, pb
from magnetar.protocol.batch import decode_batch
from magnetar.protocol.compression import decompress
from magnetar.protocol.frames import PayloadBlock
from magnetar.storage.position import Position

from ..access import may
from ..errors import AdminError, bad_request, not_found
from ..params import service_of, topic_of
from ..routes import OBJECT, RouteTable, json_answer
from .forward import forward, owner_of

table = RouteTable("console")
MAX_COUNT = 100
SCAN_LIMIT = 10_000
_CHUNK = 100
_NUMBERS = {"INT8": ">b", "INT16": ">h", "INT32": ">i", "INT64": ">q", "FLOAT": ">f", "DOUBLE": ">d"}


def decode_payload(payload: bytes, schema_type: str | None) -> dict:
    """``{"value": ..., "encoding": ...}``: the payload as the schema reads it."""
    if schema_type in ("JSON", "STRING", None, "NONE", "BYTES"):
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            return {"value": base64.b64encode(payload).decode(), "encoding": "base64"}
        if schema_type == "JSON":
            try:
                return {"value": json.loads(text), "encoding": "json"}
            except ValueError:
                return {"value": text, "encoding": "text", "note": "not valid JSON"}
        return {"value": text, "encoding": "text"}
    fmt = _NUMBERS.get(schema_type or "")
    if fmt is not None and len(payload) == struct.calcsize(fmt):
        return {"value": struct.unpack(fmt, payload)[0], "encoding": "number"}
    if schema_type == "BOOL" and len(payload) == 1:
        return {"value": payload != b"\x00", "encoding": "boolean"}
    return {"value": base64.b64encode(payload).decode(), "encoding": "base64",
            "note": f"{schema_type} payloads are shown as base64"}


def _properties(items) -> dict:
    return {kv.key: kv.value for kv in items}


def entry_messages(entry, schema_type: str | None) -> list[dict]:
    """The messages of one stored entry (a batch gives several)."""
    pos = entry.position
    base = {"ledgerId": pos.ledger_id, "entryId": pos.entry_id}
    try:
        info = entry_info(entry.data)
        block = PayloadBlock(memoryview(entry.data))
        meta = block.metadata
        if meta.HasField("marker_type"):
            return []
        payload = decompress(meta.compression, bytes(block.payload), meta.uncompressed_size)
    except (ProtocolError, ValueError) as exc:
        return [{**base, "messageId": str(pos), "error": f"cannot be read: {exc}"}]
    common = {**base, "publishTime": meta.publish_time, "producerName": meta.producer_name,
              "sequenceId": meta.sequence_id, "replicatedFrom": meta.replicated_from or None}
    if not meta.HasField("num_messages_in_batch"):
        return [{**common, "messageId": str(pos), "offset": info.first_offset,
                 "key": meta.partition_key if meta.HasField("partition_key") else None,
                 "eventTime": meta.event_time or None, "properties": _properties(meta.properties),
                 "size": len(payload), "payload": decode_payload(payload, schema_type)}]
    try:
        singles = decode_batch(payload, meta.num_messages_in_batch)
    except ProtocolError as exc:
        return [{**common, "messageId": str(pos), "error": f"batch cannot be read: {exc}"}]
    return [{**common, "messageId": f"{pos}:{i}", "batchIndex": i, "offset": info.first_offset + i,
             "key": m.metadata.partition_key if m.metadata.HasField("partition_key") else None,
             "eventTime": m.metadata.event_time or None, "properties": _properties(m.metadata.properties),
             "size": len(m.payload), "payload": decode_payload(bytes(m.payload), schema_type)}
            for i, m in enumerate(singles)]


def _count(request: web.Request) -> int:
    raw = request.query.get("count") or "20"
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_COUNT:
        raise bad_request(f"count must be 1..{MAX_COUNT}, got {raw!r}")
    return int(raw)


def _time(request: web.Request, name: str) -> int | None:
    raw = (request.query.get(name) or "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise bad_request(f"{name} must be a publish time in ms since the epoch, got {raw!r}")
    return int(raw)


def message_filter(request: web.Request):
    """The filter of the query's ``key``, ``property``, ``text``, ``from``,
    ``to`` (None when none is set), or 400 saying which is malformed."""
    key = (request.query.get("key") or "").lower()
    prop = request.query.get("property") or ""
    text = (request.query.get("text") or "").lower()
    low, high = _time(request, "from"), _time(request, "to")
    if low is not None and high is not None and low > high:
        raise bad_request(f"from ({low}) is after to ({high})")
    prop_name, _, prop_value = prop.partition("=")
    if prop and not prop_name.strip():
        raise bad_request(f"property must be name or name=value, got {prop!r}")
    if not (key or prop or text or low is not None or high is not None):
        return None

    def matches(m: dict) -> bool:
        if "error" in m:
            return False
        if key and key not in (m.get("key") or "").lower():
            return False
        if prop:
            value = (m.get("properties") or {}).get(prop_name.strip())
            if value is None or (prop_value and prop_value not in value):
                return False
        if low is not None and m["publishTime"] < low:
            return False
        if high is not None and m["publishTime"] > high:
            return False
        if text:
            value = m["payload"]["value"]
            shown = value if isinstance(value, str) else json.dumps(value)
            if text not in shown.lower():
                return False
        return True

    return matches


async def _start(request: web.Request, topic) -> Position | None:
    offset, mid = request.query.get("offset"), request.query.get("messageId")
    if offset not in (None, ""):
        if not offset.isdigit():
            raise bad_request(f"offset must be a non-negative integer, got {offset!r}")
        return await topic.position_of_offset(int(offset))
    if mid not in (None, ""):
        parts = mid.split(":")
        if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
            raise bad_request(f"messageId must be ledger:entry (e.g. 12:0), got {mid!r}")
        return Position(int(parts[0]), int(parts[1]))
    since = _time(request, "from")
    if since is not None:
        return await topic.find_position_by_time(since)
    return topic.ledger.first_position()


@table.route("GET", "/console/api/messages/{tenant}/{namespace}/{topic}", "Stored messages from an offset or "
             "message id or publish time (?offset=, messageId=L:E, from=ms, count=), payloads decoded by the topic's "
             "schema; filtered by key=, property=name[=value], text=, from=, to=",
             answer=OBJECT, errors=(400, 401, 403, 404, 502, 503))
async def messages(request: web.Request) -> web.Response:
    service = service_of(request)
    name = topic_of(request)
    path = f"/admin/v2/persistent/{name.tenant}/{name.namespace}/{name.local}/subscription/console/position/1"
    if not await may(request, "GET", path):
        raise AdminError(403, f"role {request.get('magnetar.role')!r} may not read the messages of {name}")
    count = _count(request)
    if await resources.get_partitions(service.store, name):
        raise not_found(f"{name} is partitioned: browse one partition ({name}-partition-<i>)")
    owner = await owner_of(request, name)
    if owner is not None:
        return await forward(request, owner)
    if not await service.topic_exists(name):
        raise not_found(f"Topic {name} does not exist")
    topic = await service.get_topic(name, create=False)
    versions = await service.schemas.versions(name)
    schema_type = pb.Schema.Type.Name(to_proto(versions[-1]).type).upper() if versions else None
    matches = message_filter(request)
    start = await _start(request, topic)
    ledger = topic.ledger
    found: list[dict] = []
    scanned = 0
    last = ledger.last_confirmed
    read_to = None
    while start is not None and last is not None and start <= last:
        entries = await ledger.read_entries(start, count if matches is None else _CHUNK)
        if not entries:
            break
        for entry in entries:
            batch = entry_messages(entry, schema_type)
            scanned += len(batch)
            found += batch if matches is None else [m for m in batch if matches(m)]
            read_to = entry.position
            if len(found) >= count or scanned >= SCAN_LIMIT:
                break
        if matches is None or len(found) >= count or scanned >= SCAN_LIMIT:
            break
        start = ledger.next_position(read_to)
    next_id = None
    if read_to is not None and last is not None:
        following = ledger.next_position(read_to)
        next_id = str(following) if following <= last else None
    return json_answer({"topic": str(name), "schema": schema_type, "messages": found,
                        "next": next_id, "scanned": scanned, "filtered": matches is not None})
