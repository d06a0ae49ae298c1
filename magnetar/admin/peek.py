"""Peeking at a subscription's backlog without consuming it:
``GET .../subscription/{sub}/position/{n}`` (``pulsar-admin topics peek-messages``).

The answer is the n-th unacknowledged entry's payload (decompressed; for a
batch, the whole batch payload with its per-message metadata, which the
client splits) and its metadata as Pulsar's ``X-Pulsar-*`` headers.
"""
from __future__ import annotations

import datetime
from urllib.parse import quote

from aiohttp import web

from magnetar.broker.subscriptions import cursor_ops
from magnetar.protocol import ProtocolError, pb
from magnetar.protocol.compression import decompress
from magnetar.protocol.frames import PayloadBlock

from .errors import not_found, precondition_failed
from .params import int_in_path
from .routes import BYTES, RouteTable
from .subscriptions import SUB, named_subscriptions

table = RouteTable("subscriptions")


@table.route("GET", SUB + "/position/{messagePosition}", "Peek the n-th unacknowledged message (from 1)",
             answer=BYTES, errors=(400, 404, 412),
             description="The payload (a batch's whole payload) with its metadata as X-Pulsar-* headers; "
                         "the subscription does not move.")
async def peek_message(request: web.Request) -> web.Response:
    n = int_in_path(request, "messagePosition", low=1)
    subs = await named_subscriptions(request)
    if len(subs) != 1:
        raise precondition_failed("peek one partition at a time (TOPIC-partition-N)")
    sub = subs[0]
    entry = await cursor_ops.nth_in_backlog(sub, n)
    if entry is None:
        raise not_found(f"no message at position {n}: subscription {sub.name} has {sub.backlog()} "
                        "unacknowledged entries")
    block = PayloadBlock(memoryview(entry.data))
    try:
        meta = block.metadata
        payload = decompress(meta.compression, bytes(block.payload), meta.uncompressed_size)
    except ProtocolError as exc:
        raise precondition_failed(f"entry {entry.position} cannot be read: {exc}") from None
    headers = message_headers(entry.position.ledger_id, entry.position.entry_id, meta, len(payload))
    return web.Response(body=payload, headers=headers, content_type="application/octet-stream")


def message_headers(ledger_id: int, entry_id: int, meta: pb.MessageMetadata, size: int) -> dict[str, str]:
    """Pulsar's headers for a peeked entry. Property values that HTTP cannot
    carry as they are (non-ASCII, control characters) are percent-encoded."""
    headers = {
        "X-Pulsar-Message-ID": f"{ledger_id}:{entry_id}",
        "X-Pulsar-publish-time": _iso(meta.publish_time),
        "X-Pulsar-producer-name": meta.producer_name,
        "X-Pulsar-sequence-id": str(meta.sequence_id),
        "X-Pulsar-uncompressed-size": str(size),
    }
    if meta.HasField("num_messages_in_batch"):
        headers["X-Pulsar-num-batch-message"] = str(meta.num_messages_in_batch)
        headers["X-Pulsar-batch-size"] = str(size)
    if meta.HasField("partition_key"):
        headers["X-Pulsar-partition-key"] = _header_value(meta.partition_key)
    if meta.HasField("event_time") and meta.event_time:
        headers["X-Pulsar-event-time"] = _iso(meta.event_time)
    if meta.HasField("deliver_at_time"):
        headers["X-Pulsar-deliver-at-time"] = _iso(meta.deliver_at_time)
    if meta.HasField("replicated_from"):
        headers["X-Pulsar-replicated-from"] = meta.replicated_from
    if meta.HasField("null_value") and meta.null_value:
        headers["X-Pulsar-null-value"] = "true"
    for kv in meta.properties:
        headers[f"X-Pulsar-PROPERTY-{_header_value(kv.key)}"] = _header_value(kv.value)
    return headers


def _iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")


def _header_value(text: str) -> str:
    if text.isascii() and text.isprintable():
        return text
    return quote(text, safe=" !#$&'()*+,/:;=?@[]~")
