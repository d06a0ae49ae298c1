"""Prometheus metrics at ``/metrics``: live topic state, read at scrape time.

Only loaded topics are read (stored ones load on first use); the per-topic
series are left out with ``expose_topic_level_metrics_in_prometheus = false``
(Pulsar's switch), and ``magnetar_topics_loaded`` always counts them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily

from prometheus_client import GCCollector, ProcessCollector, generate_latest

from .file_metrics import FileStorageCollector
from .object_metrics import ObjectStorageCollector
from .operator_metrics import OperatorCollector
from .pulsar_metrics import PulsarCollector
from .topic_exposition import TopicExposition

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker


class TopicCollector:
    """``magnetar_topics_loaded`` and the lookup counters (the per-topic
    series: :mod:`.topic_exposition`)."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def collect(self):
        service = self.broker.service
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


class BrokerMetrics:
    """What ``/metrics`` serves for one broker: :attr:`registry` (every
    series but the per-topic ones) and, with topic-level series on, the
    per-topic series written straight to text (:mod:`.topic_exposition`)."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        pulsar = PulsarCollector(broker)
        self.registry = CollectorRegistry()
        self.registry.register(TopicCollector(broker))
        self.registry.register(pulsar)
        self.registry.register(OperatorCollector(broker))
        self.registry.register(ObjectStorageCollector(broker))
        self.registry.register(FileStorageCollector(broker))
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds
        GCCollector(registry=self.registry)  # python_gc_collections_total, python_gc_objects_collected_total
        self.topics = TopicExposition(broker, pulsar)

    async def chunks(self) -> AsyncIterator[bytes]:
        """A scrape's text in chunks (the event loop runs between them)."""
        yield generate_latest(self.registry)
        if self.broker.config.expose_topic_level_metrics_in_prometheus:
            async for chunk in self.topics.chunks():
                yield chunk
