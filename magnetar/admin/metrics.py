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


class Families:
    """Metric families already built, for ``prometheus_client.generate_latest``
    (which only calls ``collect``)."""

    def __init__(self, families: list) -> None:
        self.families = families

    def collect(self):
        return iter(self.families)


#: Samples of the collectors' families formatted between two turns of the event loop.
SAMPLES_PER_CHUNK = 2000


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
        # One registry per collector, written as one chunk each, the event
        # loop running between two. The collectors that visit every loaded
        # topic (Pulsar's, the operators') build their families first with
        # the loop running between slices of topics (broker/topic_walk.py): at
        # 10,000 topics one pass in one go held the loop tens of ms.
        # Together they write what one registry would.
        self.registries: list[CollectorRegistry] = []
        self._collectors: list = []
        for collector in (TopicCollector(broker), pulsar, OperatorCollector(broker),
                          ObjectStorageCollector(broker), FileStorageCollector(broker)):
            registry = CollectorRegistry()
            registry.register(collector)
            self.registries.append(registry)
            self._collectors.append(collector)
        process = CollectorRegistry()
        ProcessCollector(registry=process)  # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds
        GCCollector(registry=process)  # python_gc_collections_total, python_gc_objects_collected_total
        self.registries.append(process)
        self._collectors.append(None)
        self.topics = TopicExposition(broker, pulsar)

    async def chunks(self) -> AsyncIterator[bytes]:
        """A scrape's text in chunks (the event loop runs between them, and
        between slices of topics within one)."""
        for i, (registry, collector) in enumerate(zip(self.registries, self._collectors)):
            if i:
                await asyncio.sleep(0)
            families = getattr(collector, "families", None)
            if families is None:
                yield generate_latest(registry)
                continue
            # Written a few thousand samples at a time (per-subscription
            # families have one per subscription), the loop running between.
            group: list = []
            samples = 0
            for family in await families():
                group.append(family)
                samples += len(family.samples)
                if samples >= SAMPLES_PER_CHUNK:
                    yield generate_latest(Families(group))
                    group, samples = [], 0
                    await asyncio.sleep(0)
            if group:
                yield generate_latest(Families(group))
        if self.broker.config.expose_topic_level_metrics_in_prometheus:
            async for chunk in self.topics.chunks():
                yield chunk
