"""Publishing one Spark write task's rows, exactly once per producer name.

:class:`TaskSink` owns one producer per destination topic (per partition
of a partitioned one, rows routed by :mod:`.partition_rows`), all named by
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

Rows go out as batch entries built straight from the Arrow columns
(:mod:`.row_batches`; each row's ``sequence_id`` is its position, each
entry's ``highest_sequence_id`` its last row's), not one message object per
row. Sends are pipelined: up to ``max_pending_messages // 2`` rows are in
flight. A failed send fails the task
(SinkError) and Spark retries it, which is safe for the reason above.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

import pyarrow.compute as pc

from magnetar.client import AsyncClient, AsyncProducer
from magnetar.client.errors import ProducerBusy, PulsarError
from magnetar.client.topic import full_topic_name

from .errors import SinkError
from .options import WriteOptions
from .partition_rows import route, start_of
from .row_batches import RowColumns, encode_batches, entry_metadata
from .topic_schemas import to_proto

log = logging.getLogger(__name__)

#: Producer metadata asking a Magnetar broker to deduplicate by name and sequence id.
DEDUPLICATE = {"magnetar.deduplicate": "true"}
#: A batch entry closes once it holds this many bytes (or batchingMaxMessages rows).
BATCH_MAX_BYTES = 256 * 1024
#: How long a producer may be busy (a previous attempt still attached) before giving up.
BUSY_RETRY_S = 0.5


class TaskSink:
    def __init__(self, client: AsyncClient, producer_name: str, opts: WriteOptions) -> None:
        self._client = client
        self.name = producer_name
        self._opts = opts
        self._producers: dict[str, AsyncProducer] = {}
        self._stored: dict[str, int] = {}    # topic -> highest sequence id already stored
        self._partitions: dict[str, list[str]] = {}  # destination -> its partitions ([]: not partitioned)
        self.written: dict[str, int] = {}
        self.skipped: dict[str, int] = {}
        self._inflight: deque[tuple[str, int, int, asyncio.Future]] = deque()
        self._inflight_rows = 0
        self._window = max(1, opts.max_pending_messages // 2)
        # A struct value is written with the topic's schema: the producers announce it.
        self._schema = to_proto(opts.value.kind, opts.value.data) if opts.value is not None else None

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
                    max_pending_messages=self._opts.max_pending_messages, properties=DEDUPLICATE,
                    schema=self._schema)
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

    async def send(self, by_topic: dict[str, RowColumns]) -> None:
        """Queue the rows of one record batch (see :func:`.row_batches.prepare`).
        A partitioned destination's rows are split by partition first
        (:mod:`.partition_rows`); each partition then has its own producer."""
        for topic, cols in by_topic.items():
            partitions = self._partitions.get(topic)
            if partitions is None:
                partitions = self._partitions[topic] = await self._partitions_of(topic)
            if not partitions:
                await self._send_to(topic, cols)
                continue
            start = start_of(self.name, len(partitions))
            for index, part in route(cols, len(partitions), self._opts.hashing_scheme, start,
                                     self._opts.batching_max_messages):
                await self._send_to(partitions[index], part)

    async def _partitions_of(self, topic: str) -> list[str]:
        """The partitions' names; empty for a non-partitioned topic (or one partition, named)."""
        try:
            names = await self._client.get_topic_partitions(topic)
        except PulsarError as exc:
            raise SinkError(f"cannot look up the partitions of {topic}: {exc}") from exc
        return [] if names == [full_topic_name(topic)] else names

    async def _send_to(self, topic: str, cols: RowColumns) -> None:
        """Rows at or below what the broker already stored under this name on
        ``topic`` are skipped, the rest go out as batch entries built from
        the columns."""
        producer = self._producers.get(topic) or await self._producer(topic)
        stored = self._stored[topic]
        if stored >= 0:
            keep = pc.greater(cols.positions, stored)
            kept = pc.sum(keep).as_py() or 0
            self.skipped[topic] += len(cols) - kept
            if kept == 0:
                return
            if kept < len(cols):
                cols = cols.take(pc.indices_nonzero(keep))
        now = int(time.time() * 1000)
        for payload, count, first, highest in encode_batches(cols, self._opts.batching_max_messages,
                                                              BATCH_MAX_BYTES):
            while self._inflight_rows + count > self._window and self._inflight:
                await self._settle_oldest()
            meta = entry_metadata(self.name, now, count, first, highest, producer.schema_version)
            try:
                fut = producer.send_entry_nowait(meta, payload, count, first, highest)
            except PulsarError as exc:
                raise SinkError(f"rows {first}..{highest} to {topic}: {exc}") from exc
            self._inflight.append((topic, first, count, fut))
            self._inflight_rows += count
            self.written[topic] += count

    async def _settle_oldest(self) -> None:
        topic, position, count, fut = self._inflight.popleft()
        self._inflight_rows -= count
        try:
            await fut
        except PulsarError as exc:
            raise SinkError(f"publishing rows from {position} to {topic} failed: {exc}") from exc

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
