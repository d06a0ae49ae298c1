"""Local regions: ``magnetar geo up`` as a child process (one etcd, N
one-broker clusters sharing a configuration store), read from the lines it
prints, stopped with SIGTERM like a user's Ctrl-C.

Failure modes: ``start`` raises AssertionError with the command's output
when it does not print ``ready`` within its timeout.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .ports import free_port_block
from .up_command import admin_call, start_up, stop_up

LINE = re.compile(r"region (\S+) broker (\d+) (pulsar://\S+) (http://\S+) pid=(\d+)")


@dataclass
class Region:
    name: str
    service_url: str
    admin_url: str
    pid: int

    def admin(self, path: str, method: str = "GET", body=None, token: str | None = None):
        return admin_call(self.admin_url, path, method, body, token)


class LocalRegions:
    def __init__(self, base: Path, regions: int = 3, broker_config: str | None = None) -> None:
        self.base = base
        self.broker_config = broker_config
        self.count = regions
        self.regions: list[Region] = []
        self.output: list[str] = []
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0) -> "LocalRegions":
        port = free_port_block(20 * self.count)  # one block: the two halves cannot overlap
        admin = port + 10 * self.count
        args = ["geo", "up", "--regions", str(self.count),
                "--data-dir", str(self.base), "--port", str(port), "--admin-port", str(admin),
                "--session-ttl", "3"]
        if self.broker_config:
            self.base.mkdir(parents=True, exist_ok=True)
            config = self.base / "broker.toml"
            config.write_text(self.broker_config)
            args += ["--broker-config", str(config)]
        self.proc = start_up(args, self._read, self.output, timeout, "regions",
                             lambda: [r.pid for r in self.regions])
        return self

    def _read(self, line: str) -> None:
        m = LINE.match(line)
        if m:
            self.regions.append(Region(m[1], m[3], m[4], int(m[5])))

    def stop(self, timeout: float = 60.0) -> None:
        stop_up(self.proc, [r.pid for r in self.regions], timeout)


def replicated_namespace(regions: "LocalRegions", namespace: str) -> None:
    """A tenant allowed in every region and ``namespace`` replicated between them all."""
    names = [r.name for r in regions.regions]
    first = regions.regions[0]
    first.admin(f"/admin/v2/tenants/{namespace.split('/')[0]}", "PUT", {"allowedClusters": names})
    first.admin(f"/admin/v2/namespaces/{namespace}", "PUT", {"replication_clusters": names})
