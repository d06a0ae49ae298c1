"""Pulsar's metric names at ``/metrics``, so Pulsar dashboards and alerts work.

Per topic, labelled ``cluster``, ``namespace``, ``topic`` as Pulsar's brokers
label them (or per namespace, labelled ``cluster`` and ``namespace``, with
``expose_topic_level_metrics_in_prometheus = false``): ``pulsar_rate_in`` / ``pulsar_rate_out`` (msg/s),
``pulsar_throughput_in`` / ``pulsar_throughput_out`` (bytes/s),
``pulsar_msg_backlog``, ``pulsar_storage_size``, ``pulsar_producers_count``,
``pulsar_consumers_count``, ``pulsar_subscriptions_count``, and per
subscription ``pulsar_subscription_back_log`` (plus a ``subscription``
label); per broker ``pulsar_active_connections`` and ``pulsar_topics_count``.
Rates are measured between two scrapes (the first scrape reports 0), as a
Prometheus ``rate()`` over the counters would. Read at scrape time, no
background work. The per-topic series are written by
:mod:`.topic_exposition` (straight to text); this collector serves the rest.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker

TOPIC_LABELS = ["cluster", "namespace", "topic"]
NAMESPACE_LABELS = ["cluster", "namespace"]

#: The per-topic gauges: (name, help). Their values come from :func:`topic_row`.
GAUGES = (
    ("pulsar_rate_in", "Messages published per second"),
    ("pulsar_rate_out", "Messages dispatched per second"),
    ("pulsar_throughput_in", "Bytes published per second"),
    ("pulsar_throughput_out", "Bytes dispatched per second"),
    ("pulsar_msg_backlog", "Entries not yet acknowledged, over the subscriptions"),
    ("pulsar_storage_size", "Bytes stored by the topic"),
    ("pulsar_producers_count", "Attached producers"),
    ("pulsar_consumers_count", "Attached consumers"),
    ("pulsar_subscriptions_count", "Subscriptions"),
)


class PulsarCollector:
    """Pulsar's series over the loaded topics. With
    ``expose_topic_level_metrics_in_prometheus`` off, one series per
    namespace (the sums of its topics) instead of one per topic and
    subscription, as Pulsar does: a scrape's size follows the namespaces."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        #: topic -> (time, msg in, bytes in, msg out, bytes out) at the last scrape.
        self._last: dict[str, tuple[float, int, int, int, int]] = {}

    def collect(self):
        service = self.broker.service
        cluster = self.broker.config.cluster_name
        topics = list(service.topics.values()) if service else []
        if self.broker.config.expose_topic_level_metrics_in_prometheus:
            # The per-topic series are rendered apart (topic_exposition.py).
            namespaces = [t.name.namespace_name for t in topics]
        else:
            rows = self.rows(topics)
            yield from namespace_series(cluster, rows)
            namespaces = [ns for _, ns, _, _ in rows]
        connections = GaugeMetricFamily("pulsar_active_connections", "Client connections", labels=["cluster"])
        connections.add_metric([cluster], len(service.connections) if service else 0)
        yield connections
        yield topics_count(cluster, namespaces)

    def rows(self, topics: list) -> list[tuple[str, str, tuple, list[tuple[str, int]]]]:
        """(topic, namespace, gauge values in GAUGES' order, [(subscription,
        backlog)]) per topic; rates between this scrape and the last one."""
        now = time.monotonic()
        rows = [self.row(topic, now) for topic in topics]
        self.keep_only({row[0] for row in rows})
        return rows

    def row(self, topic, now: float, name: str = "") -> tuple[str, str, tuple, list[tuple[str, int]]]:
        """One topic's row (see :meth:`rows`); ``now``: the scrape's monotonic
        time; ``name``: the topic's name when the caller has it."""
        name = name or str(topic.name)
        subs = list(topic.subscriptions.values())
        # The topic's own counters: they keep what consumers that left had received.
        msg_out, bytes_out = topic.msg_out, topic.bytes_out
        then, m_in, b_in, m_out, b_out = self._last.get(name, (now, topic.msg_in, topic.bytes_in, msg_out, bytes_out))
        elapsed = now - then

        def per_s(now_v: int, then_v: int) -> float:
            return max(0, now_v - then_v) / elapsed if elapsed > 0 else 0.0

        self._last[name] = (now, topic.msg_in, topic.bytes_in, msg_out, bytes_out)
        backlogs = [(s.name, s.backlog()) for s in subs]
        values = (per_s(topic.msg_in, m_in), per_s(msg_out, m_out), per_s(topic.bytes_in, b_in),
                  per_s(bytes_out, b_out), sum(b for _, b in backlogs), topic.ledger.total_size,
                  len(topic.producers), sum(len(s.consumers) for s in subs), len(subs))
        return name, topic.name.namespace_name, values, backlogs

    def keep_only(self, names: set[str]) -> None:
        """Forget the last scrape's counters of topics not in ``names`` (unloaded)."""
        for gone in set(self._last) - names:
            del self._last[gone]


def namespace_series(cluster: str, rows: list) -> list[GaugeMetricFamily]:
    """The same gauges summed per namespace, without topic or subscription series."""
    families = [GaugeMetricFamily(name, doc, labels=NAMESPACE_LABELS) for name, doc in GAUGES]
    sums: dict[str, list[float]] = {}
    for _, ns, values, _ in rows:
        total = sums.setdefault(ns, [0] * len(GAUGES))
        for i, value in enumerate(values):
            total[i] += value
    for ns, total in sorted(sums.items()):
        for family, value in zip(families, total):
            family.add_metric([cluster, ns], value)
    return families


def topics_count(cluster: str, namespaces: list[str]) -> GaugeMetricFamily:
    """``pulsar_topics_count``: the loaded topics per namespace (one name per loaded topic)."""
    family = GaugeMetricFamily("pulsar_topics_count", "Loaded topics", labels=["cluster", "namespace"])
    per_namespace: dict[str, int] = {}
    for ns in namespaces:
        per_namespace[ns] = per_namespace.get(ns, 0) + 1
    for ns, n in sorted(per_namespace.items()):
        family.add_metric([cluster, ns], n)
    return family
