"""Free loopback ports for the harness: :mod:`magnetar.processes.ports`
(below the kernel's ephemeral range, one slice per pytest-xdist worker)."""
from __future__ import annotations

from magnetar.processes.ports import free_port, free_port_block  # noqa: F401
