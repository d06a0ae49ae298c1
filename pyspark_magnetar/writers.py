"""Spark's writer classes: ``df.write`` and ``df.writeStream`` with
``format("magnetar")``.

Both hand every task to :func:`write_task`; they differ only in the
producer identity (:mod:`.identity`). Rows are visible to readers as soon
as each task has written them: a micro-batch whose tasks fail and are
retried, or which is replayed after a restart, does not publish its rows
twice, but readers may see a batch's rows before Spark commits the batch.
``commit``/``abort`` have nothing to undo on the broker; they only log.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from .identity import batch_producer_name, streaming_producer_name
from .options import WriteOptions
from .row_batches import prepare
from .session import BrokerSession
from .sink import TaskSink
from .value_columns import encode_values, value_encoder

log = logging.getLogger(__name__)


@dataclass
class TaskReport(WriterCommitMessage):
    """What one task did: rows it published, rows an earlier attempt had already stored."""

    producer_name: str
    rows: int
    written: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)


def write_task(batches: Iterator[pa.RecordBatch], opts: WriteOptions, name: Callable[[], str]) -> TaskReport:
    """Publish a task's rows in order under ``name()``; return once all are stored.

    Raises SinkError (bad row, broker refusal, send timeout) so Spark retries the task.
    No connection is opened for a task without rows.
    """
    producer_name = name()
    position = 0
    session: BrokerSession | None = None
    sink: TaskSink | None = None
    encoder = value_encoder(opts.value) if opts.value is not None else None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if encoder is not None:
                batch = encode_values(encoder, batch, position)
            by_topic = prepare(batch, opts.topic, position)
            if session is None:
                session = BrokerSession(opts.service_url, opts.operation_timeout_s)
                sink = TaskSink(session.client, producer_name, opts)
            session.run(sink.send(by_topic))
            position += batch.num_rows
        if sink is None:
            return TaskReport(producer_name, 0)
        session.run(sink.finish())
        return TaskReport(producer_name, position, dict(sink.written), dict(sink.skipped))
    finally:
        if session is not None:
            if sink is not None:
                session.run(sink.close())
            session.close()


def _log_commit(kind: str, messages: List[Optional[WriterCommitMessage]]) -> None:
    reports = [m for m in messages if isinstance(m, TaskReport)]
    rows = sum(r.rows for r in reports)
    skipped = sum(sum(r.skipped.values()) for r in reports)
    log.info("magnetar %s committed: %d rows from %d tasks (%d already stored by earlier attempts)",
             kind, rows, len(reports), skipped)


class MagnetarBatchWriter(DataSourceArrowWriter):
    """Created on the driver once per write job; the job id names its producers."""

    def __init__(self, opts: WriteOptions) -> None:
        self._opts = opts
        self._job = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskReport:
        return write_task(iterator, self._opts, lambda: batch_producer_name(self._job))

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        _log_commit("write", messages)

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        log.warning("magnetar write aborted; rows of finished tasks stay published")


class MagnetarStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions) -> None:
        self._opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskReport:
        return write_task(iterator, self._opts, streaming_producer_name)

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        _log_commit(f"micro-batch {batchId}", messages)

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        log.warning("magnetar micro-batch %d aborted; a retry republishes nothing already stored", batchId)
