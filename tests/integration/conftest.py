from __future__ import annotations

import pytest

from magnetar_harness.broker import standalone_broker


@pytest.fixture
def broker(tmp_path):
    """A fresh standalone broker process with its own data directory."""
    proc = standalone_broker(tmp_path / "data").start()
    yield proc
    if proc.alive:
        code = proc.stop()
        assert code == 0, f"broker exited with {code}; log:\n{proc.log()}"


@pytest.fixture
def pulsar_client(broker):
    """The official pulsar-client connected to the broker."""
    import pulsar

    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=_quiet_logger())
    yield client
    client.close()


def _quiet_logger():
    import logging

    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return logger
