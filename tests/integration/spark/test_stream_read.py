"""Streaming reads: Trigger.AvailableNow over a backlog in several
micro-batches, and stop / produce more / restart from the checkpoint with
every message read exactly once."""
from __future__ import annotations

import json
import threading

from tests.helpers import wait_for

from .conftest import produce


def _stream(spark, broker, **options):
    r = spark.readStream.format("magnetar").option("service_url", broker.service_url)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


class Batches:
    """A foreachBatch sink keyed by batch id: a batch Spark re-runs after a
    restart replaces its earlier copy, as an idempotent sink would."""

    def __init__(self) -> None:
        self.by_id: dict[int, list[tuple[str, int, int, str]]] = {}
        self._lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = [(r.topic, r.partition, r.offset, bytes(r.value).decode())
                for r in df.select("topic", "partition", "offset", "value").collect()]
        with self._lock:
            self.by_id[batch_id] = rows

    def offsets(self, topic_suffix: str = "") -> list[int]:
        return sorted(o for rows in self.by_id.values() for t, _, o, _ in rows if t.endswith(topic_suffix))

    def sizes(self) -> list[int]:
        return [len(self.by_id[b]) for b in sorted(self.by_id)]


def _run_available_now(df, sink: Batches, checkpoint: str):
    query = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start()
    query.awaitTermination(240)
    assert not query.isActive, "AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query


def test_available_now_reads_backlog_in_bounded_batches(spark, broker, client, tmp_path):
    produce(client, "backlog", 5000)
    sink = Batches()
    df = _stream(spark, broker, topic="backlog", startingOffsets="earliest", maxOffsetsPerTrigger="1500")
    query = _run_available_now(df, sink, str(tmp_path / "ckpt"))
    sizes = [n for n in sink.sizes() if n]
    assert sizes == [1500, 1500, 1500, 500]
    # Lag per partition in the query's progress: the latest offset the source saw minus the batch's end.
    lags = []
    for progress in query.recentProgress:
        source = progress.sources[0]
        if source.endOffset and source.latestOffset:
            end, latest = json.loads(source.endOffset), json.loads(source.latestOffset)
            (topic,) = end
            lags.append(latest[topic]["-1"] - end[topic]["-1"])
    assert lags[:4] == [3500, 2000, 500, 0], lags
    assert sink.offsets() == list(range(5000))
    values = sorted(int(v[1:]) for rows in sink.by_id.values() for _, _, _, v in rows)
    assert values == list(range(5000))


def test_restart_from_checkpoint_reads_every_message_once(spark, broker, client, tmp_path):
    checkpoint = str(tmp_path / "ckpt")
    produce(client, "restart", 1200)
    first = Batches()
    # A continuous query, stopped while running (default trigger: as fast as possible).
    query = _stream(spark, broker, topic="restart", startingOffsets="earliest", maxRecordsPerTrigger="500") \
        .writeStream.foreachBatch(first).option("checkpointLocation", checkpoint).start()
    try:
        wait_for(lambda: len(first.offsets()) >= 1200, timeout=180, interval=0.2, what="the first query to catch up")
    finally:
        query.stop()
    assert first.offsets() == list(range(1200))

    produce(client, "restart", 800, start=1200)
    second = Batches()
    _run_available_now(_stream(spark, broker, topic="restart", startingOffsets="earliest",
                               maxRecordsPerTrigger="500"), second, checkpoint)
    # Together: every offset exactly once. A batch planned but not committed
    # before the stop is re-run with the same range and batch id, so keying by
    # batch id keeps one copy.
    merged = dict(first.by_id)
    merged.update(second.by_id)
    offsets = sorted(o for rows in merged.values() for _, _, o, _ in rows)
    assert offsets == list(range(2000))
    assert min(second.offsets()) <= 1200 and max(second.offsets()) == 1999


def test_pattern_picks_up_new_topics(spark, broker, client, tmp_path):
    checkpoint = str(tmp_path / "ckpt")
    produce(client, "pat-one", 100)
    first = Batches()
    df = _stream(spark, broker, topicsPattern="pat-.*", startingOffsets="earliest")
    _run_available_now(df, first, checkpoint)
    assert first.offsets("pat-one") == list(range(100))

    produce(client, "pat-two", 50)
    produce(client, "pat-one", 10, start=100)
    second = Batches()
    _run_available_now(_stream(spark, broker, topicsPattern="pat-.*", startingOffsets="earliest"), second,
                       checkpoint)
    assert second.offsets("pat-one") == list(range(100, 110))
    assert second.offsets("pat-two") == list(range(50))


def test_partitions_share_the_budget_and_new_partitions_are_read(spark, broker, client, tmp_path):
    from magnetar.admin.client import AdminClient

    admin = AdminClient(broker.admin_url)
    admin.create_partitioned_topic("sparts", 2)
    produce(client, "sparts-partition-0", 900)
    produce(client, "sparts-partition-1", 300)
    checkpoint = str(tmp_path / "ckpt")
    first = Batches()
    df = _stream(spark, broker, topic="sparts", startingOffsets="earliest", maxRecordsPerTrigger="400")
    _run_available_now(df, first, checkpoint)
    assert [n for n in first.sizes() if n] == [400, 400, 400]
    # The first batch takes from both partitions in proportion to their backlogs (3:1).
    first_batch = [p for _, p, _, _ in first.by_id[min(b for b, rows in first.by_id.items() if rows)]]
    assert (first_batch.count(0), first_batch.count(1)) == (300, 100)

    admin.update_partitioned_topic("sparts", 3)
    produce(client, "sparts-partition-2", 70)
    second = Batches()
    _run_available_now(_stream(spark, broker, topic="sparts", startingOffsets="earliest",
                               maxRecordsPerTrigger="400"), second, checkpoint)
    assert sum(second.sizes()) == 70 and second.offsets() == list(range(70))


def test_unknown_topic_fails_the_stream(spark, broker, tmp_path):
    try:
        # The value columns follow the topic's schema: an unknown topic may
        # already fail here, when Spark asks for the stream's schema.
        df = _stream(spark, broker, topic="never-created")
    except Exception as exc:  # AnalysisException
        assert "never-created does not exist" in str(exc)
        return
    query = df.writeStream.foreachBatch(Batches()).option("checkpointLocation", str(tmp_path / "c")) \
        .trigger(availableNow=True).start()
    try:
        query.awaitTermination(120)
    except Exception as exc:  # StreamingQueryException
        assert "never-created does not exist" in str(exc)
    else:
        raise AssertionError("the query should have failed")


def _wait(predicate, what: str, timeout: float = 180) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
