"""Prometheus metrics at ``/metrics``: live topic state, read at scrape time.

Only loaded topics are read (stored ones load on first use); the per-topic
series are left out with ``expose_topic_level_metrics_in_prometheus = false``
(Pulsar's switch), and ``magnetar_topics_loaded`` always counts them.
"""
from __future__ import annotations

import asyncio
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
    """What ``/metrics`` serves for one broker: :attr:`registries` (every
    series but the per-topic ones, one registry per collector) and, with
    topic-level series on, the per-topic series written straight to text
    (:mod:`.topic_exposition`)."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        pulsar = PulsarCollector(broker)
        # One registry per collector, written as one chunk each: several of
        # them visit every loaded topic (about 60 ms of the event loop in
        # all at 10,000 topics on a loaded machine), and the loop serves
        # traffic between two chunks. Together they write what one registry would.
        self.registries: list[CollectorRegistry] = []
        for collector in (TopicCollector(broker), pulsar, OperatorCollector(broker),
                          ObjectStorageCollector(broker), FileStorageCollector(broker)):
            registry = CollectorRegistry()
            registry.register(collector)
            self.registries.append(registry)
        process = CollectorRegistry()
        ProcessCollector(registry=process)  # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds
        GCCollector(registry=process)  # python_gc_collections_total, python_gc_objects_collected_total
        self.registries.append(process)
        self.topics = TopicExposition(broker, pulsar)

    async def chunks(self) -> AsyncIterator[bytes]:
        """A scrape's text in chunks (the event loop runs between them)."""
        for i, registry in enumerate(self.registries):
            if i:
                await asyncio.sleep(0)
            yield generate_latest(registry)
        if self.broker.config.expose_topic_level_metrics_in_prometheus:
            async for chunk in self.topics.chunks():
                yield chunk
