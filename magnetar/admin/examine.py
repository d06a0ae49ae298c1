"""Reading one stored message by where it is, without a subscription:
``GET {topic}/ledger/{ledgerId}/entry/{entryId}`` (pulsar-admin's
``get-message-by-id``) and ``GET {topic}/examinemessage?initialPosition=
earliest|latest&messagePosition=n`` (``examine-message``: the n-th entry from
the start or from the end, n from 1).

Answered as a peek is (:mod:`.peek`): the payload, decompressed (a batch's
whole payload, which the CLI splits), with the metadata as ``X-Pulsar-*``
headers. Failure modes: 404 when no such entry is stored (trimmed, never
written), 400 for a bad position, 412 for an entry that cannot be read.
"""
from __future__ import annotations

from aiohttp import web

from magnetar.protocol import ProtocolError
from magnetar.protocol.compression import decompress
from magnetar.protocol.frames import PayloadBlock
from magnetar.storage import Position

from .errors import bad_request, not_found, precondition_failed
from .params import int_in_path
from .peek import message_headers
from .routes import BYTES, INTEGER, STRING, QueryParam, RouteTable
from .topics import TOPIC, loaded_topic

table = RouteTable("topics")


def _answer(entry) -> web.Response:
    block = PayloadBlock(memoryview(entry.data))
    try:
        meta = block.metadata
        payload = decompress(meta.compression, bytes(block.payload), meta.uncompressed_size)
    except ProtocolError as exc:
        raise precondition_failed(f"entry {entry.position} cannot be read: {exc}") from None
    headers = message_headers(entry.position.ledger_id, entry.position.entry_id, meta, len(payload))
    return web.Response(body=payload, headers=headers, content_type="application/octet-stream")


async def _entry_at(ledger, position: Position):
    entries = await ledger.read_entries(position, 1)
    if not entries or entries[0].position != position:
        return None
    return entries[0]


@table.route("GET", TOPIC + "/ledger/{ledgerId}/entry/{entryId}", "Get a message by its id (ledger:entry)",
             answer=BYTES, errors=(400, 404, 412))
async def get_message_by_id(request: web.Request) -> web.Response:
    position = Position(int_in_path(request, "ledgerId"), int_in_path(request, "entryId"))
    topic = await loaded_topic(request)
    entry = await _entry_at(topic.ledger, position)
    if entry is None:
        raise not_found(f"Message {position} not found in {topic.name} (never written, or trimmed)")
    return _answer(entry)


def nth_position(ledgers, n: int, from_latest: bool) -> Position | None:
    """The n-th (from 1) stored entry counted from the first or from the last
    one, from the ledgers' entry counts (no read); None if there are fewer."""
    remaining = n
    for info in (reversed(ledgers) if from_latest else ledgers):
        if info.entries >= remaining:
            return Position(info.ledger_id, info.entries - remaining if from_latest else remaining - 1)
        remaining -= info.entries
    return None


@table.route("GET", TOPIC + "/examinemessage", "Examine the n-th message from the start or the end",
             query=(QueryParam("initialPosition", STRING, "earliest or latest (default)"),
                    QueryParam("messagePosition", INTEGER, "n, from 1 (default 1)")),
             answer=BYTES, errors=(400, 404, 412))
async def examine_message(request: web.Request) -> web.Response:
    initial = request.query.get("initialPosition", "latest").lower()
    if initial not in ("earliest", "latest"):
        raise bad_request(f"initialPosition must be earliest or latest, got {initial!r}")
    try:
        n = int(request.query.get("messagePosition", "1"))
    except ValueError:
        raise bad_request("messagePosition must be an integer >= 1") from None
    if n < 1:
        raise bad_request(f"messagePosition must be >= 1, got {n}")
    topic = await loaded_topic(request)
    position = nth_position(topic.ledger.ledgers, n, initial == "latest")
    entry = await _entry_at(topic.ledger, position) if position is not None else None
    if entry is None:
        raise not_found(f"{topic.name} has fewer than {n} stored entries")
    return _answer(entry)
