"""A Magnetar deployment on a test bed of hosts (:mod:`.hosts`): three
broker hosts, a 3-member etcd cluster on three hosts, SeaweedFS split into a
master, three volume servers (replication 001: every volume on two of
them, so losing one loses nothing, and the two left can still take new
volumes, so writes go on), a filer and an S3 gateway on hosts of their own,
a client host and, with ``spark=True``, a Spark standalone master and two
workers. Every broker, etcd member and SeaweedFS part runs the command line
and config file of ``deploy/`` (:mod:`.deployment`, docs/deploy.md), on its
standard ports (each host has its own addresses, so nothing collides).

Layout under ``base`` (short: SeaweedFS's unix sockets live there): one
directory per host, ``<host>/etc``, ``<host>/var/lib``, ``<host>/run``, its
logs ``<host>/<part>.log``; ``certs/`` the test CA and the brokers'
certificate; ``hosts.json`` the parts' addresses, ports and logs.

Failure modes: :class:`TopologyError` with the tail of the part's log when
a part does not become ready in time (everything started is left for the
caller's :meth:`Topology.stop`).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from . import deployment
from .hosts import HostBed, Process

BROKERS = ("broker-1", "broker-2", "broker-3")
ETCDS = ("etcd-1", "etcd-2", "etcd-3")
WEED_MASTER, WEED_FILER, WEED_S3 = "weed-master", "weed-filer", "weed-s3"
WEED_VOLUMES = ("weed-volume-1", "weed-volume-2", "weed-volume-3")
CLIENT = "client"
SPARK_MASTER = "spark-master"
SPARK_WORKERS = ("spark-worker-1", "spark-worker-2")
HOSTS = (*BROKERS, *ETCDS, WEED_MASTER, *WEED_VOLUMES, WEED_FILER, WEED_S3, CLIENT, SPARK_MASTER, *SPARK_WORKERS)

BUCKET = "magnetar"
CLUSTER_NAME = "hosts"
BROKER_PORT, BROKER_TLS_PORT, BROKER_ADMIN_PORT = 6650, 6651, 8080
ETCD_CLIENT_PORT = 2379
S3_PORT = 8333
SPARK_MASTER_PORT = 7077
START_TIMEOUT_S = 60.0
#: deploy/magnetar-broker.service's Restart=on-failure, RestartSec=2: how
#: the test bed restarts a broker that exits while it starts.
RESTART_SEC = 2.0
RESTARTS = 5


class TopologyError(RuntimeError):
    """A part of the deployment did not start."""


@dataclass
class Part:
    """One running part: where it is and what it serves."""
    role: str
    host: str
    address: str
    ports: dict[str, int]
    process: Process

    @property
    def log_path(self) -> Path:
        return self.process.log_path


@dataclass
class Topology:
    """The deployment on ``bed``; see the module docstring."""
    bed: HostBed
    base: Path
    parts: list[Part] = field(default_factory=list)
    #: Settings changed in every broker's rendered broker.toml
    #: (:func:`.deployment.override_toml`; a chaos run's shorter session).
    broker_settings: dict[str, str] = field(default_factory=dict)
    #: How long a part may take to serve once started (a chaos run on a
    #: loaded machine gives a restarted broker longer: it is niced).
    start_timeout_s: float = START_TIMEOUT_S
    _parts_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # -- addresses --------------------------------------------------------------------------
    def address(self, host: str) -> str:
        return self.bed.address(host)

    @property
    def etcd_endpoints(self) -> str:
        return ",".join(f"{self.address(h)}:{ETCD_CLIENT_PORT}" for h in ETCDS)

    @property
    def object_store_url(self) -> str:
        return f"s3://{BUCKET}/{CLUSTER_NAME}?endpoint=http://{self.address(WEED_S3)}:{S3_PORT}"

    @property
    def service_url(self) -> str:
        return ",".join(f"{self.address(h)}:{BROKER_PORT}" for h in BROKERS).join(("pulsar://", ""))

    @property
    def tls_service_url(self) -> str:
        return ",".join(f"{self.address(h)}:{BROKER_TLS_PORT}" for h in BROKERS).join(("pulsar+ssl://", ""))

    @property
    def ca_file(self) -> Path:
        return self.base / "certs" / "ca.cert.pem"

    def admin_url(self, broker: str) -> str:
        return f"http://{self.address(broker)}:{BROKER_ADMIN_PORT}"

    def root(self, host: str) -> Path:
        return self.base / host

    def part(self, role: str) -> Part:
        return next(p for p in self.parts if p.role == role)

    # -- the parts, in the doc's order -------------------------------------------------------
    def start(self, spark: bool = False) -> "Topology":
        """Every part, each waited for until it serves."""
        if self.base.exists():
            shutil.rmtree(self.base)
        self.base.mkdir(parents=True)
        for host in ETCDS:
            self.start_etcd(host)
        for host in ETCDS:
            self.wait_etcd(host)
        self.start_seaweed()
        self.make_certificates()
        for host in BROKERS:
            self.start_broker(host)
        for host in BROKERS:
            self.wait_broker(host)
        if spark:
            self.start_spark()
        self.write_description()
        return self

    def stop(self) -> None:
        self.bed.teardown()

    def _started(self, role: str, host: str, ports: dict[str, int], argv: list[str],
                 env: dict[str, str] | None = None) -> Part:
        log = self.root(host) / f"{role}.log"
        part = Part(role, host, self.address(host), ports, self.bed.start(host, role, argv, log, env=env))
        with self._parts_lock:  # faults of several nemeses restart parts at once
            self.parts = [p for p in self.parts if p.role != role] + [part]
        return part

    def _wait(self, role: str, ready, timeout: float | None = None, restart=None) -> None:
        """Until ``ready()``. A part that exits fails it (TopologyError with
        its log's tail), unless ``restart`` (its unit's ``Restart=on-failure``,
        as systemd would: after ``RESTART_SEC``, for a non-zero exit, up to
        :data:`RESTARTS` times)."""
        timeout = self.start_timeout_s if timeout is None else max(timeout, self.start_timeout_s)
        part = self.part(role)
        deadline = time.monotonic() + timeout
        restarts = 0
        while not ready():
            if not part.process.alive and restart is not None and part.process.popen.returncode != 0 \
                    and restarts < RESTARTS and time.monotonic() < deadline:
                # (A broker that finds etcd electing a leader at its start exits 1.)
                time.sleep(RESTART_SEC)
                restart()
                part = self.part(role)
                restarts += 1
                continue
            if not part.process.alive:
                raise TopologyError(f"{role} on {part.host} exited ({part.process.popen.returncode}); "
                                    f"{part.log_path}:\n{part.process.log_tail()}")
            if time.monotonic() > deadline:
                raise TopologyError(f"{role} on {part.host} not ready in {timeout:g} s; "
                                    f"{part.log_path}:\n{part.process.log_tail()}")
            time.sleep(0.1)

    # etcd: deploy/etcd.conf.yml + deploy/etcd.service on each etcd host.
    def start_etcd(self, host: str) -> Part:
        root = self.root(host)
        cluster = ",".join(f"{h}=http://{self.address(h)}:2380" for h in ETCDS)
        deployment.install_template("etcd.conf.yml", "/etc/etcd/etcd.conf.yml", root,
                                    {"ETCD_NAME": host, "HOST_ADDRESS": self.address(host),
                                     "ETCD_INITIAL_CLUSTER": cluster})
        argv = deployment.unit_command("etcd.service", root)
        return self._started(host, host, {"client": ETCD_CLIENT_PORT, "peer": 2380}, argv,
                             env={"GOMAXPROCS": "1"})

    def etcd_healthy(self, host: str) -> bool:
        return _http_ok(f"http://{self.address(host)}:{ETCD_CLIENT_PORT}/health", b'"health":"true"')

    def wait_etcd(self, host: str) -> None:
        self._wait(host, lambda: self.etcd_healthy(host))

    # SeaweedFS: deploy/seaweedfs-*.service with deploy/seaweedfs.env on each host.
    def _weed_env(self, host: str) -> None:
        deployment.write_env_file("seaweedfs.env", "/etc/seaweedfs/seaweedfs.env", self.root(host), {
            "HOST_ADDRESS": self.address(host),
            "SEAWEED_MASTER": f"{self.address(WEED_MASTER)}:9333",
            "SEAWEED_FILER": f"{self.address(WEED_FILER)}:8888",
            # Small volumes: the test bed's machine is shared. Room for every
            # volume on each server: with one lost (replication 001) the two
            # left must hold a copy of each, and a new volume needs a slot on
            # both (16 ran out in a soak: "Not enough data nodes found", no
            # writable volume, the store refused every PUT).
            "SEAWEED_VOLUME_SIZE_MB": "64", "SEAWEED_MAX_VOLUMES": "64",
        })
        for sub in ("var/lib/seaweedfs/master", "var/lib/seaweedfs/volume", "var/lib/seaweedfs/filer",
                    "run/seaweedfs"):
            (self.root(host) / sub).mkdir(parents=True, exist_ok=True)

    def start_weed(self, role: str, host: str, unit: str, ports: dict[str, int]) -> Part:
        self._weed_env(host)
        return self._started(role, host, ports, deployment.unit_command(unit, self.root(host)),
                             env={"GOMAXPROCS": "1"})

    def start_seaweed(self) -> None:
        self.start_weed(WEED_MASTER, WEED_MASTER, "seaweedfs-master.service", {"http": 9333, "grpc": 19333})
        self._wait(WEED_MASTER, lambda: _http_ok(f"http://{self.address(WEED_MASTER)}:9333/cluster/status"))
        for host in WEED_VOLUMES:
            self.start_volume(host)
        for host in WEED_VOLUMES:
            self.wait_volume(host)
        self.start_weed(WEED_FILER, WEED_FILER, "seaweedfs-filer.service", {"http": 8888, "grpc": 18888})
        self._wait(WEED_FILER, lambda: _http_ok(f"http://{self.address(WEED_FILER)}:8888/"))
        self.start_weed(WEED_S3, WEED_S3, "seaweedfs-s3.service", {"s3": S3_PORT, "grpc": 18333})
        self._wait(WEED_S3, self.bucket_ready)

    def start_volume(self, host: str) -> Part:
        return self.start_weed(host, host, "seaweedfs-volume.service", {"http": 8080, "grpc": 18080})

    def wait_volume(self, host: str) -> None:
        self._wait(host, lambda: _http_ok(f"http://{self.address(host)}:8080/status"))

    def store_writable(self, puts: int = 10) -> bool:
        """``puts`` PUTs of a small object through the S3 gateway in a row
        each succeed within 2 s (after a volume server is lost, the PUTs
        aimed at its volumes hang until the master drops it, about a minute
        when its link went down without a reset)."""
        for _ in range(puts):
            if _status(f"http://{self.address(WEED_S3)}:{S3_PORT}/{BUCKET}/probe/{time.monotonic_ns()}",
                       method="PUT", body=b"probe", timeout=2.0) != 200:
                return False
        return True

    def bucket_ready(self) -> bool:
        """The bucket answers a LIST (created first if missing: docs/deploy.md's one-time step)."""
        base = f"http://{self.address(WEED_S3)}:{S3_PORT}/{BUCKET}"
        if _status(base + "?list-type=2&max-keys=1") == 404:
            _status(base, method="PUT")
        return _status(base + "?list-type=2&max-keys=1") == 200

    # Brokers: deploy/broker.toml + deploy/magnetar-broker.service on each broker host.
    def make_certificates(self) -> None:
        """A test CA and one broker certificate naming the three broker addresses
        (``magnetar tls create-test-certs``, as docs/security.md says)."""
        hosts = [a for h in BROKERS for a in ("--host", self.address(h))]
        subprocess.run([sys.executable, "-m", "magnetar.cli", "tls", "create-test-certs",
                        "--dir", str(self.base / "certs"), *hosts], check=True, capture_output=True)

    def start_broker(self, host: str) -> Part:
        root = self.root(host)
        etc = root / "etc" / "magnetar"
        etc.mkdir(parents=True, exist_ok=True)
        for name in ("broker.cert.pem", "broker.key.pem", "ca.cert.pem"):
            shutil.copy(self.base / "certs" / name, etc / name)
        deployment.install_template("broker.toml", "/etc/magnetar/broker.toml", root, {
            "HOST_ADDRESS": self.address(host), "ETCD_ENDPOINTS": self.etcd_endpoints,
            "CLUSTER_NAME": CLUSTER_NAME, "OBJECT_STORE": self.object_store_url})
        if self.broker_settings:
            deployment.override_toml(etc / "broker.toml", self.broker_settings)
        (root / "var" / "lib" / "magnetar").mkdir(parents=True, exist_ok=True)
        argv = deployment.unit_command("magnetar-broker.service", root)
        return self._started(host, host, {"pulsar": BROKER_PORT, "pulsar+ssl": BROKER_TLS_PORT,
                                          "admin": BROKER_ADMIN_PORT, "https": 8443}, argv,
                             env={"PYTHONUNBUFFERED": "1"})

    def broker_ready(self, host: str) -> bool:
        """Its READY line printed (the log is this process's own: a restart
        renames the last one) and its health check answers. The whole log is
        searched: a broker that has run a while has its READY far behind."""
        part = self.part(host)
        try:
            with open(part.log_path, "rb") as log:
                ready = any(line.startswith(b"READY ") for line in log)
            return ready and _http_ok(f"{self.admin_url(host)}/admin/v2/brokers/health")
        except OSError:
            return False

    def wait_broker(self, host: str) -> None:
        self._wait(host, lambda: self.broker_ready(host), restart=lambda: self.start_broker(host))

    def restart_broker(self, host: str, wipe: bool = False) -> Part:
        """Start the broker of ``host`` again (``wipe``: its data directory deleted first)."""
        for proc in self.bed.on(host):
            proc.kill()
        data = self.root(host) / "var" / "lib" / "magnetar"
        if wipe and data.exists():
            shutil.rmtree(data)
        data.mkdir(parents=True, exist_ok=True)
        log = self.part(host).log_path
        with open(log, "a") as f:
            f.write("\n--- restarted by the test bed\n")
        log.rename(log.with_suffix(f".{int(time.time())}.log"))
        part = self.start_broker(host)
        self.wait_broker(host)
        return part

    # Spark: pyspark's standalone master and workers, small heaps.
    def start_spark(self) -> None:
        from .spark_hosts import spark_daemon_command, spark_env

        master = self.address(SPARK_MASTER)
        url = f"spark://{master}:{SPARK_MASTER_PORT}"
        self._started(SPARK_MASTER, SPARK_MASTER, {"spark": SPARK_MASTER_PORT, "ui": 8080},
                      spark_daemon_command("org.apache.spark.deploy.master.Master",
                                           ["--host", master, "--port", str(SPARK_MASTER_PORT), "--webui-port", "8080"]),
                      env=spark_env(master, self.root(SPARK_MASTER)))
        self._wait(SPARK_MASTER, lambda: _http_ok(f"http://{master}:8080/json/"))
        for host in SPARK_WORKERS:
            address = self.address(host)
            self._started(host, host, {"worker": 7078, "ui": 8081},
                          spark_daemon_command("org.apache.spark.deploy.worker.Worker",
                                               ["--host", address, "--port", "7078", "--webui-port", "8081",
                                                "--cores", "1", "--memory", "640m",
                                                "--work-dir", str(self.root(host) / "work"), url]),
                          env=spark_env(address, self.root(host)))
        self._wait(SPARK_MASTER, lambda: self.spark_workers() >= len(SPARK_WORKERS), timeout=90)

    @property
    def spark_master_url(self) -> str:
        return f"spark://{self.address(SPARK_MASTER)}:{SPARK_MASTER_PORT}"

    def spark_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://{self.address(SPARK_MASTER)}:8080/json/", timeout=5) as r:
                return sum(1 for w in json.load(r).get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):
            return 0

    # -- what runs where --------------------------------------------------------------------
    def describe(self) -> list[dict]:
        return [{"part": p.role, "host": p.host, "namespace": self.bed.namespace(p.host), "address": p.address,
                 "ports": p.ports, "log": str(p.log_path), "pid": p.process.popen.pid} for p in self.parts]

    def write_description(self) -> None:
        (self.base / "hosts.json").write_text(json.dumps({
            "tag": self.bed.tag, "subnet": str(self.bed.subnet), "bridge": self.bed.bridge,
            "client": {"host": CLIENT, "namespace": self.bed.namespace(CLIENT), "address": self.address(CLIENT)},
            "service_url": self.service_url, "tls_service_url": self.tls_service_url, "ca": str(self.ca_file),
            "etcd": self.etcd_endpoints, "object_store": self.object_store_url, "parts": self.describe()},
            indent=2))


def _status(url: str, method: str = "GET", body: bytes | None = None, timeout: float = 5.0) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method, data=body), timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return 0


def _http_ok(url: str, contains: bytes = b"") -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200 and contains in r.read()
    except (OSError, ValueError):
        return False


def host_topology(tag: str, base: Path, *, detached: bool = False, replace: bool = False) -> Topology:
    """A bed of :data:`HOSTS` made (not started) for ``tag`` under ``base``;
    ``replace``: a running bed of the tag is stopped first, not refused."""
    bed = HostBed(tag, list(HOSTS), detached=detached).setup(replace=replace)
    return Topology(bed, Path(base))


def default_base(tag: str) -> Path:
    return Path(os.environ.get("MAGNETAR_HOSTS_DIR", f"/tmp/mg-{tag}"))
