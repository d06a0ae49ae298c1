"""Many topics on one broker: start-up that loads no topic, idle topics
unloaded, inactive topics deleted, /metrics per namespace, topic lists that
load nothing. Real broker processes, the official client."""
from __future__ import annotations

import json
import os
import re
import urllib.request

import pulsar
import pytest

from tests.helpers import quiet_logger, wait_for

from magnetar_harness.broker import configured_broker

pytestmark = pytest.mark.timeout(300)

NS = "public/default"


def _scrape(broker) -> str:
    return urllib.request.urlopen(f"{broker.admin_url}/metrics", timeout=30).read().decode()


def _loaded(broker) -> int:
    match = re.search(r"^magnetar_topics_loaded (\S+)$", _scrape(broker), re.M)
    assert match, "magnetar_topics_loaded is not at /metrics"
    return int(float(match.group(1)))


def _topic_list(broker) -> list[str]:
    with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/persistent/{NS}", timeout=30) as answer:
        return json.loads(answer.read())


def _client(broker) -> pulsar.Client:
    return pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=quiet_logger())


def _write(client: pulsar.Client, topic: str, messages: list[bytes]) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for m in messages:
        producer.send(m)
    producer.close()


def _read_all(client: pulsar.Client, topic: str, count: int) -> list[bytes]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = [reader.read_next(10_000).data() for _ in range(count)]
    reader.close()
    return got


def test_a_restart_with_many_stored_topics_is_ready_before_any_topic_loads(tmp_path):
    broker = configured_broker(tmp_path, "orphaned_ledger_sweep_delay_s = 0.0\n").start()
    names = [f"persistent://{NS}/stored-{i}" for i in range(300)]
    try:
        client = _client(broker)
        for i, name in enumerate(names):
            _write(client, name, [b"m%d" % i])
        client.close()
        assert _loaded(broker) == len(names)

        broker.restart()
        # Nothing was loaded to become READY, and listing the namespace loads nothing.
        assert _loaded(broker) == 0
        assert set(names) <= set(_topic_list(broker))
        assert _loaded(broker) == 0

        client = _client(broker)
        assert _read_all(client, names[123], 1) == [b"m123"]
        client.close()
        assert _loaded(broker) == 1
    finally:
        broker.stop()


def test_an_idle_topic_is_unloaded_and_loads_again_on_use(tmp_path):
    broker = configured_broker(tmp_path, """
topic_idle_unload_s = 1.0
broker_delete_inactive_topics_frequency_s = 0.5
""").start()
    topic = f"persistent://{NS}/idle"
    try:
        client = _client(broker)
        _write(client, topic, [b"a", b"b"])
        consumer = client.subscribe(topic, "held", initial_position=pulsar.InitialPosition.Earliest)
        assert _loaded(broker) == 1
        consumer.close()  # a subscription without consumers does not keep the topic loaded
        wait_for(lambda: _loaded(broker) == 0, timeout=30, what="the idle topic to be unloaded")
        assert topic in _topic_list(broker)  # unloaded, not deleted
        assert _read_all(client, topic, 2) == [b"a", b"b"]
        consumer = client.subscribe(topic, "held")
        assert consumer.receive(10_000).data() == b"a"  # the subscription survived the unload
        client.close()
    finally:
        broker.stop()


def test_an_inactive_topic_is_deleted_after_its_delay_and_one_with_a_subscription_is_not(tmp_path):
    broker = configured_broker(tmp_path, """
broker_delete_inactive_topics_enabled = true
broker_delete_inactive_topics_frequency_s = 0.5
broker_delete_inactive_topics_max_inactive_duration_s = 2.0
topic_idle_unload_s = 0.0
""").start()
    lonely = f"persistent://{NS}/lonely"
    subscribed = f"persistent://{NS}/subscribed"
    try:
        client = _client(broker)
        _write(client, lonely, [b"x"])
        client.subscribe(subscribed, "keep").close()
        _write(client, subscribed, [b"y"])
        assert {lonely, subscribed} <= set(_topic_list(broker))
        wait_for(lambda: lonely not in _topic_list(broker), timeout=30, what="the inactive topic to be deleted")
        # Both became inactive together: the round that deleted one saw the other.
        assert subscribed in _topic_list(broker)
        assert _read_all(client, subscribed, 1) == [b"y"]
        client.close()
    finally:
        broker.stop()
    assert "deleting inactive topic" in broker.log()


def test_metrics_per_namespace_without_topic_level_series(tmp_path):
    broker = configured_broker(tmp_path, "expose_topic_level_metrics_in_prometheus = false\n").start()
    try:
        client = _client(broker)
        for i in range(3):
            _write(client, f"persistent://{NS}/quiet-{i}", [b"x" * 10])
        client.close()
        text = _scrape(broker)
        assert 'topic="' not in text
        assert f'pulsar_storage_size{{cluster="standalone",namespace="{NS}"}}' in text
        assert f'pulsar_topics_count{{cluster="standalone",namespace="{NS}"}} 3.0' in text
        # Pulsar's counters summed over the namespace; a quota limit is not summed.
        assert f'pulsar_in_messages_total{{cluster="standalone",namespace="{NS}"}} 3.0' in text
        assert f'pulsar_storage_backlog_quota_limit{{cluster="standalone",namespace="{NS}"}} -1.0' in text
    finally:
        broker.stop()


def _open_file_limit(n: int):
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return apply


def test_a_broker_keeps_half_its_open_file_limit_in_segment_files(tmp_path):
    """By default the pool follows the limit: the soft limit raised to the
    hard one at start, half of it for segment files (1,000 written topics
    do not churn the pool as 512 did)."""
    def limits() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 4096))

    broker = configured_broker(tmp_path, "", preexec_fn=limits).start()
    try:
        assert "keeping at most 2048 segment files open (half the open-file limit)" in broker.log()
        assert re.search(r"^magnetar_file_open_files_capacity 2048\.0$", _scrape(broker), re.M)
        with open(f"/proc/{broker.proc.pid}/limits") as f:
            assert re.search(r"^Max open files\s+4096\s+4096\s+files", f.read(), re.M)
    finally:
        broker.stop()


def _open_files(broker) -> int:
    return len(os.listdir(f"/proc/{broker.proc.pid}/fd"))


@pytest.mark.timeout(900)
def test_an_open_file_limit_of_256_serves_2000_topics_every_message_back(tmp_path):
    """Every topic stays loaded (no idle unload): the segment files close
    and reopen under the pool, within a limit far below the topic count."""
    broker = configured_broker(tmp_path, "topic_idle_unload_s = 0.0\n",
                               preexec_fn=_open_file_limit(256)).start()
    topics = [f"persistent://{NS}/fd-{i}" for i in range(2000)]
    try:
        assert "the open-file limit (ulimit -n) is 256" in broker.log()
        client = _client(broker)
        for i, topic in enumerate(topics):
            _write(client, topic, [b"%d-a" % i, b"%d-b" % i])
        assert _loaded(broker) == len(topics)
        assert _open_files(broker) < 256
        for i, topic in enumerate(topics):
            assert _read_all(client, topic, 2) == [b"%d-a" % i, b"%d-b" % i]
        assert _open_files(broker) < 256
        client.close()
    finally:
        broker.stop(timeout=300)  # a clean stop seals each loaded topic's ledger: 2,000 of them
    assert "Too many open files" not in broker.log()
