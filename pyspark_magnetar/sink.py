"""Publishing one Spark write task's rows, exactly once per producer name.

:class:`TaskSink` owns one producer per destination topic, all named by
the task's deterministic identity (:mod:`.identity`). When a producer is
created the broker reports the highest sequence id it has stored under that
name (``last_sequence_id``); rows at or below it
were published by an earlier attempt and are skipped, the rest are sent
with ``sequence_id`` = row position. Skipping first (rather than resending
and letting the broker drop duplicates) keeps a retried batch entry from
straddling the stored high-water mark and makes retries cheap.

The producers ask the broker to deduplicate them (producer metadata
``magnetar.deduplicate=true``), whatever the destination namespace's
deduplication policy. A broker that ignores that (Apache Pulsar without
the policy on) reports -1: nothing is skipped and a retried task publishes
its rows again, at-least-once.

Sends are pipelined: up to ``max_pending_messages // 2`` are in flight, so
the producer's own queue never refuses one. A failed send fails the task
(SinkError) and Spark retries it, which is safe for the reason above.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque

from magnetar.client import AsyncClient, AsyncProducer
from magnetar.client.errors import ProducerBusy, PulsarError

from .errors import SinkError
from .options import WriteOptions
from .records import Columns

log = logging.getLogger(__name__)

#: Producer metadata asking a Magnetar broker to deduplicate by name and sequence id.
DEDUPLICATE = {"magnetar.deduplicate": "true"}
#: How long a producer may be busy (a previous attempt still attached) before giving up.
BUSY_RETRY_S = 0.5


class TaskSink:
    def __init__(self, client: AsyncClient, producer_name: str, opts: WriteOptions) -> None:
        self._client = client
        self.name = producer_name
        self._opts = opts
        self._producers: dict[str, AsyncProducer] = {}
        self._stored: dict[str, int] = {}    # topic -> highest sequence id already stored
        self.written: dict[str, int] = {}
        self.skipped: dict[str, int] = {}
        self._inflight: deque[tuple[str, int, asyncio.Future]] = deque()
        self._window = max(1, opts.max_pending_messages // 2)

    async def _producer(self, topic: str) -> AsyncProducer:
        producer = self._producers.get(topic)
        if producer is not None:
            return producer
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._opts.operation_timeout_s
        while True:
            try:
                producer = await self._client.create_producer(
                    topic, producer_name=self.name, batching_enabled=True,
                    batching_max_messages=self._opts.batching_max_messages,
                    batching_max_allowed_size_in_bytes=256 * 1024, batching_max_publish_delay_ms=5,
                    max_pending_messages=self._opts.max_pending_messages, properties=DEDUPLICATE)
                break
            except ProducerBusy as exc:
                # A previous attempt of this task still holds the name (its
                # connection not yet dropped): wait for it to go.
                if loop.time() + BUSY_RETRY_S > deadline:
                    raise SinkError(f"producer {self.name} on {topic} stayed busy: {exc}") from exc
                await asyncio.sleep(BUSY_RETRY_S)
            except PulsarError as exc:
                raise SinkError(f"cannot create producer {self.name} on {topic}: {exc}") from exc
        self._producers[topic] = producer
        self._stored[topic] = producer.last_sequence_id()
        self.written[topic] = self.skipped[topic] = 0
        if self._stored[topic] >= 0:
            log.info("producer %s on %s: rows up to %d already stored, resuming after them",
                     self.name, topic, self._stored[topic])
        return producer

    async def send(self, cols: Columns, first_position: int) -> None:
        """Queue the rows of ``cols``; row ``i`` has position ``first_position + i``."""
        for i in range(len(cols)):
            topic = cols.topics[i]
            producer = self._producers.get(topic) or await self._producer(topic)
            position = first_position + i
            if position <= self._stored[topic]:
                self.skipped[topic] += 1
                continue
            while len(self._inflight) >= self._window:
                await self._settle_oldest()
            try:
                fut = producer.send_nowait(cols.values[i], properties=cols.properties[i],
                                           partition_key=cols.keys[i], event_timestamp=cols.event_times_ms[i],
                                           sequence_id=position)
            except PulsarError as exc:
                raise SinkError(f"row {position} to {topic}: {exc}") from exc
            self._inflight.append((topic, position, fut))
            self.written[topic] += 1

    async def _settle_oldest(self) -> None:
        topic, position, fut = self._inflight.popleft()
        try:
            await fut
        except PulsarError as exc:
            raise SinkError(f"publishing row {position} to {topic} failed: {exc}") from exc

    async def finish(self) -> None:
        """Wait until every queued row is stored; raise SinkError for the first failure."""
        for producer in self._producers.values():
            await producer.flush()
        while self._inflight:
            await self._settle_oldest()

    async def close(self) -> None:
        """Release the producers (after a failure too). Rows still queued may
        or may not be stored; a retry sorts that out."""
        for topic, producer in self._producers.items():
            try:
                await asyncio.wait_for(producer.close(), self._opts.operation_timeout_s)
            except Exception as exc:
                log.debug("closing producer %s on %s: %s", self.name, topic, exc)
        self._producers.clear()
