"""A load driver for the kvstore: random increments against the shard servers.

Each operation is an ``incr`` of a random key, sent to a server of the key's
shard (round robin when a shard has several, e.g. two leaders during a leader
change). Every attempt carries its own request name ``<driver>-<op>.<attempt>``,
which the record in the log carries too, so the outcome of each attempt can
be checked against the log afterwards: ``acked`` attempts must be in the log
exactly once, ``refused`` ones must not be there at all.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
import zlib
from dataclasses import dataclass, field


def shard_of(key: str, shards: int) -> int:
    """The shard that owns ``key`` (stable across processes and runs)."""
    return zlib.crc32(key.encode()) % shards


class ServerConnection:
    """One TCP connection to a shard server; requests are matched to answers by id."""

    def __init__(self, host: str, port: int) -> None:
        self.address = f"{host}:{port}"
        self._host, self._port = host, port
        self._ids = itertools.count()
        self._waiting: dict[int, asyncio.Future] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task | None = None

    async def open(self) -> None:
        reader, self._writer = await asyncio.open_connection(self._host, self._port)
        self._reading = asyncio.get_running_loop().create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                reply = json.loads(line)
                fut = self._waiting.pop(reply.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(reply)
        finally:
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"{self.address} closed the connection"))

    async def request(self, body: dict, timeout: float = 60) -> dict:
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        self._writer.write(json.dumps({**body, "id": rid}).encode() + b"\n")
        return await asyncio.wait_for(fut, timeout)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)


@dataclass
class Results:
    acked: dict[str, dict] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        rate = len(self.acked) / self.seconds if self.seconds else 0.0
        return (f"DONE acked={len(self.acked)} refused={len(self.refused)} unavailable={len(self.unavailable)} "
                f"seconds={self.seconds:.2f} acked_per_s={rate:.0f}")

    def to_json(self) -> str:
        return json.dumps({"acked": self.acked, "refused": self.refused, "unavailable": self.unavailable,
                           "seconds": self.seconds})


async def run_load(servers: dict[int, list[tuple[str, int]]], *, shards: int, ops: int, keys: int,
                   concurrency: int, retries: int = 0, seed: int | None = None, name: str = "driver") -> Results:
    """Run ``ops`` increments with ``concurrency`` in flight; a refused or
    unavailable attempt is retried (as a new attempt) up to ``retries`` times."""
    missing = set(range(shards)) - set(servers)
    if missing:
        raise ValueError(f"no server given for shard(s) {sorted(missing)}")
    conns = {shard: [ServerConnection(h, p) for h, p in addrs] for shard, addrs in servers.items()}
    for group in conns.values():
        for conn in group:
            await conn.open()
    turns = {shard: itertools.cycle(group) for shard, group in conns.items()}
    rng = random.Random(seed)
    numbers = iter(range(ops))
    results = Results()

    async def worker() -> None:
        for n in numbers:
            key = f"key-{rng.randrange(keys)}"
            for attempt in range(retries + 1):
                name_ = f"{name}-{n}.{attempt}"
                conn = next(turns[shard_of(key, shards)])
                try:
                    reply = await conn.request({"op": "incr", "key": key, "request": name_})
                except (ConnectionError, asyncio.TimeoutError):
                    reply = {"ok": False, "error": "unavailable"}
                if reply.get("ok"):
                    results.acked[name_] = {"key": key, "value": reply["value"], "offset": reply["offset"],
                                            "server": conn.address}
                    break
                (results.refused if reply.get("error") == "refused" else results.unavailable).append(name_)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    results.seconds = time.perf_counter() - start
    for group in conns.values():
        for conn in group:
            await conn.close()
    return results
