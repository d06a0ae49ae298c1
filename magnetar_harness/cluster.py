"""A real local cluster: ``magnetar cluster up`` as a child process (its own
etcd unless given one, N broker processes), read from the lines it prints,
stopped with SIGTERM like a user's Ctrl-C.

Failure modes: ``start`` raises AssertionError with the command's output and
the brokers' log tails when it does not print ``ready`` within its timeout.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .ports import free_port_block
from .up_command import admin_call, start_up, stop_up

LINE = re.compile(r"broker (\d+) (pulsar://\S+) (http://\S+) pid=(\d+)")


@dataclass
class Member:
    index: int
    service_url: str
    admin_url: str
    pid: int

    @property
    def broker_id(self) -> str:
        return self.admin_url.removeprefix("http://")


class LocalCluster:
    """``cluster up`` on ``base``; :attr:`members` once started (a restarted
    member replaces its line)."""

    def __init__(self, base: Path, brokers: int = 3, session_ttl: float = 3.0, etcd: str | None = None,
                 broker_config: str | None = None, name: str = "cluster",
                 configuration_store: str | None = None, storage: str | None = None,
                 object_store: str | None = None, restart_exited: bool = False, root: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        #: Added to ``cluster up``'s environment, so to its brokers' (a bench's collector census).
        self.env = env
        #: The checkout whose code ``cluster up`` and its brokers run (None: this one).
        self.root = root
        #: ``cluster up --restart-exited``: a broker that exits is started again at once.
        #: (Not named ``restart_exited``: that is the method that sends SIGHUP.)
        self.restarts_exited_at_once = restart_exited
        #: ``cluster up --storage`` (file, object) and ``--object-store URL``.
        self.storage = storage
        self.object_store = object_store
        #: From the ``objectstore http://... bucket=...`` line, when it started one.
        self.objectstore_endpoint: str | None = None
        self.objectstore_bucket: str | None = None
        self.broker_config = broker_config
        self.name = name
        self.configuration_store = configuration_store
        self.base = base
        self.brokers = brokers
        self.session_ttl = session_ttl
        self.etcd = etcd
        self.members: list[Member] = []
        self.etcd_url: str | None = None
        self.proc: subprocess.Popen | None = None
        self.output: list[str] = []

    def start(self, timeout: float = 90.0) -> "LocalCluster":
        port = free_port_block(2 * self.brokers)  # one block: the two halves cannot overlap
        admin = port + self.brokers
        args = ["cluster", "up", "--brokers", str(self.brokers),
                "--data-dir", str(self.base), "--port", str(port), "--admin-port", str(admin),
                "--session-ttl", str(self.session_ttl)]
        args += ["--name", self.name]
        if self.etcd:
            args += ["--etcd", self.etcd]
        if self.configuration_store:
            args += ["--configuration-store", self.configuration_store]
        if self.storage:
            args += ["--storage", self.storage]
        if self.object_store:
            args += ["--object-store", self.object_store]
        if self.restarts_exited_at_once:
            args += ["--restart-exited"]
        if self.broker_config:
            config = self.base.parent / "broker.toml"
            config.write_text(self.broker_config)
            args += ["--broker-config", str(config)]
        self.proc = start_up(args, self._read, self.output, timeout, "cluster",
                             lambda: [m.pid for m in self.members], self.logs, root=self.root,
                             env=self.env)
        return self

    def _read(self, line: str) -> None:
        if line.startswith("etcd "):
            self.etcd_url = line.split()[1]
        if line.startswith("objectstore "):
            self.objectstore_endpoint = line.split()[1]
            self.objectstore_bucket = line.split()[2].removeprefix("bucket=")
        m = LINE.match(line)
        if m:  # a restarted member prints its line again: it replaces the old one
            member = Member(int(m[1]), m[2], m[3], int(m[4]))
            self.members[:] = [x for x in self.members if x.index != member.index] + [member]
            self.members.sort(key=lambda x: x.index)

    def restart_exited(self) -> None:
        """Ask ``cluster up`` to start its exited brokers again (SIGHUP, as docs/cluster.md says)."""
        self.proc.send_signal(signal.SIGHUP)

    def restart_member(self, index: int = 0, timeout: float = 120.0, sig: int = signal.SIGTERM) -> Member:
        """Stop member ``index`` cleanly (SIGTERM; ``sig=signal.SIGKILL``: a
        crash) and have ``cluster up`` start it again on the same ports and
        files (SIGHUP); its new :class:`Member` once it printed its line
        again. Its caches start empty. AssertionError with the output if it
        does not exit or start within ``timeout``."""
        old = next(m for m in self.members if m.index == index)
        os.kill(old.pid, sig)
        deadline = time.monotonic() + timeout
        said = f"(pid {old.pid}) exited"
        while not any(said in line for line in self.output):
            assert time.monotonic() < deadline, f"broker pid {old.pid} did not exit:\n" + "\n".join(self.output[-20:])
            time.sleep(0.05)
        self.restart_exited()
        while (new := next(m for m in self.members if m.index == index)).pid == old.pid:
            assert time.monotonic() < deadline, "the broker did not start again:\n" + "\n".join(
                self.output[-20:]) + self.logs()
            time.sleep(0.05)
        return new

    def logs(self) -> str:
        out = []
        for log in sorted(self.base.glob("broker-*.log")):
            out.append(f"\n--- {log.name} (tail)\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:]))
        return "".join(out)

    def stop(self, timeout: float = 60.0) -> int | None:
        return stop_up(self.proc, [m.pid for m in self.members], timeout)

    def admin(self, member: Member, path: str, method: str = "GET", body=None):
        return admin_call(member.admin_url, path, method, body)

    def lookups(self) -> int:
        """Lookups answered by all brokers (their pulsar_broker_lookup_answers_total)."""
        total = 0
        for m in self.members:
            text = urllib.request.urlopen(m.admin_url + "/metrics", timeout=10).read().decode()
            found = re.search(r"^pulsar_broker_lookup_answers_total (\S+)$", text, re.M)
            total += int(float(found.group(1))) if found else 0
        return total

    def owners(self, namespace: str = "public/default") -> dict:
        for m in self.members:
            try:
                return self.admin(m, f"/admin/v2/namespaces/{namespace}/bundles")["owners"]
            except (urllib.error.URLError, ConnectionError):
                continue
        raise AssertionError("no broker answers")

    def object_keys(self, prefix: str) -> list[str]:
        """Keys under ``prefix`` in the cluster's bucket, relative to the
        cluster's own prefix there ([] on files: no object store)."""
        if self.objectstore_endpoint is None:
            return []
        import asyncio

        from magnetar.objectstore.s3 import open_object_store

        async def listing() -> list[str]:
            store = open_object_store(f"s3://{self.objectstore_bucket}/{self.name}"
                                      f"?endpoint={self.objectstore_endpoint}")
            try:
                return [o.key for o in await store.list(prefix)]
            finally:
                await store.close()
        return asyncio.run(listing())
