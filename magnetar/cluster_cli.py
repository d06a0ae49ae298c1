"""``magnetar broker`` (one member of a cluster), ``magnetar cluster up``
(a local cluster: its own etcd unless ``--etcd``, and N broker processes) and
``magnetar geo up`` (local regions: one etcd, N clusters sharing a
configuration store).

``cluster up`` prints, for scripts and tests to read::

    etcd http://127.0.0.1:<port>                      (only when it started etcd)
    objectstore http://127.0.0.1:<port> bucket=<name> (--storage object, when it started SeaweedFS)
    broker <n> pulsar://127.0.0.1:<port> http://127.0.0.1:<admin> pid=<pid>
    ready

and stays in the foreground; SIGINT or SIGTERM stops every process it
started (brokers first, cleanly, then etcd and SeaweedFS). With ``--storage
object`` the brokers keep their ledgers in an S3-compatible store: the one
``--object-store URL`` names, else a SeaweedFS of its own with its data under
``<data-dir>/objectstore`` (bucket ``magnetar``, prefix the cluster's name). Broker k listens on
``port + k`` and ``admin_port + k``; its log is ``<data-dir>/broker-<k>.log``.
Failure modes: a broker that exits or does not print READY within the start
timeout stops the whole cluster with the tail of its log; a busy port is
reported by that broker's log tail. Once ``ready``, a broker that exits is
reported once and the others keep running; SIGHUP starts every exited
broker again (same command line) and prints its line anew.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

# soft_wrap: an error piped to a file or a pipe (rich's width is 80 there) stays one line.
err = Console(stderr=True, soft_wrap=True)
cluster_app = typer.Typer(help="A local cluster of brokers on etcd, for development and tests.",
                          no_args_is_help=True)

geo_app = typer.Typer(help="Local regions that replicate to each other, for development and tests.",
                      no_args_is_help=True)

START_TIMEOUT_S = 60.0
#: The bucket of the SeaweedFS that ``cluster up --storage object`` starts.
OBJECT_STORE_BUCKET = "magnetar"
STORAGE_KINDS = ("file", "object")


def etcd_store_url(url: str, name: str) -> str:
    """``http://h:p[/prefix]`` or ``etcd://h:p[/prefix]`` as a metadata store URL
    (prefix defaults to the cluster name)."""
    for scheme in ("http://", "etcd://"):
        if url.startswith(scheme):
            rest = url[len(scheme):]
            host, _, prefix = rest.partition("/")
            if not host or ":" not in host:
                break
            return f"etcd://{host}/{prefix.strip('/') or name}"
    raise typer.BadParameter(f"--etcd must look like http://HOST:PORT[/PREFIX], not {url!r}")


def broker(
    config: Optional[str] = typer.Option(None, "--config", help="TOML config file (see magnetar.example.toml)"),
    cluster_name: Optional[str] = typer.Option(None, "--cluster-name", help="Name of the cluster"),
    metadata_store: Optional[str] = typer.Option(None, "--metadata-store", help="etcd://HOST:PORT/PREFIX"),
    configuration_store: Optional[str] = typer.Option(None, "--configuration-store",
                                                      help="Store shared by all clusters [the metadata store]"),
    storage_dir: Optional[str] = typer.Option(None, "--storage-dir",
                                              help="Ledger files, shared by every broker of the cluster"),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="This broker's own files [./data]"),
    port: Optional[int] = typer.Option(None, "--port", help="Pulsar protocol port [6650]"),
    admin_port: Optional[int] = typer.Option(None, "--admin-port", help="Admin HTTP port [8080]"),
    advertised_address: Optional[str] = typer.Option(None, "--advertised-address",
                                                     help="Host name clients are told to use [localhost]"),
    bind_address: Optional[str] = typer.Option(None, "--bind-address", help="Listen address [127.0.0.1]"),
    log_level: Optional[str] = typer.Option(None, "--log-level", help="DEBUG, INFO, WARNING, ERROR [INFO]"),
    session_ttl: Optional[float] = typer.Option(None, "--session-ttl",
                                                help="Seconds a dead broker keeps its bundles [10]"),
    object_store: Optional[str] = typer.Option(
        None, "--object-store",
        help="Keep ledgers in this S3-compatible store: s3://BUCKET/PREFIX?endpoint=URL&region=NAME "
             "(docs/object-storage.md) [ledger files under --storage-dir]"),
) -> None:
    """Run one broker of a cluster (metadata on etcd) until Ctrl-C or SIGTERM."""
    from magnetar.broker_command import load_or_exit, run_or_exit

    overrides = {"cluster_name": cluster_name, "metadata_store_url": metadata_store,
                 "configuration_store_url": configuration_store, "storage_dir": storage_dir,
                 "data_dir": data_dir, "port": port, "admin_port": admin_port,
                 "advertised_address": advertised_address, "bind_address": bind_address, "log_level": log_level,
                 "cluster_session_ttl_s": session_ttl}
    if object_store is not None:
        overrides["storage"] = {"backend": "object", "object_store_url": object_store}
    cfg = load_or_exit(config, overrides)
    if not cfg.clustered:
        err.print("[red]magnetar broker needs a shared metadata store:[/red] give --metadata-store "
                  "etcd://HOST:PORT/PREFIX (or metadata_store_url in the config); for one process, "
                  "use magnetar standalone")
        raise typer.Exit(2)
    if cfg.storage.backend == "object":
        _check_object_store(cfg.storage.object_store_url)
    extensions = []
    if cfg.separate_configuration_store:
        from magnetar.replication.manager import GeoReplication

        extensions.append(GeoReplication)
    run_or_exit(cfg, extensions)


def _check_object_store(url: str) -> None:
    """Exit 1 with one line when the object store cannot be used (unreachable,
    no such bucket, credentials refused): better now than at the first publish."""
    from magnetar.objectstore.s3 import check_object_store
    from magnetar.objectstore.store import ObjectStoreConfigError

    try:
        check_object_store(url)
    except ObjectStoreConfigError as exc:
        err.print(f"[red]cannot start:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def _parse_object_store(url: str) -> None:
    from magnetar.objectstore.store import ObjectStoreConfigError
    from magnetar.objectstore.url import parse_url

    try:
        parse_url(url)
    except ObjectStoreConfigError as exc:
        raise typer.BadParameter(str(exc)) from None


def _wait_ready(proc: subprocess.Popen, deadline: float) -> str | None:
    """The broker's READY line, or None if it exited or the deadline passed."""
    line: list[str] = []

    def read() -> None:
        for raw in proc.stdout:  # type: ignore[union-attr]
            if raw.startswith("READY"):
                line.append(raw.strip())
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()))
    return line[0] if line else None


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def broker_command(name: str, store_url: str, configuration_store: str | None, base: Path, k: int,
                   port: int, admin_port: int, session_ttl: float, broker_config: str | None,
                   address: str = "127.0.0.1", object_store: str | None = None) -> list[str]:
    """The command line of broker ``k`` of cluster ``name``: shared storage
    ``base/storage`` (or ``object_store``, an s3:// URL), its own files in
    ``base/broker-<k>``, listening on and advertising ``address`` (the chaos
    harness gives each broker its own, in its own network namespace)."""
    cmd = [sys.executable, "-m", "magnetar.cli", "broker", "--metadata-store", store_url,
           "--cluster-name", name, "--storage-dir", str(base / "storage"),
           "--data-dir", str(base / f"broker-{k}"), "--port", str(port),
           "--admin-port", str(admin_port), "--advertised-address", address,
           "--session-ttl", str(session_ttl)]
    if address != "127.0.0.1":
        cmd += ["--bind-address", address]
    if configuration_store:
        cmd += ["--configuration-store", configuration_store]
    if broker_config:
        cmd += ["--config", str(Path(broker_config).resolve())]
    if object_store:
        cmd += ["--object-store", object_store]
    return cmd


class _Supervisor:
    """Starts broker processes one after the other, waits for each one's
    READY, prints its line, and stops them all (then etcd) at the end.

    A broker that exits is reported once; SIGHUP starts every exited broker
    again with its own command line (same ports, files and log), printing
    its line anew (a new pid). A restart that fails is reported and the
    member stays down; the others are not touched."""

    def __init__(self, restart_exited: bool = False) -> None:
        #: Start an exited broker again at once, as systemd's Restart=always would.
        self.restart_exited = restart_exited
        self.procs: list[subprocess.Popen] = []
        self.labels: list[str] = []
        self.commands: list[tuple[list[str], Path]] = []
        self.server = None
        self.objectstore = None
        self.stopping = False
        self.restart_requested = False

        def on_signal(signum, frame) -> None:
            self.stopping = True

        def on_hangup(signum, frame) -> None:
            self.restart_requested = True

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGHUP, on_hangup)

    def start_etcd(self, directory: Path, brokers_ports: set[int]):
        """etcd on two free ports other than ``brokers_ports`` (the brokers
        start after it: a port etcd took would be "already in use")."""
        from magnetar.metadata.etcd_server import EtcdServer, EtcdNotInstalled, EtcdStartError

        try:
            self.server = EtcdServer(directory, avoid_ports=brokers_ports).start()
        except (EtcdNotInstalled, EtcdStartError) as exc:
            err.print(f"[red]cannot start etcd:[/red] {exc}")
            raise typer.Exit(1)
        print(f"etcd {self.server.client_url}", flush=True)
        return self.server

    def start_objectstore(self, directory: Path, avoid_ports: set[int]):
        """A SeaweedFS S3 endpoint on free ports other than ``avoid_ports``,
        its bucket created; prints its line."""
        from magnetar.objectstore.seaweed import SeaweedNotInstalled, SeaweedServer, SeaweedStartError

        try:
            self.objectstore = SeaweedServer(directory, bucket=OBJECT_STORE_BUCKET, avoid_ports=avoid_ports).start()
        except (SeaweedNotInstalled, SeaweedStartError) as exc:
            err.print(f"[red]cannot start the object store:[/red] {escape(str(exc))}", highlight=False)
            raise typer.Exit(1)
        print(f"objectstore {self.objectstore.endpoint} bucket={self.objectstore.bucket}", flush=True)
        return self.objectstore

    def start_broker(self, label: str, cmd: list[str], log_path: Path) -> None:
        self.procs.append(_Exited(None))
        self.labels.append(label)
        self.commands.append((cmd, log_path))
        if not self._launch(len(self.procs) - 1):
            raise typer.Exit(1)

    def _launch(self, k: int) -> bool:
        """Start member ``k`` and wait for its READY; False (reported) if it did not come up."""
        cmd, log_path = self.commands[k]
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        self.procs[k] = proc
        ready = _wait_ready(proc, time.monotonic() + START_TIMEOUT_S)
        if ready is None:
            err.print(f"[red]{self.labels[k]} did not start[/red] (log {log_path}):\n{_tail(log_path)}")
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            self.procs[k] = _Exited(proc)
            return False
        fields = dict(part.split("=") for part in ready.split()[1:])
        print(f"{self.labels[k]} pulsar://127.0.0.1:{fields['pulsar']} http://127.0.0.1:{fields['admin']} "
              f"pid={proc.pid}", flush=True)
        return True

    def watch(self) -> None:
        print("ready", flush=True)
        while not self.stopping:
            for k, proc in enumerate(self.procs):
                if isinstance(proc, _Exited) or proc.poll() is None or self.stopping:
                    continue
                self.procs[k] = _Exited(proc)
                if self.restart_exited:
                    err.print(f"{self.labels[k]} (pid {proc.pid}) exited with {proc.returncode}; starting it again",
                              highlight=False, soft_wrap=True)
                    self._launch(k)
                    continue
                err.print(f"{self.labels[k]} (pid {proc.pid}) exited with {proc.returncode}; the others keep "
                          f"running. To start it again: kill -HUP {os.getpid()}", highlight=False, soft_wrap=True)
            if self.restart_requested and not self.stopping:
                self.restart_requested = False
                for k, proc in enumerate(self.procs):
                    if isinstance(proc, _Exited) and not self.stopping:
                        self._launch(k)
            time.sleep(0.2)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self.server is not None:
            self.server.stop()
        if self.objectstore is not None:
            self.objectstore.stop()


@cluster_app.command("up")
def up(
    brokers: int = typer.Option(3, "--brokers", min=1, max=32, help="Broker processes"),
    data_dir: str = typer.Option("./cluster-data", "--data-dir", help="etcd data, shared storage, broker logs"),
    port: int = typer.Option(6650, "--port", help="Pulsar port of broker 0 (broker k: port + k)"),
    admin_port: int = typer.Option(8080, "--admin-port", help="Admin port of broker 0 (broker k: + k)"),
    etcd: Optional[str] = typer.Option(None, "--etcd", help="Use this etcd (http://HOST:PORT\\[/PREFIX]) "
                                                            "instead of starting one"),
    configuration_store: Optional[str] = typer.Option(
        None, "--configuration-store",
        help="Store shared with other clusters (regions), http://HOST:PORT/PREFIX [none: a cluster alone]"),
    name: str = typer.Option("cluster", "--name", help="Cluster name"),
    session_ttl: float = typer.Option(10.0, "--session-ttl", help="Broker session TTL, seconds"),
    broker_config: Optional[str] = typer.Option(None, "--broker-config",
                                                help="TOML config file every broker reads (flags win)"),
    storage: Optional[str] = typer.Option(
        None, "--storage",
        help="Where ledgers live: file (a shared directory) or object (an S3-compatible store) "
             "\\[file; object if --object-store is given]"),
    object_store: Optional[str] = typer.Option(
        None, "--object-store",
        help="With --storage object: use this store, s3://BUCKET/PREFIX?endpoint=URL&region=NAME, "
             "instead of starting a SeaweedFS"),
    restart_exited: bool = typer.Option(
        False, "--restart-exited",
        help="Start a broker that exits again at once (as systemd's Restart=always; "
             "for magnetar admin brokers restart-rolling)"),
) -> None:
    """Start etcd (unless --etcd), SeaweedFS (with --storage object, unless
    --object-store) and N brokers; stop them all on Ctrl-C or SIGTERM."""
    storage = storage or ("object" if object_store else "file")
    if storage not in STORAGE_KINDS:
        raise typer.BadParameter(f"--storage must be file or object, not {storage!r}")
    if object_store and storage != "object":
        raise typer.BadParameter("--object-store goes with --storage object (ledgers in files need no object store)")
    if object_store:
        _parse_object_store(object_store)
    base = Path(data_dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    shared = etcd_store_url(configuration_store, "global") if configuration_store else None
    supervisor = _Supervisor(restart_exited)
    try:
        ports = {first + k for first in (port, admin_port) for k in range(brokers)}
        if etcd is None:
            server = supervisor.start_etcd(base / "etcd", ports)
            store_url = server.store_url(name)
            ports |= {server.client_port, server.peer_port}
        else:
            store_url = etcd_store_url(etcd, name)
        if storage == "object" and not object_store:
            object_store = supervisor.start_objectstore(base / "objectstore", ports).store_url(name)
        for k in range(brokers):
            cmd = broker_command(name, store_url, shared, base, k, port + k, admin_port + k,
                                 session_ttl, broker_config, object_store=object_store)
            supervisor.start_broker(f"broker {k}", cmd, base / f"broker-{k}.log")
        supervisor.watch()
    finally:
        supervisor.stop()


@geo_app.command("up")
def geo_up(
    regions: int = typer.Option(3, "--regions", min=2, max=9, help="Regions (clusters)"),
    brokers: int = typer.Option(1, "--brokers", min=1, max=9, help="Brokers per region"),
    names: Optional[str] = typer.Option(None, "--names", help="Comma-separated region names [region-0,...]"),
    data_dir: str = typer.Option("./geo-data", "--data-dir", help="etcd data, each region's storage and logs"),
    port: int = typer.Option(6650, "--port", help="Pulsar port of region 0's broker 0 "
                                                  "(region r broker k: port + 10r + k)"),
    admin_port: int = typer.Option(8080, "--admin-port", help="Admin port, numbered the same way"),
    session_ttl: float = typer.Option(10.0, "--session-ttl", help="Broker session TTL, seconds"),
    broker_config: Optional[str] = typer.Option(None, "--broker-config",
                                                help="TOML config file every broker reads (flags win)"),
) -> None:
    """Start one etcd and N regions that replicate to each other (docs/regions.md).

    Each region is a cluster with its own metadata (etcd prefix /<name>) and
    storage; all share the configuration store (prefix /global). Prints
    ``region <name> broker <k> pulsar://... http://... pid=...`` per broker,
    then ``ready``; Ctrl-C or SIGTERM stops everything.
    """
    region_names = [n.strip() for n in (names or "").split(",") if n.strip()] or \
        [f"region-{r}" for r in range(regions)]
    if len(set(region_names)) != len(region_names) or len(region_names) < 2:
        raise typer.BadParameter("--names needs at least two distinct region names")
    base = Path(data_dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    supervisor = _Supervisor()
    try:
        server = supervisor.start_etcd(base / "etcd", {first + 10 * r + k for first in (port, admin_port)
                                                       for r in range(len(region_names)) for k in range(brokers)})
        shared = server.store_url("global")
        for r, region in enumerate(region_names):
            region_dir = base / region
            region_dir.mkdir(exist_ok=True)
            for k in range(brokers):
                cmd = broker_command(region, server.store_url(region), shared, region_dir, k,
                                     port + 10 * r + k, admin_port + 10 * r + k, session_ttl, broker_config)
                supervisor.start_broker(f"region {region} broker {k}", cmd, region_dir / f"broker-{k}.log")
        supervisor.watch()
    finally:
        supervisor.stop()


class _Exited:
    """A broker that exited: polled no more."""

    def __init__(self, proc: subprocess.Popen | None) -> None:
        self.pid, self.returncode = (proc.pid, proc.returncode) if proc is not None else (None, None)

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        pass

    def wait(self, timeout: float | None = None) -> int:
        return self.returncode

    def kill(self) -> None:
        pass
