"""A broker's load report: what the leader's shedder and splitter read.

Every ``load_balancer_report_interval_s`` a member turns its counters into
rates (:class:`LoadSampler`) and writes them into its registry record:

- ``cpu``: the broker process's CPU over the interval, in cores (1.0 = one
  core busy), and ``cpu_cores`` the machine's;
- ``memory_rss`` and ``memory_total``: resident and physical memory, bytes;
- ``msg_rate_in`` / ``msg_rate_out`` (msg/s) and ``throughput_in`` /
  ``throughput_out`` (bytes/s, payloads): the broker's network traffic;
- ``bundle_stats``: the same four rates and the loaded ``topics``, per
  bundle; ``bundles`` (msg/s in and out per bundle) and ``bundle_topics``
  are what the shedder and the automatic split read.

The shedder weighs a broker and a bundle by messages in plus messages out:
both directions cost a broker about the same per message, and unlike CPU the
figure can be split per bundle. Pure arithmetic plus two reads of the
process's own state (CPU time, /proc memory); nothing here fails but the
memory read, which falls back to the peak RSS off Linux.

The counters come from a pass over every loaded topic
(:func:`count_by_bundle`), a pass of :mod:`magnetar.broker.topic_walk`: in
one piece, at 10,000 loaded topics, it held the loop 25-140 ms every report
(its bundle placement above all), and the traffic queued behind it; in
chunks of 500 topics with a loop turn between, its bursts were still in
the publish p99 of a broker near its capacity. So each topic is read at its own
moment of the pass, not at one instant (a pass takes a few loop turns); a
topic loaded during the pass is counted from the next report, one unloaded
during it is still counted in this one. Each topic is read at about the
same moment of each pass, so its rates still cover one interval.
"""
from __future__ import annotations

import bisect
import os
import resource
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..topic_walk import visit_in_slices
from .bundles import Bundle, topic_hash

@dataclass
class BundleCounters:
    """Totals since the broker started, for one bundle's loaded topics."""
    msg_in: int = 0
    bytes_in: int = 0
    msg_out: int = 0
    bytes_out: int = 0
    topics: int = 0

    def add(self, msg_in: int, bytes_in: int, msg_out: int, bytes_out: int) -> None:
        self.msg_in += msg_in
        self.bytes_in += bytes_in
        self.msg_out += msg_out
        self.bytes_out += bytes_out
        self.topics += 1


async def count_by_bundle(topics: Sequence[Any], bounds_of: Callable[[str], list[int]]) -> dict[Bundle, BundleCounters]:
    """The traffic so far of ``topics`` (each with a ``name``, a
    :class:`~magnetar.broker.topic_name.TopicName`, and ``msg_in`` /
    ``bytes_in``, and ``msg_out`` / ``bytes_out`` if it dispatches), by
    bundle; ``bounds_of(namespace)``: the namespace's boundaries
    (:meth:`.layout.Layouts.bounds`).

    A pass of :mod:`magnetar.broker.topic_walk` (slices of about 2 ms, a
    bounded share of a busy loop). A topic is placed by the layout its
    namespace had when the pass first met that namespace, so one pass never
    counts a topic in a bundle a split already replaced beside its halves.
    Nothing here fails (a topic without ``msg_out`` counts 0 out)."""
    bounds_in_pass: dict[str, list[int]] = {}
    rows: dict[tuple[str, int], BundleCounters] = {}

    def count(topic: Any) -> None:
        name = topic.name
        namespace = name.namespace_name
        bounds = bounds_in_pass.get(namespace)
        if bounds is None:
            bounds = bounds_in_pass[namespace] = bounds_of(namespace)
        # The index in the layout, not a Bundle: a Bundle made and hashed
        # per topic was most of the pass's cost.
        key = (namespace, bisect.bisect_right(bounds, topic_hash(str(name))) - 1)
        row = rows.get(key)
        if row is None:
            row = rows[key] = BundleCounters()
        row.add(topic.msg_in, topic.bytes_in, getattr(topic, "msg_out", 0), getattr(topic, "bytes_out", 0))

    await visit_in_slices(topics, count)
    return {Bundle(namespace, bounds_in_pass[namespace][i], bounds_in_pass[namespace][i + 1]): row
            for (namespace, i), row in rows.items()}


def _memory() -> tuple[int, int]:
    page = os.sysconf("SC_PAGE_SIZE")
    total = os.sysconf("SC_PHYS_PAGES") * page
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page, total
    except OSError:  # not Linux: the peak is the best cheap figure
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, total


@dataclass
class LoadSampler:
    """Turns successive counter snapshots into a report of rates."""
    _previous: dict = field(default_factory=dict)
    _then: float = field(default_factory=time.monotonic)
    _cpu_then: float = field(default_factory=time.process_time)

    def sample(self, counters: dict, now: float | None = None) -> dict:
        """The report for the interval since the last call (or since creation).
        ``counters``: bundle (any key with a ``str``) -> :class:`BundleCounters`."""
        now = time.monotonic() if now is None else now
        cpu_now = time.process_time()
        elapsed = max(now - self._then, 1e-6)
        bundle_stats = {}
        for bundle, c in counters.items():
            before = self._previous.get(bundle, BundleCounters())
            # A topic unloaded meanwhile makes a counter go down: count 0, not negative.
            bundle_stats[str(bundle)] = {
                "msg_rate_in": max(0, c.msg_in - before.msg_in) / elapsed,
                "msg_rate_out": max(0, c.msg_out - before.msg_out) / elapsed,
                "throughput_in": max(0, c.bytes_in - before.bytes_in) / elapsed,
                "throughput_out": max(0, c.bytes_out - before.bytes_out) / elapsed,
                "topics": c.topics,
            }
        rss, total = _memory()
        report = {
            "cpu": max(0.0, cpu_now - self._cpu_then) / elapsed,
            "cpu_cores": os.cpu_count() or 1,
            "memory_rss": rss,
            "memory_total": total,
            "bundle_stats": bundle_stats,
            "bundles": {b: s["msg_rate_in"] + s["msg_rate_out"] for b, s in bundle_stats.items()},
            "bundle_topics": {b: s["topics"] for b, s in bundle_stats.items()},
            "topics_bundles": len(bundle_stats),
        }
        for key in ("msg_rate_in", "msg_rate_out", "throughput_in", "throughput_out"):
            report[key] = sum(s[key] for s in bundle_stats.values())
        self._previous, self._then, self._cpu_then = dict(counters), now, cpu_now
        return report


def message_load(report: dict) -> float:
    """What the shedder weighs a broker by: messages in plus out, per second."""
    return float(report.get("msg_rate_in", 0.0)) + float(report.get("msg_rate_out", 0.0))
