"""The series operators reach for beside the per-topic ones, with Pulsar's
names where Pulsar has the metric (so its dashboards and alerts work):

- per namespace (labels ``cluster``, ``namespace``): the storage write
  latency buckets ``pulsar_storage_write_latency_le_0_5`` ... ``_le_1000``,
  ``pulsar_storage_write_latency_overflow`` (Pulsar's names; entries per
  second in each latency range, ms), with
  ``pulsar_storage_write_latency_count`` / ``_sum``; the entry size buckets
  ``pulsar_entry_size_le_128`` ... ``_le_1_mb``, ``_le_overflow``, with
  ``_count`` / ``_sum``; ``pulsar_storage_write_rate`` (entries/s); the
  storage read latency buckets ``pulsar_storage_read_latency_le_0_5`` ...
  ``_le_overflow`` (reads per second in each range: Magnetar's, Pulsar
  has no read histogram, named like the write one), with ``_count`` /
  ``_sum``; ``pulsar_storage_read_rate`` (entries/s) and
  ``pulsar_storage_read_cache_misses_rate`` (reads/s past the tail cache);
- per subscription (labels ``cluster``, ``namespace``, ``topic``,
  ``subscription``): ``pulsar_subscription_msg_rate_out``,
  ``pulsar_subscription_msg_throughput_out``,
  ``pulsar_subscription_msg_rate_redeliver``,
  ``pulsar_subscription_consumers_count`` (when topic-level series are on);
- per topic and remote cluster (label ``remote_cluster``):
  ``pulsar_replication_backlog``, ``pulsar_replication_rate_out``,
  ``pulsar_replication_throughput_out``, ``pulsar_replication_connected_count``,
  ``pulsar_replication_delay_in_seconds``, and what the remote's replicator
  brings in: ``pulsar_replication_rate_in``, ``pulsar_replication_throughput_in``;
- per broker: ``pulsar_broker_producers_count``,
  ``pulsar_broker_consumers_count``; lookup latency as Pulsar 4's histogram
  ``pulsar_broker_request_topic_lookup_duration_seconds``; bundles moved
  ``pulsar_lb_unload_bundle_total``, split ``pulsar_lb_bundles_split_total``
  and Magnetar's ``magnetar_bundle_transfer_duration_seconds`` histogram
  and ``magnetar_bundle_topics_prepared_total`` (topics loaded for a bundle
  moving here before it was taken);
- the process (the Prometheus client's standard names, as a JVM broker
  exports them): ``process_cpu_seconds_total``,
  ``process_resident_memory_bytes``, ``process_open_fds``,
  ``process_max_fds``, ``process_start_time_seconds``, and the collector's
  ``python_gc_collections_total`` / ``python_gc_objects_collected_total``.

Rates are measured between two scrapes (the first reports 0), as
:mod:`.pulsar_metrics` does. Read at scrape time, no background work; a
scrape visits the loaded topics in slices, the event loop running between
(:mod:`magnetar.broker.topic_walk`).
To add a metric: a family here (or a new module beside it) and one line in
:class:`magnetar.admin.metrics.BrokerMetrics`.
"""
from __future__ import annotations

import time
from operator import add
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from magnetar.broker.durations import DurationCounts
from magnetar.storage.write_stats import LATENCY_BOUNDS_MS, SIZE_BOUNDS

from magnetar.broker.topic_walk import visit_in_slices

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker

NS = ["cluster", "namespace"]
SUB = ["cluster", "namespace", "topic", "subscription"]
REMOTE = ["cluster", "namespace", "topic", "remote_cluster"]


def _suffix(bound: float) -> str:
    return str(bound).replace(".", "_")


# Pulsar's last write bucket has no "le_" (pulsar_storage_write_latency_overflow), its
# entry-size one has; Magnetar's read buckets (Pulsar has none) say "le_" throughout.
LATENCY_NAMES = [f"pulsar_storage_write_latency_le_{_suffix(b)}" for b in LATENCY_BOUNDS_MS] + \
    ["pulsar_storage_write_latency_overflow"]
READ_LATENCY_NAMES = [f"pulsar_storage_read_latency_le_{_suffix(b)}" for b in LATENCY_BOUNDS_MS] + \
    ["pulsar_storage_read_latency_le_overflow"]
SIZE_NAMES = [f"pulsar_entry_size_le_{n}" for n in ("128", "512", "1_kb", "2_kb", "4_kb", "16_kb", "100_kb", "1_mb")] \
    + ["pulsar_entry_size_le_overflow"]
assert len(SIZE_NAMES) == len(SIZE_BOUNDS) + 1


class _Rates:
    """Per-second rates of growing counters between two scrapes, by key."""

    def __init__(self) -> None:
        self._last: dict = {}

    def rates(self, key, now: float, values: list[float]) -> list[float]:
        then, before = self._last.get(key, (now, values))
        self._last[key] = (now, values)
        elapsed = now - then
        return [max(0.0, v - b) / elapsed if elapsed > 0 else 0.0 for v, b in zip(values, before)]

    def keep_only(self, keys: set) -> None:
        for gone in set(self._last) - keys:
            del self._last[gone]


class OperatorCollector:
    """The operators' series (see the module's docstring). :meth:`families`
    builds them with the event loop running between slices of topics
    (:mod:`magnetar.broker.topic_walk`); :meth:`collect` in one go."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self._rates = _Rates()

    def collect(self):
        scrape = OperatorScrape(self)
        for topic in scrape.topics:
            scrape.visit(topic)
        yield from scrape.finish()

    async def families(self) -> list:
        """What :meth:`collect` yields, the topics visited in slices of bounded time."""
        scrape = OperatorScrape(self)
        await visit_in_slices(scrape.topics, scrape.visit)
        return scrape.finish()


_N_LAT, _N_SIZE, _N_READ = len(LATENCY_NAMES), len(SIZE_NAMES), len(READ_LATENCY_NAMES)
#: How many sums a topic adds to its namespace's write row and read row.
_N_WRITE_SUMS, _N_READ_SUMS = _N_LAT + _N_SIZE + 3, _N_READ + 4


class OperatorScrape:
    """One scrape's pass: :meth:`visit` each topic of :attr:`topics` (in any
    number of slices), then :meth:`finish` for the families. Per-namespace
    sums and broker totals are kept as the pass goes; the per-subscription
    and replication samples are added to their families as each topic is
    visited."""

    def __init__(self, collector: OperatorCollector) -> None:
        self.collector = collector
        self.service = service = collector.broker.service
        self.cluster = collector.broker.config.cluster_name
        self.topics = list(service.topics.values()) if service else []
        self.now = time.monotonic()
        self.keys: set = set()
        self.per_topic = collector.broker.config.expose_topic_level_metrics_in_prometheus
        self.writes: dict[str, list[float]] = {}
        self.reads: dict[str, list[float]] = {}
        self.producers = self.consumers = 0
        if self.per_topic:
            self.subscription_families = _subscription_families()
            self.replication_families = _replication_families()

    def visit(self, topic) -> None:
        ns = topic.name.namespace_name
        stats = topic.ledger.write_stats
        row = self.writes.get(ns)
        if row is None:
            row = self.writes[ns] = [0.0] * (_N_LAT + _N_SIZE + 4)
        # Element-wise sums in C (map over two sequences) rather than a
        # Python += per bucket: a few % of the pass (45 to 42 ms over
        # 10,000 test topics); the rest is reading each topic.
        row[:_N_WRITE_SUMS] = map(add, row, (*stats.latency, *stats.sizes, stats.entries, stats.latency_sum_ms,
                                             stats.size_sum))
        stats = topic.ledger.read_stats
        row = self.reads.get(ns)
        if row is None:
            row = self.reads[ns] = [0.0] * (_N_READ + 4)
        row[:_N_READ_SUMS] = map(add, row, (*stats.latency, stats.reads, stats.entries, stats.misses,
                                            stats.latency_sum_ms))
        self.producers += len(topic.producers)
        subscriptions = topic.subscriptions
        if subscriptions:  # most written topics of a busy broker have none: no generator to run
            self.consumers += sum(len(s.consumers) for s in subscriptions.values())
        if self.per_topic:
            self._subscriptions(topic, ns)
            self._replication(topic, ns)

    def finish(self) -> list:
        families = [*self._storage(), *self._reads()]
        if self.per_topic:
            families += [*self.subscription_families, *self.replication_families]
        self.collector._rates.keep_only(self.keys)
        families += self._broker()
        return families

    def _storage(self) -> list:
        cluster, rates_of = self.cluster, self.collector._rates
        latency = [GaugeMetricFamily(n, "Entries per second written within this latency (ms)", labels=NS)
                   for n in LATENCY_NAMES]
        sizes = [GaugeMetricFamily(n, "Entries per second of this size", labels=NS) for n in SIZE_NAMES]
        lat_count = GaugeMetricFamily("pulsar_storage_write_latency_count", "Entries written", labels=NS)
        lat_sum = GaugeMetricFamily("pulsar_storage_write_latency_sum", "Their write latencies, ms", labels=NS)
        size_count = GaugeMetricFamily("pulsar_entry_size_count", "Entries written", labels=NS)
        size_sum = GaugeMetricFamily("pulsar_entry_size_sum", "Their bytes", labels=NS)
        write_rate = GaugeMetricFamily("pulsar_storage_write_rate", "Entries written per second", labels=NS)
        for ns, row in sorted(self.writes.items()):
            key = ("storage", ns)
            self.keys.add(key)
            counts = row[:_N_LAT + _N_SIZE + 1]
            rates = rates_of.rates(key, self.now, counts)
            labels = [cluster, ns]
            for family, value in zip(latency + sizes, rates):
                family.add_metric(labels, value)
            entries, lat_ms, nbytes = row[_N_LAT + _N_SIZE], row[-3], row[-2]
            lat_count.add_metric(labels, entries)
            lat_sum.add_metric(labels, lat_ms)
            size_count.add_metric(labels, entries)
            size_sum.add_metric(labels, nbytes)
            write_rate.add_metric(labels, rates[-1])
        return [*latency, *sizes, lat_count, lat_sum, size_count, size_sum, write_rate]

    def _reads(self) -> list:
        cluster, rates_of = self.cluster, self.collector._rates
        latency = [GaugeMetricFamily(n, "Reads per second that took this long (ms), tail cache or file",
                                     labels=NS) for n in READ_LATENCY_NAMES]
        count = GaugeMetricFamily("pulsar_storage_read_latency_count", "Reads that returned entries", labels=NS)
        total = GaugeMetricFamily("pulsar_storage_read_latency_sum", "Their latencies, ms", labels=NS)
        read_rate = GaugeMetricFamily("pulsar_storage_read_rate", "Entries read per second", labels=NS)
        misses = GaugeMetricFamily("pulsar_storage_read_cache_misses_rate",
                                   "Reads per second that went past the tail cache to the file", labels=NS)
        n = _N_READ
        for ns, row in sorted(self.reads.items()):
            key = ("reads", ns)
            self.keys.add(key)
            rates = rates_of.rates(key, self.now, row[:n + 3])
            labels = [cluster, ns]
            for family, value in zip(latency, rates):
                family.add_metric(labels, value)
            count.add_metric(labels, row[n])
            total.add_metric(labels, row[-1])
            read_rate.add_metric(labels, rates[n + 1])
            misses.add_metric(labels, rates[n + 2])
        return [*latency, count, total, read_rate, misses]

    def _subscriptions(self, topic, ns: str) -> None:
        rate_out, thr_out, redeliver, consumers = self.subscription_families
        for sub in list(topic.subscriptions.values()):
            key = ("sub", str(topic.name), sub.name)
            self.keys.add(key)
            r_out, r_bytes, r_redeliver = self.collector._rates.rates(key, self.now, [sub.msg_out, sub.bytes_out,
                                                                                     sub.redelivered])
            labels = [self.cluster, ns, str(topic.name), sub.name]
            rate_out.add_metric(labels, r_out)
            thr_out.add_metric(labels, r_bytes)
            redeliver.add_metric(labels, r_redeliver)
            consumers.add_metric(labels, len(sub.consumers))

    def _replication(self, topic, ns: str) -> None:
        backlog, rate_out, thr_out, connected, delay, rate_in, thr_in = self.replication_families
        rates_of = self.collector._rates
        for producer in list(topic.producers.values()):
            if not getattr(producer, "replicator", False):
                continue
            remote = producer.name.removeprefix("pulsar.repl.")  # the remote's replicator, named after it
            key = ("repl-in", str(topic.name), remote)
            self.keys.add(key)
            r_in, r_bytes = rates_of.rates(key, self.now, [producer.msg_in, producer.bytes_in])
            labels = [self.cluster, ns, str(topic.name), remote]
            rate_in.add_metric(labels, r_in)
            thr_in.add_metric(labels, r_bytes)
        for remote, replicator in list(getattr(topic, "replicators", {}).items()):
            key = ("repl", str(topic.name), remote)
            self.keys.add(key)
            r_out, r_bytes = rates_of.rates(key, self.now, [replicator.msg_out, replicator.bytes_out])
            labels = [self.cluster, ns, str(topic.name), remote]
            backlog.add_metric(labels, replicator.cursor.backlog())
            rate_out.add_metric(labels, r_out)
            thr_out.add_metric(labels, r_bytes)
            connected.add_metric(labels, 1 if replicator.is_connected() else 0)
            delay.add_metric(labels, replicator.delay_seconds())

    def _broker(self) -> list:
        cluster, service = self.cluster, self.service
        producers = GaugeMetricFamily("pulsar_broker_producers_count", "Producers attached to this broker",
                                      labels=["cluster"])
        consumers = GaugeMetricFamily("pulsar_broker_consumers_count", "Consumers attached to this broker",
                                      labels=["cluster"])
        producers.add_metric([cluster], self.producers)
        consumers.add_metric([cluster], self.consumers)
        families = [producers, consumers]
        if service is None:
            return families
        families.append(_histogram("pulsar_broker_request_topic_lookup_duration_seconds",
                                   "How long lookups took to answer (binary and HTTP)", service.lookup_seconds))
        member = service.cluster
        unloads = CounterMetricFamily("pulsar_lb_unload_bundle", "Bundles this broker moved to another",
                                      labels=["cluster"])
        splits = CounterMetricFamily("pulsar_lb_bundles_split", "Bundles this broker split", labels=["cluster"])
        unloads.add_metric([cluster], member.transfers.count if member else 0)
        splits.add_metric([cluster], member.splits if member else 0)
        families += [unloads, splits]
        prepared = CounterMetricFamily("magnetar_bundle_topics_prepared",
                                       "Topics of bundles moving here loaded before this broker took them",
                                       labels=["cluster"])
        prepared.add_metric([cluster], service.topics_prepared)
        families.append(prepared)
        families.append(_histogram("magnetar_bundle_transfer_duration_seconds",
                                   "How long each bundle this broker moved took to reach its new owner",
                                   member.transfers if member else DurationCounts()))
        return families


def _subscription_families() -> tuple:
    rate_out = GaugeMetricFamily("pulsar_subscription_msg_rate_out", "Messages dispatched per second", labels=SUB)
    thr_out = GaugeMetricFamily("pulsar_subscription_msg_throughput_out", "Bytes dispatched per second",
                                labels=SUB)
    redeliver = GaugeMetricFamily("pulsar_subscription_msg_rate_redeliver", "Messages redelivered per second",
                                  labels=SUB)
    consumers = GaugeMetricFamily("pulsar_subscription_consumers_count", "Attached consumers", labels=SUB)
    return rate_out, thr_out, redeliver, consumers


def _replication_families() -> tuple:
    backlog = GaugeMetricFamily("pulsar_replication_backlog", "Entries not yet sent to the remote cluster",
                                labels=REMOTE)
    rate_out = GaugeMetricFamily("pulsar_replication_rate_out", "Messages sent to the remote cluster per second",
                                 labels=REMOTE)
    thr_out = GaugeMetricFamily("pulsar_replication_throughput_out", "Bytes sent to the remote cluster per "
                                "second", labels=REMOTE)
    connected = GaugeMetricFamily("pulsar_replication_connected_count", "1 while the replicator's producer is "
                                  "connected", labels=REMOTE)
    delay = GaugeMetricFamily("pulsar_replication_delay_in_seconds", "Age of the oldest entry not yet stored "
                              "by the remote cluster (0: none waits)", labels=REMOTE)
    rate_in = GaugeMetricFamily("pulsar_replication_rate_in", "Messages received from the remote cluster per "
                                "second", labels=REMOTE)
    thr_in = GaugeMetricFamily("pulsar_replication_throughput_in", "Bytes received from the remote cluster per "
                               "second", labels=REMOTE)
    return backlog, rate_out, thr_out, connected, delay, rate_in, thr_in


def _histogram(name: str, doc: str, counts) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc)
    family.add_metric([], counts.cumulative(), counts.total_s)
    return family
