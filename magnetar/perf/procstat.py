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
            self.percent = None
        else:
            self.percent = round(100 * (c1 - self._c0) / elapsed, 1)
        return self.percent
