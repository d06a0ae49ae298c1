"""Pulsar's metric names at ``/metrics``, so Pulsar dashboards and alerts work.

Per topic, labelled ``cluster``, ``namespace``, ``topic`` as Pulsar's brokers
label them (or per namespace, labelled ``cluster`` and ``namespace``, with
``expose_topic_level_metrics_in_prometheus = false``): the gauges of
:data:`GAUGES` (``pulsar_rate_in`` / ``pulsar_rate_out`` msg/s,
``pulsar_throughput_in`` / ``pulsar_throughput_out`` bytes/s,
``pulsar_average_msg_size``, ``pulsar_msg_backlog``, ``pulsar_storage_size``,
``pulsar_storage_backlog_size``, ``pulsar_storage_backlog_quota_limit``,
``pulsar_storage_offloaded_size``, ``pulsar_producers_count``,
``pulsar_consumers_count``, ``pulsar_subscriptions_count``) and the counters
of :data:`COUNTERS` (``pulsar_in_messages_total``, ``pulsar_in_bytes_total``,
``pulsar_out_messages_total``, ``pulsar_out_bytes_total``); per subscription
(plus a ``subscription`` label, topic-level only) the gauges of
:data:`SUB_GAUGES` (``pulsar_subscription_back_log``,
``pulsar_subscription_unacked_messages``, ``pulsar_subscription_delayed``,
...) and the out counters again; per broker ``pulsar_active_connections`` and
``pulsar_topics_count``. Rates in and out are measured between two scrapes
(the first scrape reports 0), as a Prometheus ``rate()`` over the counters
would; the subscriptions' ack and expiry rates are those of the last stats
interval (``stats_update_frequency_s``), as admin stats report them. Read at
scrape time, no background work. The per-topic series are written by
:mod:`.topic_exposition` (straight to text); this collector serves the rest.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from magnetar.broker.policies.backlog_quota import SIZE, backlog_size

from magnetar.broker.topic_walk import visit_in_slices

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker

TOPIC_LABELS = ["cluster", "namespace", "topic"]
NAMESPACE_LABELS = ["cluster", "namespace"]

#: The per-topic gauges: (name, help). Their values come from :meth:`PulsarCollector.row`.
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
    ("pulsar_storage_backlog_size", "Stored bytes the slowest subscription has not acknowledged"),
    ("pulsar_average_msg_size", "Bytes per message published since the last scrape"),
    ("pulsar_storage_backlog_quota_limit", "The backlog quota's size limit in bytes (-1: none)"),
    ("pulsar_storage_offloaded_size", "Bytes offloaded to tiered storage (Magnetar offloads nothing: 0)"),
)

#: The per-topic counters (name with Pulsar's ``_total``, help): messages and
#: bytes published and dispatched. The out counters also have one series per
#: subscription (:data:`SUB_COUNTERS`), in the same family, as Pulsar's.
COUNTERS = (
    ("pulsar_in_messages_total", "Messages published"),
    ("pulsar_in_bytes_total", "Bytes published"),
    ("pulsar_out_messages_total", "Messages dispatched"),
    ("pulsar_out_bytes_total", "Bytes dispatched"),
)

#: The per-subscription gauges (topic-level only), values from :func:`subscription_row`.
SUB_GAUGES = (
    ("pulsar_subscription_back_log", "Entries the subscription has not acknowledged"),
    ("pulsar_subscription_back_log_no_delayed", "Entries not acknowledged, those held for later delivery left out"),
    ("pulsar_subscription_delayed", "Entries held for delayed delivery"),
    ("pulsar_subscription_unacked_messages", "Messages delivered to consumers and not yet acknowledged"),
    ("pulsar_subscription_msg_ack_rate", "Messages acknowledged per second over the last stats interval"),
    ("pulsar_subscription_last_acked_timestamp", "Unix ms of the last acknowledgement (0: none since the topic loaded)"),
)

#: The counters a subscription row's (messages out, bytes out) go to, with a ``subscription`` label.
SUB_COUNTERS = ("pulsar_out_messages_total", "pulsar_out_bytes_total")


def _size_limit(topic) -> int:
    """The topic's backlog quota size limit in bytes, -1 without one (as its stats say)."""
    return next((quota.limit for quota in topic.backlog_quotas if quota.kind == SIZE), -1)


def subscription_row(sub) -> tuple[str, tuple, tuple]:
    """(name, gauge values in SUB_GAUGES' order, (messages out, bytes out)) of one subscription."""
    backlog = sub.backlog()
    delayed = len(getattr(sub.dispatcher, "delayed", ()) or ())
    unacked = sum(c.unacked_messages() for c in sub.consumers)
    return sub.name, (backlog, max(0, backlog - delayed), delayed, unacked, sub.interval_rates.rates[3],
                      sub.last_acked_ms), (sub.msg_out, sub.bytes_out)


class PulsarCollector:
    """Pulsar's series over the loaded topics. With
    ``expose_topic_level_metrics_in_prometheus`` off, one series per
    namespace (the sums of its topics) instead of one per topic and
    subscription, as Pulsar does: a scrape's size follows the namespaces.
    :meth:`families` builds them with the event loop running between slices
    of topics (:mod:`magnetar.broker.topic_walk`); :meth:`collect` in one go."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        #: topic -> (time, msg in, bytes in, msg out, bytes out) at the last scrape.
        self._last: dict[str, tuple[float, int, int, int, int]] = {}

    def collect(self):
        scrape = self.begin()
        for topic in scrape.topics:
            scrape.visit(topic)
        yield from scrape.finish()

    async def families(self) -> list:
        """What :meth:`collect` yields, the topics visited in slices of bounded time."""
        scrape = self.begin()
        await visit_in_slices(scrape.topics, scrape.visit)
        return scrape.finish()

    def begin(self) -> "PulsarScrape":
        """One scrape's pass over the topics loaded now."""
        return PulsarScrape(self)

    def rows(self, topics: list) -> list[tuple]:
        """:meth:`row` of each topic; rates between this scrape and the last one."""
        now = time.monotonic()
        rows = [self.row(topic, now) for topic in topics]
        self.keep_only({row[0] for row in rows})
        return rows

    def row(self, topic, now: float, name: str = "") -> tuple[str, str, tuple, list[tuple], tuple]:
        """One topic's (name, namespace, gauge values in GAUGES' order,
        [:func:`subscription_row` of each subscription], counter values in
        COUNTERS' order); ``now``: the scrape's monotonic time; ``name``: the
        topic's name when the caller has it."""
        name = name or str(topic.name)
        subs = list(topic.subscriptions.values())
        # The topic's own counters: they keep what consumers that left had received.
        msg_out, bytes_out = topic.msg_out, topic.bytes_out
        then, m_in, b_in, m_out, b_out = self._last.get(name, (now, topic.msg_in, topic.bytes_in, msg_out, bytes_out))
        elapsed = now - then

        def per_s(now_v: int, then_v: int) -> float:
            return max(0, now_v - then_v) / elapsed if elapsed > 0 else 0.0

        self._last[name] = (now, topic.msg_in, topic.bytes_in, msg_out, bytes_out)
        sub_rows = [subscription_row(s) for s in subs]
        rate_in, throughput_in = per_s(topic.msg_in, m_in), per_s(topic.bytes_in, b_in)
        values = (rate_in, per_s(msg_out, m_out), throughput_in, per_s(bytes_out, b_out),
                  sum(r[1][0] for r in sub_rows), topic.ledger.total_size, len(topic.producers),
                  sum(len(s.consumers) for s in subs), len(subs), backlog_size(topic) if subs else 0,
                  throughput_in / rate_in if rate_in else 0.0, _size_limit(topic), 0)
        return name, topic.name.namespace_name, values, sub_rows, (topic.msg_in, topic.bytes_in, msg_out, bytes_out)

    def keep_only(self, names: set[str]) -> None:
        """Forget the last scrape's counters of topics not in ``names`` (unloaded)."""
        for gone in set(self._last) - names:
            del self._last[gone]


class PulsarScrape:
    """One scrape's pass: :meth:`visit` each topic of :attr:`topics` (in any
    number of slices), then :meth:`finish` for the families. Per-namespace
    sums are kept as the pass goes, so finishing costs the namespaces, not
    the topics."""

    def __init__(self, collector: PulsarCollector) -> None:
        self.collector = collector
        service = collector.broker.service
        self.service = service
        self.cluster = collector.broker.config.cluster_name
        self.topics = list(service.topics.values()) if service else []
        # The per-topic series are rendered apart (topic_exposition.py).
        self.per_topic = collector.broker.config.expose_topic_level_metrics_in_prometheus
        self.now = time.monotonic()
        self.namespaces: dict[str, int] = {}
        self.names: set[str] = set()
        self.sums = NamespaceSums()

    def visit(self, topic) -> None:
        if self.per_topic:
            ns = topic.name.namespace_name
        else:
            row = self.collector.row(topic, self.now)
            self.names.add(row[0])
            self.sums.add(row)
            ns = row[1]
        self.namespaces[ns] = self.namespaces.get(ns, 0) + 1

    def finish(self) -> list:
        families = []
        if not self.per_topic:
            self.collector.keep_only(self.names)
            families += self.sums.families(self.cluster)
        connections = GaugeMetricFamily("pulsar_active_connections", "Client connections", labels=["cluster"])
        connections.add_metric([self.cluster], len(self.service.connections) if self.service else 0)
        families.append(connections)
        families.append(_topics_count(self.cluster, self.namespaces))
        return families


_GAUGE_NAMES = [name for name, _ in GAUGES]
_AVERAGE, _LIMIT = _GAUGE_NAMES.index("pulsar_average_msg_size"), _GAUGE_NAMES.index("pulsar_storage_backlog_quota_limit")


class NamespaceSums:
    """The gauges and counters of :meth:`PulsarCollector.row` rows summed per
    namespace, a row at a time."""

    def __init__(self) -> None:
        self.sums: dict[str, list[float]] = {}
        self.limits: dict[str, float] = {}

    def add(self, row: tuple) -> None:
        _, ns, values, _, totals = row
        total = self.sums.get(ns)
        if total is None:
            total = self.sums[ns] = [0] * (len(GAUGES) + len(COUNTERS))
        for i, value in enumerate((*values, *totals)):
            total[i] += value
        self.limits[ns] = max(self.limits.get(ns, -1), values[_LIMIT])

    def families(self, cluster: str) -> list:
        gauges = [GaugeMetricFamily(name, doc, labels=NAMESPACE_LABELS) for name, doc in GAUGES]
        counters = [CounterMetricFamily(name.removesuffix("_total"), doc, labels=NAMESPACE_LABELS)
                    for name, doc in COUNTERS]
        for ns, total in sorted(self.sums.items()):
            rate_in, throughput_in = total[0], total[2]
            total[_AVERAGE] = throughput_in / rate_in if rate_in else 0.0  # of the namespace, not a sum of averages
            total[_LIMIT] = self.limits[ns]  # a limit, not a sum: the largest of the namespace's topics
            for family, value in zip(gauges + counters, total):
                family.add_metric([cluster, ns], value)
        return gauges + counters


def namespace_series(cluster: str, rows: list) -> list:
    """The gauges and counters summed per namespace, without topic or subscription series."""
    sums = NamespaceSums()
    for row in rows:
        sums.add(row)
    return sums.families(cluster)


def topics_count(cluster: str, namespaces: list[str]) -> GaugeMetricFamily:
    """``pulsar_topics_count``: the loaded topics per namespace (one name per loaded topic)."""
    per_namespace: dict[str, int] = {}
    for ns in namespaces:
        per_namespace[ns] = per_namespace.get(ns, 0) + 1
    return _topics_count(cluster, per_namespace)


def _topics_count(cluster: str, per_namespace: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily("pulsar_topics_count", "Loaded topics", labels=["cluster", "namespace"])
    for ns, n in sorted(per_namespace.items()):
        family.add_metric([cluster, ns], n)
    return family
