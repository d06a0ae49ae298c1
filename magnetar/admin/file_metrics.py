"""Segment files' write path at ``/metrics``: the fsyncs a broker on files
makes (``--storage file`` only; a broker on object storage shows none of
these series).

With the journal (the default) a group commit costs one fdatasync of the
journal whatever the number of topics it wrote, and the background
checkpoint syncs each segment file written since the last one:
``magnetar_file_fsyncs_total{kind="journal"|"segment"}``. Without it
every segment file written is synced per group commit (all ``segment``).
``magnetar_file_group_commits_total`` counts the writer's rounds, so
fsyncs per group commit is one over the other. ``magnetar_file_reopens_total``
counts segment files opened again after the open-file pool closed them
(``magnetar_file_open_files_capacity``: its size). Read at scrape time from
the backend's ``stats()`` (``storage/backend.py``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from magnetar.admin.backend_stats import backend_stats

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker


class FileStorageCollector:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def collect(self):
        stats = backend_stats(self.broker, "file")
        if stats is None:
            return
        counters = stats.counters
        fsyncs = CounterMetricFamily("magnetar_file_fsyncs", "fsyncs of the write path, by file kind",
                                     labels=["kind"])
        fsyncs.add_metric(["journal"], counters.get("journal_fsyncs", 0))
        fsyncs.add_metric(["segment"], counters.get("segment_fsyncs", 0))
        fsyncs.add_metric(["direct"], counters.get("direct_fsyncs", 0))
        yield fsyncs
        yield CounterMetricFamily("magnetar_file_group_commits", "Rounds of the group-commit writer",
                                  value=counters.get("group_commits", 0))
        yield CounterMetricFamily("magnetar_file_reopens",
                                  "Segment files opened again after the open-file pool closed them (churn: the "
                                  "pool is smaller than the files written)", value=counters.get("reopens", 0))
        yield GaugeMetricFamily("magnetar_file_open_files_capacity",
                                "Segment files the pool keeps open at most (max_open_ledger_files, or sized "
                                "from the open-file limit)", value=counters.get("open_files_capacity", 0))
        yield CounterMetricFamily("magnetar_journal_checkpoints",
                                  "Journal checkpoints (segment files synced, the journal trimmed behind them)",
                                  value=counters.get("checkpoints", 0))
        yield CounterMetricFamily("magnetar_journal_written_bytes", "Bytes appended to the journal",
                                  value=counters.get("journal_bytes", 0))
