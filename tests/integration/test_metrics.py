"""Pulsar-shaped metrics at /metrics, and the shipped Grafana dashboard only
queries metrics that exist."""
from __future__ import annotations

import json
import pathlib
import re
import urllib.request

import pulsar

from tests.helpers import wait_for

DASHBOARD = pathlib.Path(__file__).resolve().parents[2] / "docs" / "grafana" / "magnetar-dashboard.json"


def _scrape(broker) -> str:
    return urllib.request.urlopen(f"{broker.admin_url}/metrics", timeout=10).read().decode()


def _value(text: str, name: str, topic: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and f'topic="{topic}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} for {topic} not in /metrics")


def test_pulsar_metrics_with_their_labels_and_the_dashboard_queries_exist(broker, pulsar_client):
    topic = "persistent://public/default/metered"
    consumer = pulsar_client.subscribe(topic, "s")
    producer = pulsar_client.create_producer(topic)
    for _ in range(10):
        producer.send(b"x" * 100)
    _scrape(broker)  # rates are measured between two scrapes

    def busy():
        for _ in range(50):
            producer.send(b"x" * 100)
        text = _scrape(broker)
        return text if _value(text, "pulsar_rate_in", topic) > 0 else None

    text = wait_for(busy, timeout=20, what="a non-zero pulsar_rate_in")
    line = next(l for l in text.splitlines() if l.startswith("pulsar_rate_in{") and topic in l)
    assert 'cluster="standalone"' in line and 'namespace="public/default"' in line
    assert _value(text, "pulsar_producers_count", topic) == 1
    assert _value(text, "pulsar_consumers_count", topic) == 1
    assert _value(text, "pulsar_msg_backlog", topic) > 0  # nothing acknowledged yet
    assert _value(text, "pulsar_storage_size", topic) > 0
    exposed = served_names(text)
    queried = dashboard_metrics()
    assert len(queried) > 40, queried  # the walk reached every panel's queries
    assert queried <= exposed, f"dashboard queries missing metrics: {sorted(queried - exposed)}"
    consumer.close()


def served_names(text: str) -> set[str]:
    """Every series name /metrics serves, or would with samples: each family's
    name with the suffixes of its type (_total, _bucket, _count, _sum)."""
    names = {m.group(1) for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.M)}
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)", text, re.M):
        names.add(name)
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
                    "summary": ("_count", "_sum")}.get(kind, ())
        names |= {name + s for s in suffixes}
    return names


def dashboard_metrics() -> set[str]:
    """The metric names of every query of the shipped dashboard (PromQL
    functions and label names are lower case words without our prefixes)."""
    queried = set()
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            expr = re.sub(r"\{[^}]*\}", "", target["expr"])  # label matchers name no metric
            queried |= set(re.findall(r"\b((?:pulsar|magnetar|process|python)_[a-zA-Z0-9_]+)", expr))
    return queried


def _broker_value(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_operators_metrics_storage_redeliveries_lookups_and_the_process(broker, pulsar_client):
    topic = "persistent://public/default/metered-ops"
    before = _scrape(broker)
    written_before = sum(float(l.rsplit(" ", 1)[1]) for l in before.splitlines()
                         if l.startswith("pulsar_storage_write_latency_count{"))
    consumer = pulsar_client.subscribe(topic, "ops", consumer_type=pulsar.ConsumerType.Shared,
                                       negative_ack_redelivery_delay_ms=100)
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    for _ in range(20):
        producer.send(b"x" * 100)  # 100-byte payloads: entries under 512 bytes
    msg = consumer.receive(timeout_millis=10_000)
    consumer.negative_acknowledge(msg)
    _scrape(broker)  # rates are measured between two scrapes

    def redelivered():
        text = _scrape(broker)
        for line in text.splitlines():
            if line.startswith("pulsar_subscription_msg_rate_redeliver{") and 'subscription="ops"' in line \
                    and float(line.rsplit(" ", 1)[1]) > 0:
                return text
        return None

    text = wait_for(redelivered, timeout=20, what="a redelivery counted")
    written = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                  if l.startswith("pulsar_storage_write_latency_count{"))
    assert written - written_before >= 20  # every entry's write was timed
    reads = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                if l.startswith("pulsar_storage_read_latency_count{"))
    assert reads >= 1  # the dispatcher's read of what the consumer received was timed
    read_buckets = {l.split("{")[0] for l in text.splitlines() if l.startswith("pulsar_storage_read_latency_le_")}
    assert {"pulsar_storage_read_latency_le_0_5", "pulsar_storage_read_latency_le_overflow"} <= read_buckets
    assert "pulsar_storage_read_rate{" in text and "pulsar_storage_read_cache_misses_rate{" in text
    sizes = {l.split("{")[0]: l for l in text.splitlines() if l.startswith("pulsar_entry_size_le_")}
    assert set(sizes) >= {"pulsar_entry_size_le_128", "pulsar_entry_size_le_512", "pulsar_entry_size_le_overflow"}
    assert _broker_value(text, "pulsar_broker_producers_count") == 1
    assert _broker_value(text, "pulsar_broker_consumers_count") == 1
    assert _broker_value(text, "pulsar_broker_request_topic_lookup_duration_seconds_count") >= 1
    assert _broker_value(text, "process_resident_memory_bytes") > 10 * 1024 * 1024
    assert _broker_value(text, "process_open_fds") > 0
    assert _broker_value(text, "process_cpu_seconds_total") > 0
    assert "python_gc_collections_total{" in text
    consumer.close()
    producer.close()


#: Every metric Pulsar's own Grafana dashboards query (apache/pulsar grafana/dashboards/topic.json and
#: namespace.json), by the labels they filter on. Both also query pulsar_entry_size_overflow, which no
#: Pulsar broker exports (its bucket is pulsar_entry_size_le_overflow, served here): left out.
PULSAR_TOPIC_DASHBOARD = {
    "pulsar_rate_in", "pulsar_throughput_in", "pulsar_producers_count", "pulsar_subscriptions_count",
    "pulsar_consumers_count", "pulsar_storage_size", "pulsar_subscription_msg_rate_out",
    "pulsar_subscription_msg_throughput_out", "pulsar_subscription_back_log",
}
PULSAR_NAMESPACE_DASHBOARD = {
    "pulsar_rate_out", "pulsar_throughput_out", "pulsar_topics_count", "pulsar_msg_backlog",
    "pulsar_storage_write_rate", "pulsar_storage_read_rate", "pulsar_entry_size_le_overflow",
    *(f"pulsar_storage_write_latency_le_{b}" for b in ("0_5", "1", "5", "10", "20", "50", "100", "200", "1000")),
    "pulsar_storage_write_latency_overflow",
    *(f"pulsar_entry_size_le_{b}" for b in ("128", "512", "1_kb", "2_kb", "4_kb", "16_kb", "100_kb", "1_mb")),
}
#: What StreamNative's dashboards (apache-pulsar-grafana-dashboard, dashboards/ and
#: dashboards.kubernetes/: topic.json, messaging.json) query beyond Pulsar's own.
STREAMNATIVE_TOPIC_DASHBOARD = {"pulsar_storage_backlog_quota_limit", "pulsar_storage_backlog_size",
                                "pulsar_storage_offloaded_size", "pulsar_subscription_delayed"}
STREAMNATIVE_NAMESPACE_DASHBOARD = {"pulsar_storage_read_latency_count", "pulsar_storage_write_latency_count"}
#: Queried with a remote_cluster label: declared by every broker, with series once topics replicate.
PULSAR_REPLICATION_DASHBOARD = {"pulsar_replication_rate_in", "pulsar_replication_rate_out",
                                "pulsar_replication_backlog"}
#: The counters and gauges the issue named, with Pulsar 4's labels.
PULSAR_TOPIC_SERIES = {"pulsar_in_messages_total", "pulsar_in_bytes_total", "pulsar_out_messages_total",
                       "pulsar_out_bytes_total", "pulsar_storage_backlog_size", "pulsar_consumers_count",
                       "pulsar_producers_count"}
PULSAR_SUBSCRIPTION_SERIES = {"pulsar_subscription_unacked_messages", "pulsar_subscription_delayed",
                              "pulsar_subscription_msg_rate_redeliver", "pulsar_subscription_back_log",
                              "pulsar_subscription_msg_rate_out", "pulsar_out_messages_total"}


def _samples(text: str, name: str) -> list[dict[str, str]]:
    """The label sets of ``name``'s samples."""
    return [dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line[len(name):].split("}")[0]))
            for line in text.splitlines() if line.startswith(name + "{")]


def _sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()) \
                and ("subscription" in labels or 'subscription="' not in line):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} {labels} not in /metrics")


def test_pulsars_counters_and_its_dashboards_queries_with_their_labels(broker, pulsar_client):
    from datetime import timedelta

    topic = "persistent://public/default/metered-counters"
    consumer = pulsar_client.subscribe(topic, "counted", consumer_type=pulsar.ConsumerType.Shared)
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    for _ in range(10):
        producer.send(b"y" * 100)
    producer.send(b"later", deliver_after=timedelta(minutes=10))  # held by the subscription: delayed
    received = [consumer.receive(timeout_millis=10_000) for _ in range(10)]  # none acknowledged yet
    sub = {"topic": topic, "subscription": "counted"}

    def settled():
        text = _scrape(broker)
        return text if _sample(text, "pulsar_subscription_delayed", **sub) == 1 and \
            _sample(text, "pulsar_subscription_unacked_messages", **sub) == 10 else None

    text = wait_for(settled, timeout=20, what="10 unacked and 1 delayed message in /metrics")
    labels = {"cluster": "standalone", "namespace": "public/default", "topic": topic}
    assert _sample(text, "pulsar_in_messages_total", **labels) == 11
    assert _sample(text, "pulsar_in_bytes_total", **labels) > 1000
    assert _sample(text, "pulsar_out_messages_total", **labels) == 10
    assert _sample(text, "pulsar_out_messages_total", **labels, subscription="counted") == 10
    assert _sample(text, "pulsar_out_bytes_total", **labels, subscription="counted") > 1000
    assert _sample(text, "pulsar_storage_backlog_size", **labels) > 1000  # nothing acknowledged
    assert _sample(text, "pulsar_storage_backlog_quota_limit", **labels) == -1  # no quota set
    assert _sample(text, "pulsar_subscription_back_log", **sub) == 11
    assert "# TYPE pulsar_in_messages_total counter" in text
    for name in PULSAR_TOPIC_SERIES | PULSAR_TOPIC_DASHBOARD | STREAMNATIVE_TOPIC_DASHBOARD:
        mine = [s for s in _samples(text, name) if s.get("topic") == topic]
        assert mine, f"{name} has no series of {topic}"
        assert all({"cluster", "namespace", "topic"} <= set(s) for s in _samples(text, name)), name
    for name in PULSAR_SUBSCRIPTION_SERIES:
        assert any(s.get("subscription") == "counted" and s["topic"] == topic and s["namespace"] == "public/default"
                   for s in _samples(text, name)), f"{name} has no series of subscription counted"
    for name in PULSAR_NAMESPACE_DASHBOARD | STREAMNATIVE_NAMESPACE_DASHBOARD:
        found = _samples(text, name)
        assert found and all(s.get("cluster") == "standalone" and s.get("namespace") for s in found), name
    served = served_names(text)
    assert PULSAR_REPLICATION_DASHBOARD <= served, sorted(PULSAR_REPLICATION_DASHBOARD - served)
    for msg in received:
        consumer.acknowledge(msg)
    wait_for(lambda: _sample(_scrape(broker), "pulsar_subscription_unacked_messages", **sub) == 0, timeout=20,
             what="the acknowledgements in pulsar_subscription_unacked_messages")
    consumer.close()
    producer.close()
