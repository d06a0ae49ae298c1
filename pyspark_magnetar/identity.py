"""Deterministic producer identities for exactly-once writes.

A write task publishes under a producer name derived only from *what* it
writes, never from *which attempt* writes it:

- streaming: ``spark-<query id>-<batch id>-<partition id>``. The query id is
  the checkpoint's stable id (the same after a restart), the batch id is
  the micro-batch's number in the offset log, so a retried task and a batch
  replayed after a restart both publish under the same name;
- batch: ``spark-job-<job id>-<partition id>``, the job id drawn once on the
  driver, so retried tasks of one write job share a name.

Each row is sent with ``sequence_id`` = its position in the task's input.
With deduplication on for the topic (broker ``deduplication_enabled`` or
the namespace policy), the broker drops a send whose sequence id is not
above the highest one it stored for that name, and tells a new producer of
that name the highest stored one, so a retry resumes after it. Both need
the task's input to be the same rows in the same order on every attempt.

Spark puts the streaming ids in the task's local properties
(``sql.streaming.queryId``, ``streaming.sql.batchId``); they are read from
the TaskContext because ``DataSourceStreamWriter.write`` receives no batch id.
"""
from __future__ import annotations

from pyspark import TaskContext

from .errors import SinkError

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def _context() -> TaskContext:
    ctx = TaskContext.get()
    if ctx is None:
        raise SinkError("the Magnetar sink must run inside a Spark task (no TaskContext)")
    return ctx


def streaming_producer_name() -> str:
    """The current streaming write task's producer name.

    Raises SinkError if Spark did not set the query or batch id (a Spark
    version that changed these property names): exactly-once would be lost.
    """
    ctx = _context()
    query = ctx.getLocalProperty(QUERY_ID_PROPERTY)
    batch = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if not query or batch is None:
        raise SinkError(f"task local properties {QUERY_ID_PROPERTY!r}/{BATCH_ID_PROPERTY!r} are missing; "
                        "cannot derive a deterministic producer name for exactly-once writes")
    return producer_name("spark", query, batch, ctx.partitionId())


def batch_producer_name(job_id: str) -> str:
    """The current batch write task's producer name within job ``job_id``."""
    return producer_name("spark-job", job_id, _context().partitionId())


def producer_name(prefix: str, *parts: object) -> str:
    return "-".join([prefix, *(str(p) for p in parts)])
