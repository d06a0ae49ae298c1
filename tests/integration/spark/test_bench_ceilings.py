"""bench/spark_ceilings.py's save_connector_batch, the batch the real-batch
ceiling yields, on a topic shorter than the connector's chunk of rows (the
bench's warm-up topic at ``--rows`` below 32,768): its rows, not a read
past the topic's end that waited pollTimeoutMs and reported the missing
offsets as data loss. A real broker; no Spark session (the function runs
on the driver)."""
from __future__ import annotations

import pyarrow as pa

from bench.spark_ceilings import save_connector_batch
from pyspark_magnetar.ranges import CHUNK_ROWS
from tests.helpers import unique

from .conftest import produce


def test_a_topic_shorter_than_a_chunk_saves_all_its_rows(broker, client, tmp_path):
    topic = f"persistent://public/default/{unique('ceiling-batch')}"
    produce(client, topic, 700)
    assert 700 < CHUNK_ROWS
    path = tmp_path / "batch.arrow"
    assert save_connector_batch(broker.service_url, topic, str(path)) == 700
    with pa.ipc.open_file(str(path)) as file:
        batch = file.get_batch(0)
    assert batch.column("offset").to_pylist() == list(range(700))
    assert batch.column("value").to_pylist()[:2] == [b"v0", b"v1"]
