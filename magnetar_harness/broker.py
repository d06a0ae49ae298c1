"""One broker as a real process, and the signals done to it.

:class:`BrokerProcess` runs a broker command line (``magnetar standalone``,
or ``magnetar broker`` for a member of a cluster or region) and waits for
the ``READY pulsar=P admin=A ...`` line the broker prints once it accepts
connections. It keeps its ports across restarts, so clients reconnect to
it: ports given up front (the chaos tool picks them, its proxies need them
before the start), or else port 0 the first time and the ports the READY
line reports from then on.

- ``stop``: SIGTERM, a clean shutdown that syncs and closes ledgers
  (SIGKILL if it has not exited within the timeout);
- ``kill``: SIGKILL, a crash, nothing flushed by the broker;
- ``pause`` / ``resume``: SIGSTOP / SIGCONT;
- ``restart``: stop (or kill) then start on the same data and ports.

Failure modes: :class:`BrokerDidNotStart`, with the tail of its log, when
the broker exits before READY or does not print it within the start
timeout (it is killed then).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from magnetar.processes import child

from .lifetime import dying_with_parent

#: ``command(port, admin_port)``: the broker's command line on those ports.
Command = Callable[[int, int], list[str]]

START_TIMEOUT_S = 30.0
#: After a kill the listening port may linger briefly in the kernel.
RESTART_RETRY_S = 10.0


class BrokerDidNotStart(RuntimeError):
    pass


class BrokerProcess:
    """``command`` gives the command line; its stderr goes to ``log_path``;
    clients reach it at ``host`` (its advertised address). With
    ``die_with_parent`` the kernel kills it when its starter dies
    (:func:`~.lifetime.dying_with_parent`); ``preexec_fn`` runs in the
    child before it execs (an rlimit, say)."""

    def __init__(self, command: Command, log_path: Path, host: str = "127.0.0.1", *, port: int = 0,
                 admin_port: int = 0, data_dir: Path | None = None, start_timeout: float = START_TIMEOUT_S,
                 die_with_parent: bool = False, preexec_fn: Callable[[], None] | None = None) -> None:
        self._command = command
        self.log_path = Path(log_path)
        self.host = host
        self.port = port
        self.admin_port = admin_port
        self.tls_port = -1
        self.admin_tls_port = -1
        self.data_dir = data_dir
        self.start_timeout = start_timeout
        self.die_with_parent = die_with_parent
        #: Run in the broker's process before it execs (e.g. to set an rlimit).
        self.preexec_fn = preexec_fn
        self.proc: subprocess.Popen | None = None
        self.paused = False
        #: Starts that reached READY.
        self.starts = 0
        #: Added to its environment at each start (the clock-jump fault's preload).
        self.env: dict[str, str] = {}
        #: Rewrites its command line at each start (the clock-jump fault's boot shim).
        self.wrap: Callable[[list[str]], list[str]] | None = None
        #: Called with the pid of each run that ended (the preload's leftovers).
        self.on_exit: Callable[[int], None] | None = None

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.host}:{self.admin_port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float | None = None) -> "BrokerProcess":
        timeout = self.start_timeout if timeout is None else timeout
        args = self._command(self.port, self.admin_port)
        if self.wrap is not None:
            args = self.wrap(args)
        if self.die_with_parent:
            args = dying_with_parent(args)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1", **self.env),
                                         preexec_fn=self.preexec_fn)
        self.paused = False
        settled, ready = threading.Event(), threading.Event()
        threading.Thread(target=self._read_stdout, args=(self.proc, settled, ready), daemon=True).start()
        settled.wait(timeout)
        if not ready.is_set():
            exited = self.proc.poll() is not None
            self.kill()
            why = "exited before it was ready" if exited else f"was not ready in {timeout:.0f} s"
            raise BrokerDidNotStart(f"the broker {why}; log:\n{self.log_tail(40)}")
        self.starts += 1
        return self

    def _read_stdout(self, proc: subprocess.Popen, settled: threading.Event, ready: threading.Event) -> None:
        for raw in proc.stdout:  # type: ignore[union-attr]
            if raw.startswith(b"READY "):
                fields = dict(part.split("=", 1) for part in raw.decode(errors="replace").split()[1:] if "=" in part)
                self.port = int(fields.get("pulsar", self.port))
                self.admin_port = int(fields.get("admin", self.admin_port))
                self.tls_port = int(fields.get("tls", -1))
                self.admin_tls_port = int(fields.get("admin_tls", -1))
                ready.set()
                settled.set()
        settled.set()  # its stdout closed: it exited

    # -- its log ------------------------------------------------------------------------------
    def log(self) -> str:
        """The end of its log (every run since the first start), for assertion messages."""
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def notable_log(self, limit: int = 40) -> str:
        """Its warnings and errors (every run since the first start), for
        assertion messages: why a crash test went wrong is usually there."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        notable = [line for line in lines if " WARNING " in line or " ERROR " in line or "Traceback" in line]
        return "\n".join(notable[-limit:])

    # -- signals ------------------------------------------------------------------------------
    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and its exit code (0: a clean shutdown); SIGKILL if it
        has not exited within ``timeout`` (after a SIGUSR1: the broker logs
        its tasks' stacks, see :mod:`magnetar.broker.server.task_dump`)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            if self.paused:
                self.resume()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                # Where the stop hung goes to the broker's log before the kill.
                self.proc.send_signal(signal.SIGUSR1)
                try:
                    self.proc.wait(2.0)
                except subprocess.TimeoutExpired:
                    pass
                self.proc.kill()
                self.proc.wait()
                # For the failing test's report (pytest shows what it captured):
                # the stacks the SIGUSR1 wrote say where the stop hung.
                print(f"the broker did not stop within {timeout:g} s after SIGTERM and was killed; "
                      f"the end of its log:\n{self.log_tail(150)}", file=sys.stderr)
            self._ended()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self._ended()
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP, returning once every thread of the broker is stopped (the
        signal alone is asynchronous: its writer thread could still run)."""
        self._signal(signal.SIGSTOP)
        if self.proc is not None and self.proc.poll() is None:
            child.wait_stopped(self.proc.pid, "the broker")
        self.paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    def restart(self, crash: bool = False) -> "BrokerProcess":
        """Stop (``crash``: kill) and start again on the same data and ports."""
        self.kill() if crash else self.stop()
        deadline = time.monotonic() + RESTART_RETRY_S
        while True:
            try:
                return self.start()
            except BrokerDidNotStart:
                if time.monotonic() > deadline:
                    raise

    def _signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def _ended(self) -> None:
        if self.on_exit is not None and self.proc is not None:
            self.on_exit(self.proc.pid)


def standalone_broker(data_dir: Path, extra_args: list[str] | None = None, *, log_path: Path | None = None,
                      **options) -> BrokerProcess:
    """``magnetar standalone`` on ``data_dir`` (not started); its log beside
    it (``<data_dir>-broker.log`` unless ``log_path``). ``options``: those
    of :class:`BrokerProcess` (ports, start_timeout, die_with_parent)."""
    data_dir = Path(data_dir)
    extra = list(extra_args or [])

    def command(port: int, admin_port: int) -> list[str]:
        return [sys.executable, "-m", "magnetar.cli", "standalone", "--data-dir", str(data_dir),
                "--port", str(port), "--admin-port", str(admin_port), "--advertised-address", "127.0.0.1", *extra]

    log_path = log_path or data_dir.parent / f"{data_dir.name}-broker.log"
    return BrokerProcess(command, log_path, data_dir=data_dir, **options)


def configured_broker(directory: Path, toml: str, **options) -> BrokerProcess:
    """A standalone broker (not started) on ``directory/data`` whose config
    file ``directory/broker.toml`` holds ``toml``."""
    config = Path(directory) / "broker.toml"
    config.write_text(toml)
    return standalone_broker(Path(directory) / "data", ["--config", str(config)], **options)


def member_broker(cluster: str, base: Path, index: int, store_url: str, session_ttl: float, *,
                  configuration_store: str | None = None, config: Path | None = None,
                  address: str = "127.0.0.1", bind: str | None = None, netns: str | None = None,
                  **options) -> BrokerProcess:
    """Member ``index`` of cluster ``cluster`` (not started): ``magnetar
    broker`` on the shared storage under ``base``, with the command line
    ``magnetar cluster up`` and ``geo up`` use; its log ``base/broker-<index>.log``.
    ``address``: where it listens and what it advertises; ``bind``: where
    it listens instead (a proxy owns the advertised address). With
    ``netns`` it runs inside that network namespace (``ip netns exec``,
    which execs in place: the process is the broker, signals reach it).
    ``config``: a TOML file it reads (flags win)."""
    from magnetar.cluster_cli import broker_command

    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    prefix = ["ip", "netns", "exec", netns] if netns else []

    def command(port: int, admin_port: int) -> list[str]:
        cmd = broker_command(cluster, store_url, configuration_store, base, index, port, admin_port, session_ttl,
                             str(config) if config else None, address=address)
        return prefix + cmd + (["--bind-address", bind] if bind else [])

    return BrokerProcess(command, base / f"broker-{index}.log", host=address, **options)
