"""Fixtures for the Spark connector tests: one broker and one SparkSession
per test module (starting Spark costs seconds; its JVM is reused by the
next module's session).

The broker runs with its defaults: deduplication off for the namespace, so
the exactly-once sink tests show that the sink's producers ask for it
themselves (``magnetar.deduplicate``). Spark runs as ``local[2,4]``: two task threads (``local[2]``)
and up to four attempts per task, since plain ``local`` mode never retries
a failed task and the sink tests inject task failures.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

from magnetar.client import Client

from magnetar_harness.broker import standalone_broker

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def _missing_requirement() -> str | None:
    for module in ("pyspark", "pyarrow"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install -e '.[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "the Spark connector tests need Java 17+ (no java on PATH, JAVA_HOME unset)"
    return None


def pytest_collection_modifyitems(config, items):
    # Skip (rather than fail) this directory's tests where Spark cannot run; a
    # module-level skip in a conftest would abort the whole session instead.
    reason = _missing_requirement()
    if reason is None:
        return
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A standalone broker with default settings, for the whole module."""
    root = tmp_path_factory.mktemp("spark-broker")
    proc = standalone_broker(root / "data").start()
    yield proc
    if proc.alive:
        code = proc.stop()
        assert code == 0, f"broker exited with {code}; log:\n{proc.log()}"


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    # Python workers must use this interpreter (it has the dependencies) and
    # see the repository as a plain directory on sys.path: Spark's lookup of
    # pyspark_* modules cannot see an editable install's import hook.
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYTHONPATH")}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("magnetar-connector-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def client(broker):
    c = Client(broker.service_url, operation_timeout_seconds=20)
    yield c
    c.close()


def produce(client: Client, topic: str, count: int, *, start: int = 0, key: bool = True, pad: int = 0) -> None:
    """``count`` messages ``v<i>`` (key ``k<i % 10>``, property i=<i>) for i from
    ``start``; with ``pad``, the value is ``v<i>-`` followed by ``pad`` x's."""
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=500,
                                      max_pending_messages=5000, block_if_queue_full=True)
    for i in range(start, start + count):
        value = f"v{i}-{'x' * pad}" if pad else f"v{i}"
        producer.send_async(value.encode(), None, properties={"i": str(i)},
                            partition_key=f"k{i % 10}" if key else None)
    producer.flush()
    producer.close()


def next_offset(service_url: str, topic: str) -> int:
    """The topic's next offset, through the connector's own helper."""
    from pyspark_magnetar.offsets import TopicPartition
    from pyspark_magnetar.session import BrokerSession
    from pyspark_magnetar.topics import next_offset as ask
    from magnetar.client.topic import full_topic_name

    with BrokerSession(service_url) as session:
        return session.run(ask(session.client, TopicPartition(full_topic_name(topic))))
