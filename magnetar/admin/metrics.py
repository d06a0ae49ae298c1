"""Prometheus metrics at ``/metrics``: live topic state, read at scrape time."""
from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily

from .pulsar_metrics import PulsarCollector

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker


class TopicCollector:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def collect(self):
        msg_in = CounterMetricFamily("magnetar_topic_messages_in", "Messages published", labels=["topic"])
        bytes_in = CounterMetricFamily("magnetar_topic_bytes_in", "Bytes stored", labels=["topic"])
        storage = GaugeMetricFamily("magnetar_topic_storage_bytes", "Bytes in storage", labels=["topic"])
        backlog = GaugeMetricFamily("magnetar_subscription_backlog_entries", "Entries not yet acknowledged",
                                    labels=["topic", "subscription"])
        producers = GaugeMetricFamily("magnetar_topic_producers", "Attached producers", labels=["topic"])
        service = self.broker.service
        for topic in list(service.topics.values()) if service else []:
            name = str(topic.name)
            msg_in.add_metric([name], topic.msg_in)
            bytes_in.add_metric([name], topic.bytes_in)
            storage.add_metric([name], topic.ledger.total_size)
            producers.add_metric([name], len(topic.producers))
            for sub_name, sub in topic.subscriptions.items():
                backlog.add_metric([name, sub_name], sub.backlog())
        yield from (msg_in, bytes_in, storage, backlog, producers)
        if service is not None:
            answers = CounterMetricFamily("pulsar_broker_lookup_answers", "Lookups answered (binary and HTTP)")
            answers.add_metric([], service.lookup_answers)
            redirects = CounterMetricFamily("pulsar_broker_lookup_redirects",
                                            "Lookups answered with another broker (the owner)")
            redirects.add_metric([], service.lookup_redirects)
            yield from (answers, redirects)


def registry_for(broker: "Broker") -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(TopicCollector(broker))
    registry.register(PulsarCollector(broker))
    return registry
