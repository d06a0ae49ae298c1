"""The shard server's front end: JSON lines over TCP.

One request per line, answered by one line carrying the same ``id``
(answers may come out of order: a write waits for the log, a read does not)::

    {"id": 1, "op": "incr", "key": "k"}         -> {"id": 1, "ok": true, "value": 3, "offset": 17}
    {"id": 2, "op": "put", "key": "k", "value": "v"}
    {"id": 3, "op": "get", "key": "k"}          -> {"id": 3, "ok": true, "value": "v", "offset": 18}
    {"id": 4, "op": "incr", "key": "k"}         -> {"id": 4, "ok": false, "error": "refused"}

``offset`` of a write is where its record is in the log; of a read, the
state's ``next_offset`` (how much of the log the answer reflects). Errors:
``refused`` (the write is not in the log; retry), ``unavailable`` (unknown
outcome), ``not leader`` (a follower takes reads only), ``bad request``.
A write's ``request`` field, when given, names its record in the log
(default: ``<server id>-<id>``), so a load driver can check the log later.
"""
from __future__ import annotations

import asyncio
import json
import logging

from leader import Leader, Outcome
from records import Operation
from shard import ShardState

log = logging.getLogger(__name__)


class ShardServer:
    def __init__(self, server_id: str, state: ShardState, leader: Leader | None) -> None:
        self.server_id = server_id
        self.state = state
        self.leader = leader
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()  # requests being answered
        self._clients: dict[asyncio.Task, asyncio.StreamWriter] = {}

    async def start(self, host: str, port: int) -> int:
        """Listen; return the port (``port=0`` picks a free one)."""
        self._server = await asyncio.start_server(self._serve, host, port)
        return self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening, answer the requests under way, hang up on clients."""
        if self._server is not None:
            self._server.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=30)
        for writer in self._clients.values():
            writer.close()  # their readline() ends: the handlers return
        if self._clients:
            await asyncio.wait(list(self._clients), timeout=5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        me = asyncio.current_task()
        self._clients[me] = writer
        try:
            while line := await reader.readline():
                task = asyncio.get_running_loop().create_task(self._answer(line, writer))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except ConnectionError:
            pass
        finally:
            del self._clients[me]
            writer.close()

    async def _answer(self, line: bytes, writer: asyncio.StreamWriter) -> None:
        rid = None
        try:
            request = json.loads(line)
            rid = request.get("id")
            reply = await self._handle(request)
        except (ValueError, AttributeError, KeyError) as exc:
            reply = {"ok": False, "error": "bad request", "detail": str(exc)}
        reply["id"] = rid
        if not writer.is_closing():
            writer.write(json.dumps(reply).encode() + b"\n")

    async def _handle(self, request: dict) -> dict:
        op = request["op"]
        if op == "get":
            return {"ok": True, "value": self.state.values.get(request["key"]), "offset": self.state.next_offset}
        if op not in ("put", "incr"):
            raise ValueError(f"unknown op {op!r}")
        if self.leader is None:
            return {"ok": False, "error": "not leader"}
        name = str(request.get("request") or f"{self.server_id}-{request.get('id')}")
        outcome: Outcome = await self.leader.submit(Operation(name, op, str(request["key"]), request.get("value")))
        if outcome.ok:
            return {"ok": True, "value": outcome.value, "offset": outcome.offset}
        return {"ok": False, "error": outcome.error}
