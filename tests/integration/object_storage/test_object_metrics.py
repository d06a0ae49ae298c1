"""``magnetar_object_puts_total`` at a broker's /metrics counts the objects
it wrote: entries of many topics sent together cost one PUT per commit
interval, not one per topic (a real broker on a real SeaweedFS and etcd,
the official client)."""
from __future__ import annotations

import re
import urllib.request

import pulsar
import pytest

from magnetar_harness.cluster import LocalCluster

pytestmark = pytest.mark.timeout(300)
TOPICS = 40


def counter(member, name: str) -> int:
    text = urllib.request.urlopen(member.admin_url + "/metrics", timeout=30).read().decode()
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert found, f"{name} not in /metrics"
    return int(float(found.group(1)))


def test_puts_are_counted_and_many_topics_share_one_put_per_interval(tmp_path):
    config = "[storage]\nobject_storage_profile = \"cost\"\nobject_commit_interval_ms = 500\n"
    cluster = LocalCluster(tmp_path / "c", brokers=1, storage="object", broker_config=config).start()
    try:
        broker = cluster.members[0]
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=30)
        producers = [client.create_producer(f"persistent://public/default/m-{i}", batching_enabled=False)
                     for i in range(TOPICS)]
        before = counter(broker, "magnetar_object_puts_total")
        assert before >= 0 and counter(broker, "magnetar_object_commits_total") == before
        receipts = []
        for p in producers:  # one entry per topic, all within about one interval
            p.send_async(b"x", lambda res, _id: receipts.append(res))
        for p in producers:
            p.flush()
        assert receipts == [pulsar.Result.Ok] * TOPICS
        puts = counter(broker, "magnetar_object_puts_total") - before
        assert 1 <= puts <= 8, f"{TOPICS} topics' entries took {puts} PUTs"
        assert counter(broker, "magnetar_object_commit_transactions_total") >= puts
        assert counter(broker, "magnetar_object_prepared_ledgers_swept_total") == 0  # no crash left any
        # where the commits' time went: every commit's PUT and total were timed
        for phase in ("put", "total"):
            timed = counter(broker, f'magnetar_object_commit_phase_seconds_count{{phase="{phase}"}}')
            assert timed == counter(broker, "magnetar_object_commits_total"), phase
        client.close()
    finally:
        assert cluster.stop() == 0
