"""Readers and writers travel to executors by pickle, before and after the
driver used them; the loop-thread session runs coroutines and closes cleanly."""
from __future__ import annotations

import asyncio
import pickle

import pytest

import pyspark  # noqa: E402,F401  (a test dependency: missing must fail, not skip)

from pyspark_magnetar import DefaultSource  # noqa: E402
from pyspark_magnetar.batch_reader import MagnetarBatchReader  # noqa: E402
from pyspark_magnetar.options import read_options, write_options  # noqa: E402
from pyspark_magnetar.session import BrokerSession  # noqa: E402
from pyspark_magnetar.stream_reader import MagnetarStreamReader  # noqa: E402
from pyspark_magnetar.writers import MagnetarBatchWriter, MagnetarStreamWriter  # noqa: E402

OPTS = {"service_url": "pulsar://127.0.0.1:1", "topic": "t"}


def test_default_source_is_named_magnetar():
    assert DefaultSource.name() == "magnetar"


def test_readers_and_writers_pickle_even_with_an_open_session():
    stream = MagnetarStreamReader(read_options(OPTS, streaming=True))
    stream._session = BrokerSession(OPTS["service_url"])  # as after a driver-side call
    try:
        copy = pickle.loads(pickle.dumps(stream))
        assert copy._session is None and copy._opts == stream._opts
    finally:
        stream.stop()
    batch = MagnetarBatchReader(read_options(OPTS, streaming=False))
    assert pickle.loads(pickle.dumps(batch))._opts == batch._opts
    writer = MagnetarBatchWriter(write_options(OPTS))
    assert pickle.loads(pickle.dumps(writer))._job == writer._job  # retried tasks share the job id
    pickle.loads(pickle.dumps(MagnetarStreamWriter(write_options(OPTS))))


def test_session_runs_coroutines_and_closes():
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def boom() -> None:
        raise ValueError("from the loop")

    with BrokerSession("pulsar://127.0.0.1:1") as session:
        assert session.run(answer()) == 42
        with pytest.raises(ValueError, match="from the loop"):
            session.run(boom())
    with pytest.raises(RuntimeError, match="closed"):
        session.run(answer())
    session.close()  # idempotent
