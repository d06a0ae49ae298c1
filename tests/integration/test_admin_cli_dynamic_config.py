"""``magnetar admin brokers update-dynamic-config`` and friends on a running
standalone broker: applied without a restart, kept across one; settings that
need a restart say so (the cluster case: tests/integration/cluster/test_admin_cli_restarts.py)."""
from __future__ import annotations

import json
import subprocess
import sys

import pulsar
import pytest

from tests.helpers import quiet_logger, start_broker, stop_broker, unique


def cli(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "magnetar.cli", "admin", "--url", broker.admin_url, *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def own_broker(tmp_path):
    proc = start_broker(tmp_path)
    yield proc
    stop_broker(proc)


def test_auto_topic_creation_turned_off_and_on_without_a_restart_and_kept_across_one(own_broker):
    broker = own_broker
    done = cli(broker, "brokers", "list-dynamic-config")
    assert done.returncode == 0 and "allow_auto_topic_creation" in done.stdout and "dispatch_throttling" in done.stdout
    done = cli(broker, "brokers", "update-dynamic-config", "--config", "allowAutoTopicCreation", "--value", "false")
    assert done.returncode == 0, done.stderr
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=5, logger=quiet_logger())
    try:
        with pytest.raises(pulsar.TopicNotFound):
            client.create_producer(f"persistent://public/default/{unique('dyn')}")
        values = json.loads(cli(broker, "--json", "brokers", "get-all-dynamic-config").stdout)
        assert values == {"allow_auto_topic_creation": False}
        broker.restart()  # kept in the metadata store: it wins over the file after a restart too
        runtime = json.loads(cli(broker, "--json", "brokers", "get-runtime-config").stdout)
        assert runtime["allow_auto_topic_creation"] is False
        done = cli(broker, "brokers", "delete-dynamic-config", "--config", "allow_auto_topic_creation")
        assert done.returncode == 0, done.stderr
        client.close()
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=5, logger=quiet_logger())
        client.create_producer(f"persistent://public/default/{unique('dyn')}").send(b"created again")
    finally:
        client.close()


def test_a_setting_that_needs_a_restart_or_a_bad_value_is_one_clear_error(own_broker):
    done = cli(own_broker, "brokers", "update-dynamic-config", "--config", "max_message_size", "--value", "10")
    assert done.returncode == 1
    assert "max_message_size needs a restart" in done.stderr and "Traceback" not in done.stderr
    done = cli(own_broker, "brokers", "update-dynamic-config", "--config", "dispatcher_max_read_batch",
               "--value", "lots")
    assert done.returncode == 1 and "takes int" in done.stderr
    done = cli(own_broker, "brokers", "delete-dynamic-config", "--config", "dispatcher_max_read_batch")
    assert done.returncode == 1 and "no dynamic value" in done.stderr
