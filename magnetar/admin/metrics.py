"""Prometheus metrics at ``/metrics``: live topic state, read at scrape time.

Only loaded topics are read (stored ones load on first use); the per-topic
series are left out with ``expose_topic_level_metrics_in_prometheus = false``
(Pulsar's switch), and ``magnetar_topics_loaded`` always counts them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily

from prometheus_client import GCCollector, ProcessCollector

from .object_metrics import ObjectStorageCollector
from .operator_metrics import OperatorCollector
from .pulsar_metrics import PulsarCollector

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker


class TopicCollector:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def collect(self):
        service = self.broker.service
        if self.broker.config.expose_topic_level_metrics_in_prometheus:
            yield from self._topic_series(list(service.topics.values()) if service else [])
        loaded = GaugeMetricFamily("magnetar_topics_loaded", "Topics loaded in memory (stored ones load on first use)")
        loaded.add_metric([], len(service.topics) if service else 0)
        yield loaded
        if service is not None:
            answers = CounterMetricFamily("pulsar_broker_lookup_answers", "Lookups answered (binary and HTTP)")
            answers.add_metric([], service.lookup_answers)
            redirects = CounterMetricFamily("pulsar_broker_lookup_redirects",
                                            "Lookups answered with another broker (the owner)")
            redirects.add_metric([], service.lookup_redirects)
            yield from (answers, redirects)

    @staticmethod
    def _topic_series(topics: list):
        """Magnetar's own series, one per loaded topic (and subscription)."""
        msg_in = CounterMetricFamily("magnetar_topic_messages_in", "Messages published", labels=["topic"])
        bytes_in = CounterMetricFamily("magnetar_topic_bytes_in", "Bytes stored", labels=["topic"])
        storage = GaugeMetricFamily("magnetar_topic_storage_bytes", "Bytes in storage", labels=["topic"])
        backlog = GaugeMetricFamily("magnetar_subscription_backlog_entries", "Entries not yet acknowledged",
                                    labels=["topic", "subscription"])
        producers = GaugeMetricFamily("magnetar_topic_producers", "Attached producers", labels=["topic"])
        for topic in topics:
            name = str(topic.name)
            msg_in.add_metric([name], topic.msg_in)
            bytes_in.add_metric([name], topic.bytes_in)
            storage.add_metric([name], topic.ledger.total_size)
            producers.add_metric([name], len(topic.producers))
            for sub_name, sub in topic.subscriptions.items():
                backlog.add_metric([name, sub_name], sub.backlog())
        return (msg_in, bytes_in, storage, backlog, producers)


def registry_for(broker: "Broker") -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(TopicCollector(broker))
    registry.register(PulsarCollector(broker))
    registry.register(OperatorCollector(broker))
    registry.register(ObjectStorageCollector(broker))
    ProcessCollector(registry=registry)  # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds
    GCCollector(registry=registry)  # python_gc_collections_total, python_gc_objects_collected_total
    return registry
