"""CPU time and resident memory of a process, read from ``/proc`` (Linux).

Failure modes: a process that exited (or a system without ``/proc``) yields
None rather than an exception, so a report can say "unknown".
"""
from __future__ import annotations

import os

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds used so far by ``pid`` (all its threads)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode()
    except OSError:
        return None
    # The command name (field 2) may contain spaces: split after its ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_bytes(pid: int) -> int | None:
    """VmRSS of ``pid`` in bytes."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class CpuMeter:
    """CPU utilisation of a process between :meth:`start` and :meth:`stop`,
    as a percentage of one core (200 % = two cores busy)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._c0: float | None = None
        self._t0 = 0.0
        self.percent: float | None = None
        #: CPU seconds used between start and stop (None if unknown).
        self.seconds: float | None = None

    def start(self) -> "CpuMeter":
        import time

        self._c0 = cpu_seconds(self.pid)
        self._t0 = time.monotonic()
        return self

    def stop(self) -> float | None:
        import time

        c1 = cpu_seconds(self.pid)
        elapsed = time.monotonic() - self._t0
        if self._c0 is None or c1 is None or elapsed <= 0:
            self.percent = self.seconds = None
        else:
            self.seconds = c1 - self._c0
            self.percent = round(100 * self.seconds / elapsed, 1)
        return self.percent


def machine_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores since boot, from ``/proc/stat``."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already inside user/nice
    return total - idle, total


def busy_percent(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of all cores busy between two :func:`machine_jiffies` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round(100 * (after[0] - before[0]) / (after[1] - before[1]), 1)
