"""The two systems under test, as processes on loopback with temp storage.

- :class:`MagnetarServer`: ``magnetar standalone`` through the process
  harness (:mod:`magnetar_harness.broker`: free ports, own data dir), with a sync policy.
- :class:`NatsServer`: Debian's ``nats-server`` with JetStream file storage
  in a temp dir, on a free loopback port. :func:`ensure_nats_server` installs
  it with apt when missing and running as root.

Durability: NATS 2.9 (Debian's version) has no ``sync_interval`` setting: its
file store writes each message to the OS and fsyncs on its own schedule
(block rollover and a periodic background sync), never before the PubAck.
That matches Magnetar's ``interval`` policy, not ``always`` (fdatasync before
every receipt, group commit). The bench runs Magnetar both ways and labels
which pair is like-for-like.

Failure modes: a server that does not accept connections within 30 s raises
``RuntimeError`` with its log tail; stop() always reaps the process.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import sys
import time
from pathlib import Path

from magnetar_harness.broker import standalone_broker
from magnetar_harness.ports import free_port

APT_COMMAND = "apt-get update && apt-get install -y nats-server"


def wait_port(port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Poll until something accepts on 127.0.0.1:port (every 2 ms)."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        if time.monotonic() > deadline:
            raise RuntimeError(f"nothing listening on port {port} after {timeout} s")
        time.sleep(0.002)


def ensure_nats_server() -> str | None:
    """Path of nats-server, installing it with apt if missing and root; None if unavailable."""
    path = shutil.which("nats-server") or ("/usr/sbin/nats-server" if os.path.exists("/usr/sbin/nats-server") else None)
    if path:
        return path
    if os.geteuid() != 0:
        print(f"nats-server is not installed; run as root: {APT_COMMAND}", file=sys.stderr)
        return None
    print(f"installing nats-server: {APT_COMMAND}", file=sys.stderr)
    subprocess.run(["apt-get", "update", "-qq"], check=False)
    subprocess.run(["apt-get", "install", "-y", "-qq", "nats-server"], check=False,
                   env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    return shutil.which("nats-server") or ("/usr/sbin/nats-server" if os.path.exists("/usr/sbin/nats-server") else None)


def nats_version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True)
    return out.stdout.strip() or out.stderr.strip()


class MagnetarServer:
    name = "magnetar"

    def __init__(self, workdir: Path, sync_policy: str = "always") -> None:
        self.sync_policy = sync_policy
        self.broker = standalone_broker(Path(workdir) / "data", ["--sync-policy", sync_policy, "--log-level", "WARNING"])

    def start(self) -> "MagnetarServer":
        self.broker.start()
        return self

    @property
    def url(self) -> str:
        return self.broker.service_url

    @property
    def pid(self) -> int:
        return self.broker.proc.pid

    @staticmethod
    def command(data_dir: Path, port: int, sync_policy: str = "always") -> list[str]:
        """The command line of a broker on fixed ports (cold-start timing polls the port itself)."""
        return [sys.executable, "-m", "magnetar.cli", "standalone", "--data-dir", str(data_dir),
                "--port", str(port), "--admin-port", str(free_port()), "--advertised-address", "127.0.0.1",
                "--sync-policy", sync_policy, "--log-level", "WARNING"]

    def stop(self) -> None:
        if self.broker.alive:
            self.broker.stop()


@contextlib.contextmanager
def magnetar_broker(url: str | None = None, sync_policy: str = "always"):
    """``(service_url, pid)`` of the broker the single-purpose bench scripts
    measure: the running one at ``url`` (pid None), or else a fresh
    standalone broker in a temporary directory, stopped and removed on exit."""
    if url is not None:
        yield url, None
        return
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-") as tmp:
        server = MagnetarServer(Path(tmp), sync_policy).start()
        try:
            yield server.url, server.pid
        finally:
            server.stop()


class NatsServer:
    name = "nats"

    def __init__(self, binary: str, workdir: Path, port: int | None = None) -> None:
        self.binary = binary
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir / "nats.log"

    def write_config(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "nats.conf"
        conf.write_text(
            f"listen: 127.0.0.1:{self.port}\n"
            f"max_payload: 8MB\n"
            f"jetstream {{\n  store_dir: \"{self.workdir / 'js'}\"\n  max_file_store: 20GB\n"
            f"  max_memory_store: 256MB\n}}\n"
        )
        return conf

    def spawn(self) -> subprocess.Popen:
        conf = self.write_config()
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([self.binary, "-c", str(conf)], stdout=log, stderr=log)
        return self.proc

    def start(self) -> "NatsServer":
        self.spawn()
        try:
            wait_port(self.port, 30, self.proc)
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(f"{exc}; log:\n{self.log_path.read_text()[-3000:]}") from None
        return self

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None


async def create_streams(url: str, topics: list[str], max_msgs: int = -1) -> None:
    """One file-storage stream per topic (subject = topic name), replacing any old one."""
    import nats
    from nats.js.api import StorageType, StreamConfig

    from bench.nats_driver import stream_name

    nc = await nats.connect(url)
    js = nc.jetstream()
    for topic in topics:
        name = stream_name(topic)
        try:
            await js.delete_stream(name)
        except Exception:
            pass
        await js.add_stream(StreamConfig(name=name, subjects=[topic], storage=StorageType.FILE, max_msgs=max_msgs))
    await nc.close()


def require_compiled() -> None:
    """The brokers this bench starts run this checkout: refuse when its
    compiled hot path is stale or missing (the figures would be the Python
    twins')."""
    from magnetar.protocol.compiled import implementation
    from magnetar.storage.file import round_io

    if implementation() != "compiled" or round_io.implementation() != "compiled":
        raise SystemExit("the compiled hot path is not what runs here (built from older sources, or "
                         "MAGNETAR_PURE_PYTHON set): run make install first")
