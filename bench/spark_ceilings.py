"""What Spark's Python data source API itself carries on this machine: the
ceilings the connector's figures are measured against.

Two data sources that do no connector work at all, registered under their
own names by :func:`register`:

- ``magnetar-bench-source``: every task yields the same prebuilt Arrow
  record batch (the connector's read schema, ``size``-byte values, the
  connector's chunk of rows) until its share of ``rows`` is out. What a read
  costs when decoding and the broker cost nothing. With ``batch_file`` (an
  Arrow IPC file, see :func:`save_connector_batch`) the batch is one the
  connector decoded from the topic: the same ceiling for its real batches,
  which tells the batches' shape apart from the work of making them.
- ``magnetar-bench-sink``: a writer that takes the record batches Spark
  hands it and drops them. What a write costs when encoding and the broker
  cost nothing.

Both also stream (``readStream`` / ``writeStream``): the source's offset is
a row count, ``maxOffsetsPerTrigger`` caps each micro-batch and
Trigger.AvailableNow ends at ``rows``. What Spark's Python streaming path
costs per query and per micro-batch with no connector work: the ceiling of
the connector's stream figures.

The connector cannot beat these with any amount of work of its own; its
figures divided by these say how much of the remaining time is its own.
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamArrowWriter,
                                    DataSourceStreamReader, InputPartition, WriterCommitMessage)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from pyspark_magnetar.ranges import CHUNK_ROWS
from pyspark_magnetar.schema import ARROW_READ_SCHEMA, READ_SCHEMA


def prebuilt_batch(rows: int, size: int) -> pa.RecordBatch:
    """``rows`` rows of the read schema, every value ``size`` bytes."""
    field = ARROW_READ_SCHEMA.field
    return pa.RecordBatch.from_arrays([
        pa.array([b"k1"] * rows, pa.binary()),
        pa.array([b"x" * size] * rows, pa.binary()),
        pa.array(["persistent://public/default/bench"] * rows, pa.string()),
        pa.array([-1] * rows, pa.int32()),
        pa.array(range(rows), pa.int64()),
        pa.array([1_700_000_000_000_000] * rows, field("publish_time").type),
        pa.array([None] * rows, field("event_time").type),
        pa.array([[]] * rows, field("properties").type),
        pa.array(["bench-producer"] * rows, pa.string()),
    ], schema=ARROW_READ_SCHEMA)


#: The batches a Python worker has built or loaded, kept for its later
#: tasks (Spark reuses its workers): a ceiling's timed runs then carry
#: Spark's work only, not the bench's making of its batch (about 10 ms of
#: a task's CPU for 32,768 rows), as the first, warm-up run pays it.
_BATCHES: dict[tuple, pa.RecordBatch] = {}


def _batch_of(batch_file: str | None, rows: int, size: int) -> pa.RecordBatch:
    key = (batch_file,) if batch_file else (rows, size)
    batch = _BATCHES.get(key)
    if batch is None:
        if batch_file:
            with pa.ipc.open_file(pa.memory_map(batch_file)) as file:
                batch = file.get_batch(0)
        else:
            batch = prebuilt_batch(rows, size)
        if len(_BATCHES) >= 16:
            _BATCHES.clear()
        _BATCHES[key] = batch
    return batch


class _Share(InputPartition):
    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.rows = rows


class _SourceReader(DataSourceReader):
    def __init__(self, rows: int, size: int, tasks: int, batch_file: str | None) -> None:
        self.rows, self.size, self.tasks, self.batch_file = rows, size, tasks, batch_file

    def partitions(self) -> list[InputPartition]:
        return [_Share(self.rows * (i + 1) // self.tasks - self.rows * i // self.tasks) for i in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        left = partition.rows
        batch = _batch_of(self.batch_file, min(CHUNK_ROWS, left), self.size)
        while left > 0:
            yield batch if left >= batch.num_rows else batch.slice(0, left)
            left -= batch.num_rows


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets ``{"row": n}``: rows ``[start, end)`` split over ``tasks``."""

    def __init__(self, rows: int, size: int, tasks: int, per_trigger: int | None) -> None:
        self.batches = _SourceReader(rows, size, tasks, None)
        self.rows, self.per_trigger = rows, per_trigger

    def initialOffset(self) -> dict:
        return {"row": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.per_trigger) if self.per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        pass  # every row exists from the start

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else self.rows
        return {"row": min(self.rows, start["row"] + cap)}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        rows, tasks = end["row"] - start["row"], self.batches.tasks
        return [_Share(rows * (i + 1) // tasks - rows * i // tasks) for i in range(tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.batches.read(partition)

    def commit(self, end: dict) -> None:
        pass


class CeilingSource(DataSource):
    """Options: ``rows``, ``size`` (value bytes), ``tasks``, ``batch_file``;
    streaming: ``maxOffsetsPerTrigger``."""

    @classmethod
    def name(cls) -> str:
        return "magnetar-bench-source"

    def schema(self):
        return READ_SCHEMA

    def reader(self, schema) -> DataSourceReader:
        o = self.options
        return _SourceReader(int(o["rows"]), int(o.get("size", "100")), int(o.get("tasks", "2")),
                             o.get("batch_file"))

    def streamReader(self, schema) -> DataSourceStreamReader:
        o = self.options
        per_trigger = o.get("maxOffsetsPerTrigger") or o.get("maxoffsetspertrigger")
        return _StreamReader(int(o["rows"]), int(o.get("size", "100")), int(o.get("tasks", "2")),
                             int(per_trigger) if per_trigger else None)


class _Dropped(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class _DropWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Dropped:
        return _Dropped(sum(batch.num_rows for batch in iterator))

    def commit(self, messages) -> None:
        pass

    def abort(self, messages) -> None:
        pass


class _DropStreamWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Dropped:
        return _Dropped(sum(batch.num_rows for batch in iterator))

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass


class CeilingSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "magnetar-bench-sink"

    def writer(self, schema, overwrite: bool) -> DataSourceArrowWriter:
        return _DropWriter()

    def streamWriter(self, schema, overwrite: bool) -> DataSourceStreamArrowWriter:
        return _DropStreamWriter()


def save_connector_batch(url: str, topic: str, path: str, span: int = CHUNK_ROWS) -> int:
    """Write the connector's first record batch of partition -1 of ``topic``
    (offsets from 0) to the Arrow IPC file ``path``; its row count.

    The range read is ``[0, span)``, cut at the topic's next offset: a
    topic of fewer rows (the warm-up's at ``--rows`` below 32,768) is one
    short batch, where a range past its end was data loss to the read
    (``offsets <n>..32767 are missing``, after pollTimeoutMs). With
    ``span`` past CHUNK_ROWS the batch is the first one a task's longer
    read yields (a fetch response's rows: about 38,000 of a topic of
    batches of 1,000). ValueError for a topic with no message."""
    from pyspark_magnetar.offsets import TopicPartition
    from pyspark_magnetar.options import read_options
    from pyspark_magnetar.ranges import OffsetRange, read_range
    from pyspark_magnetar.session import BrokerSession
    from pyspark_magnetar.topics import next_offset

    tp = TopicPartition(topic, -1)
    with BrokerSession(url) as session:
        end = min(span, session.run(next_offset(session.client, tp)))
    if end <= 0:
        raise ValueError(f"{topic} has no message to save a batch of")
    opts = read_options({"service_url": url, "topic": topic}, streaming=False)
    batch = next(read_range(OffsetRange(tp, 0, end), opts))
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return batch.num_rows


def register(spark) -> None:
    spark.dataSource.register(CeilingSource)
    spark.dataSource.register(CeilingSink)
