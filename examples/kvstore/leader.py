"""A shard leader: client writes become conditional sends to the shard's log.

The leader holds the shard's state and the offset its log will give the next
record (``state.next_offset``). It takes the client requests waiting, up to
``max_batch``, turns each into a record from the state it holds (later
requests of the batch read what earlier ones wrote) and sends them as
conditional messages: record i expects offset ``next_offset + i``. The
producer packs them into one batch entry, which the broker appends whole or
refuses whole. Only one batch is in flight at a time, so every batch is
planned from a state that includes everything the leader wrote.

- Stored: the records are applied to the state and the requests succeed.
- Refused (ExpectedOffsetMismatch): someone else wrote to the log (another
  leader: during a leader change two can be active). The requests fail with
  ``refused`` (nothing of them is in the log; clients may retry) and the
  leader catches up with the log before planning anything else.
- Any other failure: the requests fail with ``unavailable``; their outcome
  is unknown (a timed-out send may still land, once: the producer is
  idempotent, so a retry of a stored batch is answered with its original
  result, never with a mismatch). The leader catches up too.

Two leaders at once therefore never interleave: a record lands only if its
writer's view held every record before it.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from magnetar.client import AsyncClient
from magnetar.client.errors import ExpectedOffsetMismatch, PulsarError

from records import Operation
from shard import LogTail, ShardState

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    value: Any = None
    offset: int | None = None
    error: str | None = None  # "refused" (not in the log) or "unavailable" (unknown)


class Leader:
    def __init__(self, client: AsyncClient, topic: str, state: ShardState, tail: LogTail,
                 max_batch: int = 100) -> None:
        self.client = client
        self.topic = topic
        self.state = state
        self.tail = tail
        self.max_batch = max_batch
        self.producer = None
        self.writes = 0
        self.refusals = 0
        #: Requests waiting for the next batch; None asks the loop to stop.
        self._requests: asyncio.Queue[tuple[Operation, asyncio.Future] | None] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._stopping = False

    async def start(self) -> None:
        self.producer = await self.client.create_producer(
            self.topic, idempotent=True, batching_enabled=True, batching_max_messages=self.max_batch,
            batching_max_publish_delay_ms=1, max_pending_messages=max(1000, self.max_batch),
        )
        await self.tail.catch_up()  # bootstrap
        self._task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, op: Operation) -> asyncio.Future:
        """Queue a write; the future gets its Outcome."""
        fut = asyncio.get_running_loop().create_future()
        if self._stopping:
            fut.set_result(Outcome(False, error="unavailable"))
        else:
            self._requests.put_nowait((op, fut))
        return fut

    async def _run(self) -> None:
        while True:
            first = await self._requests.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self.max_batch and not self._requests.empty():
                request = self._requests.get_nowait()
                if request is None:
                    self._requests.put_nowait(None)  # stop after this batch
                    break
                batch.append(request)
            try:
                await self._write(batch)
            except Exception:
                log.exception("leader of %s: write failed", self.topic)
                for _, fut in batch:
                    if not fut.done():
                        fut.set_result(Outcome(False, error="unavailable"))
                await self._catch_up()

    async def _write(self, batch: list[tuple[Operation, asyncio.Future]]) -> None:
        planned: dict[str, Any] = {}
        records = []
        for op, _ in batch:
            old = planned[op.key] if op.key in planned else self.state.values.get(op.key)
            record = op.record(old)
            planned[op.key] = record.new
            records.append(record)
        first = self.state.next_offset
        sends = [self.producer.send_nowait(r.encode(), expected_offset=first + i) for i, r in enumerate(records)]
        await self.producer.flush()
        refused = failed = False
        for i, ((_, reply), record, sent) in enumerate(zip(batch, records, sends)):
            exc = sent.exception()
            if exc is None:
                offset = first + i  # a conditional send lands exactly where it expected to
                if sent.result().offset not in (None, offset):
                    log.error("record expected at %d was stored at %s", offset, sent.result().offset)
                self.state.apply(record, offset)
                self.writes += 1
                reply.set_result(Outcome(True, record.new, offset))
            elif isinstance(exc, ExpectedOffsetMismatch):
                refused = True
                reply.set_result(Outcome(False, error="refused"))
            else:
                failed = True
                log.warning("leader of %s: send failed: %s", self.topic, exc)
                reply.set_result(Outcome(False, error="unavailable"))
        self.refusals += refused
        if refused or failed:
            await self._catch_up()

    async def _catch_up(self) -> None:
        while True:
            try:
                await self.tail.catch_up()
                return
            except PulsarError as exc:
                log.warning("leader of %s: cannot catch up yet: %s", self.topic, exc)
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        """Finish the batch in flight, fail the queued requests as
        unavailable, then catch up with the log."""
        self._stopping = True
        while not self._requests.empty():
            request = self._requests.get_nowait()
            if request is not None:
                request[1].set_result(Outcome(False, error="unavailable"))
        self._requests.put_nowait(None)
        if self._task is not None:
            await self._task
        if self.producer is not None:
            await self.producer.close()
        await self._catch_up()
