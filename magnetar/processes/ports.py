"""Loopback ports for servers we start and may restart on the same address.

A port from ``bind(0)`` lies in the kernel's ephemeral range, where every
outgoing connection also gets its local port. A server stopped and started
again on it (etcd, SeaweedFS or a broker after a fault, a cluster's brokers
started one after another from a base port) can find it taken by some
client's socket in between, and fail to start. So ports here come from
below that range, where only explicit choices land; each pytest-xdist
worker draws from its own slice, so two workers never pick the same port,
and one process does not hand out a port again soon (not among its last
4,096).

Best effort, as any "free port": free when asked, not reserved.
"""
from __future__ import annotations

import collections
import os
import random
import socket

#: Used when the kernel's range cannot be read.
_EPHEMERAL_LOW = 32768
FLOOR = 10000
#: Ports handed out lately (a server may not have bound them yet); older ones
#: are either in use, which the bind check sees, or free again.
_RECENT = 4096
_handed: collections.OrderedDict[int, None] = collections.OrderedDict()


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return _EPHEMERAL_LOW


def worker_slice(low: int, high: int) -> tuple[int, int]:
    """This process's share of ``[low, high)``: all of it, or one xdist worker's."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    try:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
        index = int(worker[2:]) % count if worker.startswith("gw") else 0
    except ValueError:
        return low, high
    if count <= 1:
        return low, high
    width = (high - low) // count
    return low + index * width, low + (index + 1) * width


def _range() -> tuple[int, int]:
    high = ephemeral_low()
    if high - FLOOR < 2000:  # a kernel whose ephemeral range starts low: use what is above it
        low, high = 61000, 65000
    else:
        low = FLOOR
    return worker_slice(low, high)


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """A first port p such that p..p+count-1 are free now (see the module
    docstring). Raises RuntimeError when 200 random tries find none."""
    low, high = _range()
    for _ in range(200):
        base = random.randrange(low, max(low + 1, high - count))
        block = range(base, base + count)
        if not any(p in _handed for p in block) and all(_bindable(host, p) for p in block):
            for p in block:
                _handed[p] = None
            while len(_handed) > _RECENT:
                _handed.popitem(last=False)
            return base
    raise RuntimeError(f"no free block of {count} ports in {low}..{high}")


def free_port(host: str = "127.0.0.1") -> int:
    """One port nothing listens on now (see the module docstring)."""
    return free_port_block(1, host)
