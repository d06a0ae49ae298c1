"""FETCH_ENTRIES: a bulk read of a topic's stored entries (Magnetar-only).

The Spark connector scans offset ranges; a subscription would dispatch its
entries one MESSAGE frame each (a command built, a Python call on both
sides per entry). A fetch answers with many entries in one frame: the
command, then ``[u32 count][u32 size]...`` and the stored entries back to
back, their bytes as the managed ledger's read API hands them out (tail
cache, else the backend: file segments or the object store; read as runs,
``ManagedLedger.read_runs``, no object per entry). Nothing is
kept on the broker between fetches: the response says where the next one
starts, so a client that reconnects or moves to a new owner asks again from
there. Flow control is the client's: one response per request, each within
the request's budget (capped here at MAX_ENTRIES and MAX_BYTES; at least
one entry, so an entry larger than the budget still goes through).

Failure modes (answered with the response's error, never a dropped
request): AuthorizationError (the role may not consume the topic),
TopicNotFound, ServiceNotReady (not served here, storage or metadata
failure: the client retries, after a lookup).
"""
from __future__ import annotations

import asyncio
import logging
import struct

from magnetar.broker.errors import BrokerError
from magnetar.metadata import MetadataError
from magnetar.protocol import ServerError, pb
from magnetar.protocol.commands import Type, command
from magnetar.protocol.fetch_payload import fetch_payload
from magnetar.storage import StorageError
from magnetar.storage.position import Position

from .. import permissions
from .session import ClientSession, topic_name

log = logging.getLogger(__name__)

#: The most a response carries: below the 5 MiB frame limit clients accept
#: (one entry larger than that still goes, alone, as it would in a MESSAGE).
MAX_BYTES = 4 * 1024 * 1024
MAX_ENTRIES = 100_000
#: The longest a fetch waits for an entry that is not there yet.
MAX_WAIT_MS = 30_000

#: A response of at most this many entries goes to the socket as its
#: entries' own buffers (a writev of a few dozen pieces); more are joined.
WRITE_AS_PIECES = 64

_U32U32 = struct.Struct(">II")


async def on_fetch_entries(session: ClientSession, req: pb.CommandFetchEntries) -> None:
    """Answer one FETCH_ENTRIES (always: an error is a response too)."""
    try:
        name = topic_name(req.topic)
        await permissions.check(session.service.authorizer, session.service.store, session.role, "consume", name)
        await session.service.check_served_here(name)
        topic = await session.service.get_topic(name, create=False)
        if req.HasField("start_offset"):
            start = await topic.position_of_offset(req.start_offset)
        else:
            start = Position(req.start_ledger_id, req.start_entry_id)
        max_entries = min(req.max_entries or MAX_ENTRIES, MAX_ENTRIES)
        max_bytes = min(req.max_bytes or MAX_BYTES, MAX_BYTES)
        runs = await topic.ledger.read_runs(start, max_entries, max_bytes)
        if not runs and req.max_wait_ms:
            await _wait_for_entries(topic.ledger, min(req.max_wait_ms, MAX_WAIT_MS) / 1000)
            runs = await topic.ledger.read_runs(start, max_entries, max_bytes)
    except BrokerError as exc:
        session.write(_failed(req, exc.code, str(exc)))
        return
    except (StorageError, MetadataError, OSError) as exc:
        log.warning("fetch from %s: storage: %s", req.topic, exc)
        session.write(_failed(req, ServerError.ServiceNotReady, f"cannot read the topic: {exc}"))
        return
    except Exception as exc:  # a bug here must still answer, or the client waits out its timeout
        log.exception("fetch from %s failed", req.topic)
        session.write(_failed(req, ServerError.UnknownError, f"fetch failed: {exc}"))
        return
    session.queue(*response(req.request_id, runs, start))


def response(request_id: int, runs: list[tuple[int, int, list[bytes]]], start: Position) -> list[bytes]:
    """The FETCH_ENTRIES_RESPONSE frame of ``runs`` (from
    ``ManagedLedger.read_runs``), as pieces for the socket: the command,
    then ``[u32 count][u32 size]...`` and the entries' bytes back to back."""
    count = sum(len(run) for _, _, run in runs)
    if runs:
        lid, first, run = runs[-1]
        nxt = Position(lid, first + len(run))
    else:
        nxt = start
    reply = command(Type.FETCH_ENTRIES_RESPONSE, request_id=request_id, num_entries=count,
                    next_ledger_id=nxt.ledger_id, next_entry_id=max(nxt.entry_id, 0)).SerializeToString()
    if count <= WRITE_AS_PIECES:
        # Few entries (batches): the socket's writev takes them as they are, no copy into one buffer.
        datas = [data for _, _, run in runs for data in run]
        sizes = struct.pack(f">I{count}I", count, *map(len, datas))
        head = _U32U32.pack(4 + len(reply) + len(sizes) + sum(map(len, datas)), len(reply)) + reply
        return [head, sizes, *datas]
    # Many (one message per entry: ~25,000): sizes and entries in one buffer, one compiled call.
    body = fetch_payload(runs)
    return [_U32U32.pack(4 + len(reply) + len(body), len(reply)) + reply, body]


async def _wait_for_entries(ledger, timeout: float) -> None:
    """Return when the ledger confirms new entries or ``timeout`` passes."""
    arrived = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not arrived.done():
            arrived.set_result(None)

    unlisten = ledger.add_listener(wake)
    try:
        await asyncio.wait_for(arrived, timeout)
    except asyncio.TimeoutError:
        pass
    finally:
        unlisten()


def _failed(req: pb.CommandFetchEntries, code: int, message: str) -> pb.BaseCommand:
    return command(Type.FETCH_ENTRIES_RESPONSE, request_id=req.request_id, error=code, message=message)
