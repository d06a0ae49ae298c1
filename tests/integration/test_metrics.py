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
    exposed = {m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", text, re.M)}
    exposed |= {f"{name}_total" for name in exposed}
    queried = set()
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            queried |= set(re.findall(r"\b((?:pulsar|magnetar)_[a-z_]+)", target["expr"]))
    assert queried and queried <= exposed, f"dashboard queries missing metrics: {sorted(queried - exposed)}"
    consumer.close()
