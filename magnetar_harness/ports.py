"""Free TCP ports on the loopback interface (best effort: free when asked).

``cluster up`` and ``geo up`` number their brokers' ports from one base and
start the brokers one after another, seconds apart. A block taken from the
kernel's ephemeral range (where ``bind(0)`` and every outgoing connection get
their ports) can be taken by a client socket in those seconds, and the last
broker then fails with "port already in use". So blocks come from below that
range, where only explicit choices land; each pytest-xdist worker draws from
its own slice, so two workers never pick the same block.
"""
from __future__ import annotations

import os
import random
import socket

from magnetar.processes.child import free_port  # noqa: F401  (re-exported: one place to get ports)

#: Used when the kernel's range cannot be read.
_EPHEMERAL_LOW = 32768
_FLOOR = 10000


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return _EPHEMERAL_LOW


def _worker_slice(low: int, high: int) -> tuple[int, int]:
    """This process's share of ``[low, high)``: all of it, or one xdist worker's."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return low, high
    index = int(worker[2:]) % count
    width = (high - low) // count
    return low + index * width, low + (index + 1) * width


def _free(port: int) -> bool:
    with socket.socket() as t:
        try:
            t.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block(count: int) -> int:
    """A first port p such that p..p+count-1 are free now, below the ephemeral range.

    Raises RuntimeError when 200 random tries find no such block.
    """
    high = _ephemeral_low()
    if high - _FLOOR < 10 * count:  # a machine whose ephemeral range starts low: use what is above it
        low, high = 61000, 65000
    else:
        low = _FLOOR
    low, high = _worker_slice(low, high)
    for _ in range(200):
        base = random.randrange(low, max(low + 1, high - count))
        if all(_free(p) for p in range(base, base + count)):
            return base
    raise RuntimeError(f"no free block of {count} ports in {low}..{high}")
