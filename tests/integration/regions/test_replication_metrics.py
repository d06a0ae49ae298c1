"""Replication series at /metrics over real regions (``magnetar geo up``):
the delay is 0 while the remote keeps up, and grows with the age of what
waits once the remote is gone."""
from __future__ import annotations

import os
import signal
import urllib.request

import pulsar
import pytest

from tests.helpers import quiet_logger, wait_for

from magnetar_harness.regions import LocalRegions, replicated_namespace

pytestmark = pytest.mark.timeout(300)
TOPIC = "persistent://acme/watched/events"


def _series(region, name: str, remote: str) -> float | None:
    text = urllib.request.urlopen(f"{region.admin_url}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and f'remote_cluster="{remote}"' in line and TOPIC in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_replication_delay_is_zero_when_caught_up_and_grows_while_the_remote_is_down(tmp_path):
    regions = LocalRegions(tmp_path / "geo", regions=2).start()
    try:
        replicated_namespace(regions, "acme/watched")
        source, remote = regions.regions
        client = pulsar.Client(source.service_url, operation_timeout_seconds=30, logger=quiet_logger())
        try:
            producer = client.create_producer(TOPIC, batching_enabled=False)
            producer.send(b"before")
            wait_for(lambda: _series(source, "pulsar_replication_backlog", remote.name) == 0
                     and _series(source, "pulsar_replication_connected_count", remote.name) == 1, 60,
                     interval=0.2, what="the remote caught up")
            assert _series(source, "pulsar_replication_delay_in_seconds", remote.name) == 0

            os.kill(remote.pid, signal.SIGKILL)
            producer.send(b"while the remote is down")  # stored here; it waits for the remote
            delay = wait_for(lambda: (d := _series(source, "pulsar_replication_delay_in_seconds", remote.name))
                             and d >= 2 and d, 30, interval=0.2, what="a replication delay of 2 s")
            assert delay < 60, delay  # the age of the waiting entry, not of the topic
            assert _series(source, "pulsar_replication_backlog", remote.name) >= 1
        finally:
            client.close()
    finally:
        regions.stop()
