"""``magnetar_object_puts_total`` at a broker's /metrics counts the objects
it wrote: entries of many topics sent together cost one PUT per commit
interval, not one per topic; the compactions of its sealed ledgers are
counted by source, beside those pending and the bytes kept for them (a
real broker on a real SeaweedFS and etcd, the official client)."""
from __future__ import annotations

import re
import urllib.request

import pulsar
import pytest

from magnetar_harness.cluster import LocalCluster
from magnetar_harness.waiting import wait_for

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
        chained = counter(broker, "magnetar_object_commit_transactions_chained_total")
        again = (counter(broker, "magnetar_object_commit_chain_resends_total")
                 + counter(broker, "magnetar_object_commit_chain_retries_total"))
        assert 0 <= again <= chained <= counter(broker, "magnetar_object_commit_transactions_total")
        assert counter(broker, "magnetar_object_prepared_ledgers_swept_total") == 0  # no crash left any
        # the PUT budget's rate now (its pacer keeps it between the floor, 25, and the budget, 250)
        assert 25 <= counter(broker, "magnetar_object_put_budget_rate") <= 250
        assert counter(broker, "magnetar_object_loop_core_wait_seconds_total") >= 0
        # where the commits' time went: every commit's PUT and total were timed
        for phase in ("put", "total"):
            timed = counter(broker, f'magnetar_object_commit_phase_seconds_count{{phase="{phase}"}}')
            assert timed == counter(broker, "magnetar_object_commits_total"), phase
        client.close()
    finally:
        assert cluster.stop() == 0


def test_compactions_are_counted_by_source_beside_those_pending_and_the_bytes_kept(tmp_path):
    """Ledgers of 10 sections (the smallest bound): 60 sends one by one roll
    a topic over several times; each sealed ledger is compacted from the
    bytes its writer kept (the spill), none from the store."""
    config = "[storage]\nobject_sections_per_ledger = 10\n"
    cluster = LocalCluster(tmp_path / "c", brokers=1, storage="object", broker_config=config).start()
    try:
        broker = cluster.members[0]
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=30)
        assert counter(broker, 'magnetar_object_compactions_total{source="kept"}') == 0
        producer = client.create_producer("persistent://public/default/compacted", batching_enabled=False)
        for i in range(60):
            producer.send(b"entry-%d" % i)  # one at a time: a commit, so a section, each
        assert counter(broker, "magnetar_object_kept_bytes") > 0  # the open ledger's commits
        kept = wait_for(lambda: counter(broker, 'magnetar_object_compactions_total{source="kept"}') >= 3,
                        timeout=60, what="three sealed ledgers compacted from kept bytes")
        assert kept
        wait_for(lambda: counter(broker, "magnetar_object_compactions_pending") == 0, timeout=60,
                 what="no compaction pending")
        assert counter(broker, 'magnetar_object_compactions_total{source="store"}') == 0
        assert counter(broker, 'magnetar_object_compactions_total{source="indexed"}') == 0
        assert counter(broker, "magnetar_object_compactions_failed_total") == 0
        client.close()
    finally:
        assert cluster.stop() == 0

