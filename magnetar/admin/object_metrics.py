"""Object storage's write path at ``/metrics``: how many PUTs, metadata
transactions and commits this broker made (``--storage object`` only; a
broker on segment files shows none of these series).

One commit is one PUT of one object holding every topic's entries gathered
for it, then one metadata transaction per 128 ledgers in it, so
``magnetar_object_puts_total`` over time is the PUT bill and stays within
``object_put_budget_per_s`` whatever the topic count (1000 /
``object_commit_interval_ms`` with only ``cost`` topics; docs/object-storage.md);
``magnetar_object_gets_total`` counts the ranged GETs of reads and compactions
(``magnetar_object_chunk_gets_total``: those of compacted chunk objects).
``magnetar_object_compactions_total{source}`` counts the sealed ledgers
compacted (from kept bytes, into an index object, from the store, or,
opened from the store, from local copies of its commit objects),
``magnetar_object_compactions_pending`` those waiting (a level that grows
while compactions fall behind the rollovers) and
``magnetar_object_kept_bytes`` the commit bytes kept for them.
The broker makes no fsync on object storage: etcd's own ``/metrics`` count
the WAL fsyncs the transactions cost (``etcd_disk_wal_fsync_duration_seconds``). ``magnetar_object_commit_phase_seconds{phase}``
says where a commit's time goes (gather, put, wait, transaction, receipts,
total: ``storage/object/commit_timings.py``). Read at scrape time from the
backend's ``stats()`` (``storage/backend.py``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from magnetar.admin.backend_stats import backend_stats

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker


class ObjectStorageCollector:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def collect(self):
        stats = backend_stats(self.broker, "object")
        if stats is None:
            return
        counters = stats.counters
        yield CounterMetricFamily("magnetar_object_puts", "Objects written (PUTs that succeeded)",
                                  value=counters["puts"])
        yield CounterMetricFamily("magnetar_object_commit_transactions",
                                  "Metadata transactions that committed objects (tried, retries included)",
                                  value=counters["transactions"])
        yield CounterMetricFamily("magnetar_object_commit_transactions_chained",
                                  "Of those, sent while the previous commit's was unanswered, on the condition "
                                  "that it landed (storage/object/commit_chain.py)",
                                  value=counters.get("chained", 0))
        yield CounterMetricFamily("magnetar_object_commit_chain_resends",
                                  "Chained transactions that reached the store before the one they follow, sent "
                                  "again once it landed", value=counters.get("chain_resends", 0))
        yield CounterMetricFamily("magnetar_object_commit_chain_retries",
                                  "Chained transactions whose compare failed otherwise (a fenced ledger), tried "
                                  "again unchained once the previous commit ended",
                                  value=counters.get("chain_retries", 0))
        yield CounterMetricFamily("magnetar_object_commits", "Commits done (one object each)",
                                  value=counters["commits"])
        yield CounterMetricFamily("magnetar_object_gets", "Ranged GETs of reads and compactions (coalesced per object)",
                                  value=counters["gets"])
        yield CounterMetricFamily("magnetar_object_chunk_gets",
                                  "Of those, GETs of compacted ledgers' chunk objects (the rest: of commit objects)",
                                  value=counters.get("chunk_gets", 0))
        yield CounterMetricFamily("magnetar_object_put_budget_wait_seconds",
                                  "Time commits waited for a token of the PUT budget (object_put_budget_per_s)",
                                  value=counters["budget_wait_s"])
        yield GaugeMetricFamily("magnetar_object_put_budget_rate",
                                "The PUT budget's rate now, in PUTs a second (0: no budget): while the loop waits "
                                "for a core it searches down to object_put_budget_floor_per_s",
                                value=counters.get("put_budget_rate", 0))
        yield CounterMetricFamily("magnetar_object_loop_core_wait_seconds",
                                  "Time the broker's loop was runnable but waited for a core, as the PUT budget's "
                                  "pacer read it (storage/object/budget_pacer.py)",
                                  value=counters.get("core_wait_s", 0))
        compacted = CounterMetricFamily("magnetar_object_compactions",
                                        "Sealed ledgers compacted, by where their bytes came from: kept (this "
                                        "writer's commits, no GET), indexed (an index object, no data moved), "
                                        "store (chunks from GETs), copied (opened from the store: chunks from local "
                                        "copies of its commit objects)", labels=["source"])
        for source in ("kept", "indexed", "store", "copied"):
            compacted.add_metric([source], counters.get(f"compacted_{source}", 0))
        yield compacted
        yield CounterMetricFamily("magnetar_object_compactions_failed",
                                  "Compactions that failed (the ledger is compacted when next sealed or opened)",
                                  value=counters.get("compactions_failed", 0))
        yield GaugeMetricFamily("magnetar_object_compactions_pending",
                                "Sealed ledgers whose compaction is running or waiting: growing, compactions "
                                "fall behind the rollovers", value=counters.get("compactions_pending", 0))
        yield GaugeMetricFamily("magnetar_object_kept_bytes",
                                "Commit bytes kept for the compaction of this writer's ledgers (in memory, or "
                                "in the spill on local disk: object_spill_max_bytes)",
                                value=counters.get("kept_bytes", 0))
        phases = HistogramMetricFamily("magnetar_object_commit_phase_seconds",
                                       "Time of each phase of a commit (total: first batch to last receipt)",
                                       labels=["phase"])
        for name, histogram in stats.histograms.items():
            phases.add_metric([name], histogram.cumulative(), histogram.sum)
        yield phases
        yield CounterMetricFamily("magnetar_object_prepared_ledgers_swept",
                                  "Ledgers a previous owner created ahead of a rollover and never recorded "
                                  "(a crash, a takeover), deleted when this broker recovered their topic",
                                  value=self.broker.factory.prepared_ledgers_swept)
