"""Batch reads: ``spark.read.format("magnetar")``.

Planning (driver, :meth:`MagnetarBatchReader.partitions`) resolves the
topics, then each partition's start and end: ``earliest`` is the first
retained offset, ``latest`` the next offset at planning time, explicit
offsets are taken as given. The read is the snapshot ``[start, end)``
fixed at planning; messages published later are not included.

Planning errors (all OptionError): unknown topic, offsets JSON naming a
partition the query does not read, start after end, an end beyond the
partition's next offset (those messages do not exist yet).
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from magnetar.client import AsyncClient

from .errors import OptionError
from .offsets import EARLIEST, LATEST, TopicPartition
from .options import ReadOptions
from .ranges import OffsetRange, read_range, split_ranges
from .session import BrokerSession
from .timestamps import offset_at_time
from .topics import earliest_offset, next_offset, resolve_partitions


class MagnetarBatchReader(DataSourceReader):
    """Picklable: holds only options until ``partitions()``/``read()`` run."""

    def __init__(self, opts: ReadOptions) -> None:
        self._opts = opts

    def partitions(self) -> list[InputPartition]:
        with BrokerSession(self._opts.service_url, self._opts.operation_timeout_s) as session:
            starts, ends = session.run(self._bounds(session.client))
        return list(split_ranges(starts, ends, self._opts.max_records_per_partition, self._opts.min_partitions))

    async def _bounds(self, client: AsyncClient) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        opts = self._opts
        parts = await resolve_partitions(client, opts.selection)
        opts.starting.check_covered_by("startingOffsets", parts)
        opts.ending.check_covered_by("endingOffsets", parts)
        opts.starting_time.check_covered_by("startingOffsetsByTimestamp", parts)
        opts.ending_time.check_covered_by("endingOffsetsByTimestamp", parts)
        starts: dict[TopicPartition, int] = {}
        ends: dict[TopicPartition, int] = {}
        for tp in parts:
            nxt = await next_offset(client, tp)
            start = opts.starting.for_partition(tp)
            start_time = opts.starting_time.for_partition(tp)
            if start_time is not None:
                start = await offset_at_time(client, tp, start_time, nxt)
            elif start == EARLIEST:
                start = await earliest_offset(client, tp, nxt, opts.poll_timeout_ms)
            elif start == LATEST:
                start = nxt
            end = opts.ending.for_partition(tp)
            end_time = opts.ending_time.for_partition(tp)
            if end_time is not None:
                end = await offset_at_time(client, tp, end_time, nxt)
            end = nxt if end == LATEST else end
            if end > nxt:
                raise OptionError(f"endingOffsets {end} of {tp} is beyond its next offset {nxt}: "
                                  "those messages do not exist yet")
            if start > end:
                raise OptionError(f"startingOffsets {start} of {tp} is after its end offset {end}")
            starts[tp], ends[tp] = start, end
        return starts, ends

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            # Spark replaces an empty partition list by one InputPartition(None).
            return iter(())
        return read_range(partition, self._opts)
