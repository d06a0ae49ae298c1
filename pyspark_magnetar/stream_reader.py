"""Streaming reads: ``spark.readStream.format("magnetar")``.

Offsets are the JSON shape of :mod:`.offsets` (topic -> partition -> next
offset to read), checkpointed by Spark. Every micro-batch reads
``[start, end)`` per partition, so a query restarted from its checkpoint
replays a planned-but-uncommitted batch with exactly the same ranges and
then continues: every message is read once per committed batch, with no
gap and no repeat.

- ``initialOffset``: ``startingOffsets`` resolved now (default latest).
- ``latestOffset(start, limit)``: the partitions' next offsets, capped by
  the read limit (``maxRecordsPerTrigger`` -> ReadMaxRows; Spark passes
  ReadAllAvailable when the trigger wants everything). With
  Trigger.AvailableNow the next offsets are frozen at
  ``prepareForTriggerAvailableNow`` so the query ends.
- A partition that appears later (a topic matching ``topicsPattern``, new
  partitions) enters the offsets at its earliest retained offset in one
  batch and is read from the next one, so its start is checkpointed before
  any of its rows are read. Spark asks for the latest offsets every few
  milliseconds while a stream is idle, so the partition list is looked up
  again at most every PARTITION_REFRESH_S; next offsets at every call.
- A partition whose next offset went below the checkpointed one (topic
  deleted and recreated) is data loss: DataLossError, or with
  ``failOnDataLoss=false`` it restarts at 0.

``commit`` has nothing to do: the source keeps no state on the broker.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from magnetar.client import AsyncClient

from .admission import next_end
from .errors import DataLossError, OptionError
from .offsets import EARLIEST, LATEST, TopicPartition, offsets_from_json, offsets_to_json
from .options import ReadOptions
from .ranges import OffsetRange, read_range, split_ranges
from .session import BrokerSession
from .timestamps import offset_at_time
from .topics import earliest_offset, next_offset, resolve_partitions

log = logging.getLogger(__name__)

#: Seconds between two lookups of the partitions a stream reads.
PARTITION_REFRESH_S = 5.0


class MagnetarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver methods share one lazily opened session; ``read`` (on
    executors) opens its own. Picklable at any time (the session is dropped)."""

    def __init__(self, opts: ReadOptions) -> None:
        self._opts = opts
        self._session: BrokerSession | None = None
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow's frozen end
        self._latest: dict[TopicPartition, int] | None = None
        self._parts: list[TopicPartition] | None = None
        self._parts_at = 0.0

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_session"] = None
        return state

    def _call(self, fn, *args):
        """Run coroutine function ``fn(client, *args)`` on the driver's session."""
        if self._session is None:
            self._session = BrokerSession(self._opts.service_url, self._opts.operation_timeout_s)
        return self._session.run(fn(self._session.client, *args))

    # -- offsets (driver) --------------------------------------------------------------------
    def initialOffset(self) -> dict:
        return offsets_to_json(self._call(self._initial))

    async def _initial(self, client: AsyncClient) -> dict[TopicPartition, int]:
        opts = self._opts
        parts = await resolve_partitions(client, opts.selection)
        opts.starting.check_covered_by("startingOffsets", parts)
        opts.starting_time.check_covered_by("startingOffsetsByTimestamp", parts)
        out = {}
        for tp in parts:
            nxt = await next_offset(client, tp)
            spec = opts.starting.for_partition(tp)
            start_time = opts.starting_time.for_partition(tp)
            if start_time is not None:
                out[tp] = await offset_at_time(client, tp, start_time, nxt)
            elif spec == EARLIEST:
                out[tp] = await earliest_offset(client, tp, nxt, opts.poll_timeout_ms)
            elif spec == LATEST:
                out[tp] = nxt
            elif spec > nxt:
                raise OptionError(f"startingOffsets {spec} of {tp} is beyond its next offset {nxt}")
            else:
                out[tp] = spec
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self._opts.max_records_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._call(self._available)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json("checkpointed offsets", start, concrete=True)
        latest = self._target if self._target is not None else self._call(self._available)
        self._latest = latest
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = next_end(begin, latest, max_rows)
        for tp, off in begin.items():
            if tp in latest and latest[tp] < off:
                end[tp] = self._went_backwards(tp, off, latest[tp])
        new = [tp for tp in latest if tp not in begin]
        if new:
            end.update(self._call(self._register, new))
        return offsets_to_json(end)

    async def _available(self, client: AsyncClient) -> dict[TopicPartition, int]:
        """Next offset of every partition the query reads now."""
        now = time.monotonic()
        if self._parts is None or now - self._parts_at >= PARTITION_REFRESH_S:
            # Explicit topics must exist when the query (re)starts; later a deleted
            # topic shows up as its offsets going backwards. (Spark may call this
            # before initialOffset, and asking for a next offset creates the topic.)
            self._parts = await resolve_partitions(client, self._opts.selection,
                                                   check_exists=self._parts is None)
            self._parts_at = now
        return {tp: await next_offset(client, tp) for tp in self._parts}

    async def _register(self, client: AsyncClient, new: list[TopicPartition]) -> dict[TopicPartition, int]:
        out = {}
        for tp in new:
            nxt = self._latest[tp] if self._latest and tp in self._latest else await next_offset(client, tp)
            out[tp] = await earliest_offset(client, tp, nxt, self._opts.poll_timeout_ms)
            log.info("magnetar stream: new partition %s enters at offset %d", tp, out[tp])
        return out

    def _went_backwards(self, tp: TopicPartition, checkpointed: int, latest: int) -> int:
        text = (f"{tp}: next offset {latest} is below the checkpointed offset {checkpointed} "
                "(topic deleted and recreated?)")
        if self._opts.fail_on_data_loss:
            raise DataLossError(text + ". Set failOnDataLoss=false to restart the partition at offset 0.")
        log.warning("%s; restarting it at offset 0 (failOnDataLoss=false)", text)
        return 0

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin = offsets_from_json("checkpointed offsets", start, concrete=True)
        stop = offsets_from_json("checkpointed offsets", end, concrete=True)
        return list(split_ranges(begin, stop, self._opts.max_records_per_partition, self._opts.min_partitions))

    # -- data (executors) ----------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            # Spark replaces an empty partition list by one InputPartition(None).
            return iter(())
        return read_range(partition, self._opts)

    def commit(self, end: dict) -> None:
        pass  # nothing is kept on the broker: the checkpoint is the only position

    def stop(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()
