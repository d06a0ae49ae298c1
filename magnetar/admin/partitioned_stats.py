"""A partitioned topic's stats: its partitions' stats added up, as Pulsar's
PartitionedTopicStats does.

Counters, rates, sizes and backlogs are summed; ``averageMsgSize`` is
computed again from the sums; the last-something timestamps take the newest
partition's, the earliest publish times the oldest non-zero one; flags are
true when any partition's is; names and types come from the first partition
that has them. Subscriptions and replication are merged by name (a
subscription on a partitioned topic is one per partition), publishers by
producer name (a partitioned producer has one name on every partition),
consumers are listed from every partition. Pure functions over the
per-partition documents: no I/O.
"""
from __future__ import annotations

from typing import Any, Iterable

#: Keys merged by name (documents of documents).
_BY_NAME = ("subscriptions", "replication")


def merge_partitions(per_partition: dict[str, dict], partitions: int) -> dict:
    """The totals of ``per_partition`` (partition name -> its ``/stats``), with
    ``metadata.partitions``; the caller adds ``partitions`` (perPartition)."""
    total = _merge(list(per_partition.values()))
    total["publishers"] = _merge_by(
        (p for s in per_partition.values() for p in s.get("publishers", [])), "producerName")
    total["metadata"] = {"partitions": partitions}
    return total


def _merge(docs: list[dict]) -> dict:
    merged: dict[str, Any] = {}
    for doc in docs:
        for key, value in doc.items():
            if key not in merged:
                merged[key] = _copy(key, value)
            else:
                merged[key] = _combine(key, merged[key], value)
    for rate, throughput in (("msgRateIn", "msgThroughputIn"),):
        if rate in merged and "averageMsgSize" in merged:
            merged["averageMsgSize"] = merged[throughput] / merged[rate] if merged[rate] else 0.0
    return merged


def _copy(key: str, value: Any) -> Any:
    if key in _BY_NAME and isinstance(value, dict):
        return {name: dict(doc) if isinstance(doc, dict) else doc for name, doc in value.items()}
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def _combine(key: str, a: Any, b: Any) -> Any:
    if key in _BY_NAME and isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for name, doc in b.items():
            out[name] = _merge([out[name], doc]) if name in out and isinstance(doc, dict) else doc
        return out
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) or bool(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if key.startswith("earliest"):
            return min(x for x in (a, b) if x) if (a or b) else 0
        if key.endswith("Timestamp") or key.startswith("oldest") or key in ("topicEpoch",):
            return max(a, b)
        if key.startswith("backlogQuotaLimit"):
            return a  # the same policy on every partition
        return a + b
    if isinstance(a, list) and isinstance(b, list):
        return a + b
    return a if a not in (None, "") else b


def _merge_by(docs: Iterable[dict], name_key: str) -> list[dict]:
    merged: dict[str, dict] = {}
    for doc in docs:
        name = doc.get(name_key)
        merged[name] = _merge([merged[name], doc]) if name in merged else dict(doc)
    return list(merged.values())
