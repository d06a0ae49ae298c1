"""The host's speed through a sending: a fixed unit of pure-Python work,
timed every half second in a process of its own.

Why: on a shared virtual machine the same code runs at different speeds
from minute to minute (neighbours on the physical host, its clocks) with
little or no steal time to show for it. On this project's 2-core machine
(2026-12-02) a fixed CPU loop in two processes, nothing else running, ran
205 to 330 units a second per 10 s window over 8 minutes, with 0.3 % steal.
A sending whose later windows cost more per message says something about
the broker only beside what the host gave in each window.

The probe (``python -m bench.host_speed``): every ``--every`` seconds the
fastest of three runs of :func:`unit` (the fastest: a run the scheduler
cut in two measures the queue, not the host), printed as ``<monotonic s>
<µs>``, one line each, on ``time.monotonic()`` (system-wide on Linux: the
bench's clock). It costs about 1 % of a core.

:class:`HostSpeed` runs the probe for a ``with`` block; ``between(a, b)``
is the median unit (µs) of the readings in ``[a, b]``. Failure modes: a
probe that cannot start or dies leaves fewer readings; ``between`` is None
where there are none. Never raises into the bench.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time

#: Iterations of :func:`unit`'s loop: about 1.5 ms on this machine's cores.
UNIT_LOOPS = 30_000
EVERY_S = 0.5


def unit(loops: int = UNIT_LOOPS) -> float:
    """Seconds one fixed run of arithmetic in a local loop takes (no I/O,
    no allocation beyond small ints): the host's speed for pure Python."""
    began = time.perf_counter()
    x = 0
    for i in range(loops):
        x += i * i
    return time.perf_counter() - began


def probe(every: float, out=sys.stdout, count: int | None = None) -> None:
    """Print ``<monotonic s> <µs>`` every ``every`` s (``count`` readings, or
    until killed)."""
    n = 0
    while count is None or n < count:
        fastest = min(unit() for _ in range(3))
        out.write(f"{time.monotonic():.3f} {fastest * 1e6:.0f}\n")
        out.flush()
        n += 1
        time.sleep(every)


class HostSpeed:
    """``with HostSpeed() as h:`` the probe runs in a child process;
    ``h.samples``: its ``(t, µs)`` readings so far."""

    def __init__(self, every: float = EVERY_S) -> None:
        self.every = every
        self.samples: list[tuple[float, float]] = []
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> "HostSpeed":
        try:  # by path, with only the standard library: whatever the working directory
            self._proc = subprocess.Popen([sys.executable, __file__, "--every", str(self.every)],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return self
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                t, us = line.split()
                self.samples.append((float(t), float(us)))
            except ValueError:
                continue

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(10)
        if self._reader is not None:
            self._reader.join(10)

    def between(self, begin: float, end: float) -> float | None:
        """Median unit (µs) of the readings taken in ``[begin, end]``; None without any."""
        inside = [us for t, us in self.samples if begin <= t <= end]
        return round(statistics.median(inside)) if inside else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=EVERY_S, help="seconds between readings")
    parser.add_argument("--count", type=int, default=None, help="readings to take (default: until killed)")
    args = parser.parse_args()
    if args.every <= 0:
        parser.error("--every must be a positive number of seconds")
    try:
        probe(args.every, count=args.count)
    except (BrokenPipeError, KeyboardInterrupt):
        pass


if __name__ == "__main__":
    main()
