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
"""
from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field


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
