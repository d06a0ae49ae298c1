"""Offset ranges: the unit of work of one Spark read task.

An :class:`OffsetRange` is a picklable InputPartition naming one partition
topic and ``[start, end)``. :func:`split_ranges` turns per-partition start
and end offsets into ranges of at most ``max_records`` messages, so one big
topic can be read by several tasks. Each split positions its own reader
(see :mod:`.scan`); a split whose start lies in an older ledger than the
topic's current one re-reads the prefix before it.

:func:`read_range` is what a task runs: it opens its own broker session
(readers are pickled to executors; nothing is opened before ``read()``),
scans, and yields Arrow record batches.
"""
from __future__ import annotations

import heapq
from typing import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from .offsets import TopicPartition
from .options import ReadOptions
from .fetch_scan import FetchScanner
from .session import BrokerSession
from .topic_schemas import fetch_schema
from .value_columns import ValueReader

#: Rows per Arrow record batch handed to Spark (about, whole entries at a time).
CHUNK_ROWS = 32768


class OffsetRange(InputPartition):
    """Offsets ``[start, end)`` of partition ``tp``."""

    def __init__(self, tp: TopicPartition, start: int, end: int) -> None:
        super().__init__((tp.topic, tp.partition, start, end))
        self.tp = tp
        self.start = start
        self.end = end

    def __len__(self) -> int:
        return max(0, self.end - self.start)

    def __repr__(self) -> str:
        return f"OffsetRange({self.tp}, {self.start}, {self.end})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetRange) and (self.tp, self.start, self.end) == (other.tp, other.start, other.end)

    def __hash__(self) -> int:
        return hash((self.tp, self.start, self.end))


def split_ranges(starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
                 max_records: int, min_partitions: int | None = None) -> list[OffsetRange]:
    """Ranges covering ``[starts[tp], ends[tp])`` for every ``tp`` in both
    maps, each of at most ``max_records`` offsets, in partition then offset
    order; with ``min_partitions``, at least that many ranges when there are
    that many offsets (``minPartitions``). Partitions are split further only
    when they make fewer ranges than that, the longest pieces first, so a
    read of as many partitions as ``min_partitions`` is one task per
    partition (as Kafka's source plans), not a partition cut in two because
    it is a little longer than the others. Empty or inverted ranges produce
    nothing."""
    spans = {tp: (starts[tp], ends[tp]) for tp in sorted(set(starts) & set(ends)) if ends[tp] > starts[tp]}
    pieces = {tp: -(-(end - start) // max_records) for tp, (start, end) in spans.items()}  # ceil
    if min_partitions:
        # One more piece at a time to the partition whose pieces are longest: tasks of similar length.
        heap = [(-(end - start) / pieces[tp], i, tp) for i, (tp, (start, end)) in enumerate(spans.items())]
        heapq.heapify(heap)
        wanted = min(min_partitions, sum(end - start for start, end in spans.values()))
        while heap and sum(pieces.values()) < wanted:
            _, i, tp = heapq.heappop(heap)
            start, end = spans[tp]
            if pieces[tp] < end - start:
                pieces[tp] += 1
                heapq.heappush(heap, (-(end - start) / pieces[tp], i, tp))
    out: list[OffsetRange] = []
    for tp, (start, end) in spans.items():
        n = pieces[tp]
        for i in range(n):
            # Even pieces (not max_records then a stub) so the tasks take similar time.
            lo = start + (end - start) * i // n
            hi = start + (end - start) * (i + 1) // n
            out.append(OffsetRange(tp, lo, hi))
    return out


def read_range(rng: OffsetRange, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """The rows of ``rng`` as record batches of about CHUNK_ROWS rows.

    Raises DataLossError and the client's errors (see FetchScanner). If
    Spark stops early (a limit), closing the generator closes the reader.
    """
    if rng.end <= rng.start:
        return
    with BrokerSession(opts.service_url, opts.operation_timeout_s) as session:
        scanner = session.run(FetchScanner.open(
            session.client, rng.tp, rng.start, rng.end,
            poll_timeout_ms=opts.poll_timeout_ms, fail_on_data_loss=opts.fail_on_data_loss))
        values = ValueReader(opts.value) if opts.value is not None else None
        try:
            while True:
                entries = session.run(scanner.next_entries(CHUNK_ROWS))
                if not entries:
                    break
                if values is not None:
                    for version in values.missing(scanner.versions_of(entries)):
                        values.add_version(version, session.run(fetch_schema(session.client, rng.tp.topic, version)))
                # Decoded here, not on the session's loop, which keeps receiving meanwhile.
                yield from scanner.to_batches(entries, values)
        finally:
            session.run(scanner.close())
