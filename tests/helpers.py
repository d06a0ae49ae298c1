"""What the tests share, in one place: waiting on conditions with a
deadline. Fixtures are in the conftest.py files; the processes (brokers,
clusters, regions, etcd) are magnetar_harness's."""
from __future__ import annotations

from magnetar_harness.waiting import wait_for

__all__ = ["wait_for"]
