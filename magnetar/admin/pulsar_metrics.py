"""Pulsar's metric names at ``/metrics``, so Pulsar dashboards and alerts work.

Per topic, labelled ``cluster``, ``namespace``, ``topic`` as Pulsar's brokers
label them: ``pulsar_rate_in`` / ``pulsar_rate_out`` (msg/s),
``pulsar_throughput_in`` / ``pulsar_throughput_out`` (bytes/s),
``pulsar_msg_backlog``, ``pulsar_storage_size``, ``pulsar_producers_count``,
``pulsar_consumers_count``, ``pulsar_subscriptions_count``, and per
subscription ``pulsar_subscription_back_log`` (plus a ``subscription``
label); per broker ``pulsar_active_connections`` and ``pulsar_topics_count``.
Rates are measured between two scrapes (the first scrape reports 0), as a
Prometheus ``rate()`` over the counters would. Read at scrape time, no
background work.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker

TOPIC_LABELS = ["cluster", "namespace", "topic"]


class PulsarCollector:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        #: topic -> (time, msg in, bytes in, msg out, bytes out) at the last scrape.
        self._last: dict[str, tuple[float, int, int, int, int]] = {}

    def collect(self):
        def gauge(name: str, doc: str, extra: list[str] | None = None) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=TOPIC_LABELS + (extra or []))

        rate_in = gauge("pulsar_rate_in", "Messages published per second")
        rate_out = gauge("pulsar_rate_out", "Messages dispatched per second")
        tp_in = gauge("pulsar_throughput_in", "Bytes published per second")
        tp_out = gauge("pulsar_throughput_out", "Bytes dispatched per second")
        backlog = gauge("pulsar_msg_backlog", "Entries not yet acknowledged, over the subscriptions")
        storage = gauge("pulsar_storage_size", "Bytes stored by the topic")
        producers = gauge("pulsar_producers_count", "Attached producers")
        consumers = gauge("pulsar_consumers_count", "Attached consumers")
        subscriptions = gauge("pulsar_subscriptions_count", "Subscriptions")
        sub_backlog = gauge("pulsar_subscription_back_log", "Entries the subscription has not acknowledged",
                            ["subscription"])
        connections = GaugeMetricFamily("pulsar_active_connections", "Client connections", labels=["cluster"])
        topics_count = GaugeMetricFamily("pulsar_topics_count", "Loaded topics", labels=["cluster", "namespace"])
        service = self.broker.service
        cluster = self.broker.config.cluster_name
        now = time.monotonic()
        per_namespace: dict[str, int] = {}
        seen = set()
        for topic in list(service.topics.values()) if service else []:
            name = str(topic.name)
            seen.add(name)
            ns = topic.name.namespace_name
            per_namespace[ns] = per_namespace.get(ns, 0) + 1
            labels = [cluster, ns, name]
            subs = list(topic.subscriptions.values())
            all_consumers = [c for s in subs for c in s.consumers]
            # The topic's own counters: they keep what consumers that left had received.
            msg_out, bytes_out = topic.msg_out, topic.bytes_out
            then, m_in, b_in, m_out, b_out = self._last.get(name, (now, topic.msg_in, topic.bytes_in, msg_out,
                                                                  bytes_out))
            elapsed = now - then
            def per_s(now_v: int, then_v: int) -> float:
                return max(0, now_v - then_v) / elapsed if elapsed > 0 else 0.0
            rate_in.add_metric(labels, per_s(topic.msg_in, m_in))
            tp_in.add_metric(labels, per_s(topic.bytes_in, b_in))
            rate_out.add_metric(labels, per_s(msg_out, m_out))
            tp_out.add_metric(labels, per_s(bytes_out, b_out))
            self._last[name] = (now, topic.msg_in, topic.bytes_in, msg_out, bytes_out)
            backlogs = [(s.name, s.backlog()) for s in subs]
            backlog.add_metric(labels, sum(b for _, b in backlogs))
            for sub_name, b in backlogs:
                sub_backlog.add_metric(labels + [sub_name], b)
            storage.add_metric(labels, topic.ledger.total_size)
            producers.add_metric(labels, len(topic.producers))
            consumers.add_metric(labels, len(all_consumers))
            subscriptions.add_metric(labels, len(subs))
        for gone in set(self._last) - seen:
            del self._last[gone]
        connections.add_metric([cluster], len(service.connections) if service else 0)
        for ns, n in sorted(per_namespace.items()):
            topics_count.add_metric([cluster, ns], n)
        yield from (rate_in, rate_out, tp_in, tp_out, backlog, storage, producers, consumers, subscriptions,
                    sub_backlog, connections, topics_count)
