"""Fixtures of the integration tests: a fresh broker process per test and
the official client on it. A module that shares one broker among its tests
says so with ``broker = shared_broker(...)`` (tests/helpers.py)."""
from __future__ import annotations

import pytest

from magnetar_harness.broker import standalone_broker
from magnetar_harness.etcd import running_etcd
from tests.helpers import quiet_logger, stop_broker


@pytest.fixture
def broker(tmp_path):
    """A fresh standalone broker process with its own data directory."""
    proc = standalone_broker(tmp_path / "data").start()
    yield proc
    stop_broker(proc)


@pytest.fixture
def pulsar_client(broker):
    """The official pulsar-client connected to the broker."""
    import pulsar

    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=quiet_logger())
    yield client
    client.close()


@pytest.fixture
def etcd(tmp_path):
    """An etcd server of the test's own (magnetar_harness.etcd)."""
    with running_etcd(tmp_path / "etcd") as server:
        yield server
