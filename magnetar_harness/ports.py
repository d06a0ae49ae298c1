"""Free TCP ports on the loopback interface (best effort: free when asked)."""
from __future__ import annotations

import socket

from magnetar.processes.child import free_port


def free_port_block(count: int) -> int:
    """A first port p such that p..p+count-1 are free now (``cluster up``
    and ``geo up`` number their brokers' ports from one base)."""
    for _ in range(50):
        base = free_port()
        if base + count > 65000:
            continue
        ok = True
        for p in range(base, base + count):
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free block of ports")
