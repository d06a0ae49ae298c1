"""A broker under test, as a real process, and the faults done to it.

:class:`BrokerProcess` runs a broker command (``magnetar standalone``, or
``magnetar broker`` for a cluster member) on the same ports across restarts
(so clients reconnect to it), and waits for its ``READY`` line. The faults
act on the process:

- ``kill``: SIGKILL, then a restart on the same data (durability and
  recovery: every receipt it gave must survive);
- ``pause``: SIGSTOP for a while, then SIGCONT (clients time out, resend);
- ``restart``: SIGTERM (a clean stop), then a start.

Every process a chaos run starts (brokers, etcd, strace) is started with
:func:`dying_with_parent`: a run that is itself SIGKILLed leaves nothing
running behind it.

Failure modes: a broker that does not print READY within the start timeout
raises BrokerDidNotStart with the tail of its log.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

START_TIMEOUT_S = 60.0


class BrokerDidNotStart(RuntimeError):
    pass


def dying_with_parent(args: list[str], signal_name: str = "KILL") -> list[str]:
    """``args`` run so that the kernel sends them ``signal_name`` when the
    process that started them dies (PR_SET_PDEATHSIG, set by util-linux's
    ``setpriv``, which then execs them in place; it lasts through ``ip netns
    exec``'s exec too). KILL by default: a broker the nemesis left stopped
    (SIGSTOP) would keep a pending TERM for ever. The kernel ties the
    signal to the starting *thread*: start them from one that outlives them
    (the chaos run's main thread does every start). Not a ``preexec_fn``:
    running Python between fork and exec in a process full of client
    threads can deadlock. Without setpriv, ``args`` as they are: a run's
    own clean-up still stops them, unless the run is SIGKILLed."""
    if shutil.which("setpriv") is None:
        return args
    return ["setpriv", "--pdeathsig", signal_name, *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    """``args(port, admin_port)`` gives the command line; its log is ``log_path``;
    clients reach it at ``host`` (its advertised address)."""

    def __init__(self, args: Callable[[int, int], list[str]], log_path: Path, host: str = "127.0.0.1") -> None:
        self._args = args
        self.host = host
        self.port = free_port()
        self.admin_port = free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.paused = False
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

    def start(self) -> None:
        ready = threading.Event()
        args = self._args(self.port, self.admin_port)
        if self.wrap is not None:
            args = self.wrap(args)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(dying_with_parent(args), stdout=subprocess.PIPE, stderr=log,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1", **self.env))

        def read(proc: subprocess.Popen) -> None:
            for raw in proc.stdout:  # type: ignore[union-attr]
                if raw.startswith(b"READY "):
                    ready.set()

        threading.Thread(target=read, args=(self.proc,), daemon=True).start()
        if not ready.wait(START_TIMEOUT_S):
            self.stop()
            raise BrokerDidNotStart(f"the broker did not start in {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")
        self.starts += 1

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- faults -----------------------------------------------------------------------------
    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
            self._ended()
        self.paused = False

    def _ended(self) -> None:
        if self.on_exit is not None and self.proc is not None:
            self.on_exit(self.proc.pid)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if self.paused:
            self.resume()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._ended()

    def _signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)


def standalone_broker(data_dir: Path, extra_args: list[str] | None = None) -> BrokerProcess:
    """``magnetar standalone`` on ``data_dir`` (log next to it)."""
    data_dir = Path(data_dir)

    def args(port: int, admin_port: int) -> list[str]:
        return [sys.executable, "-m", "magnetar.cli", "standalone", "--data-dir", str(data_dir),
                "--port", str(port), "--admin-port", str(admin_port), "--advertised-address", "127.0.0.1",
                *(extra_args or [])]

    return BrokerProcess(args, data_dir.parent / "broker.log")


def cluster_broker(base: Path, index: int, store_url: str, session_ttl: float, address: str = "127.0.0.1",
                   netns: str | None = None, config: Path | None = None) -> BrokerProcess:
    """Member ``index`` of a cluster: ``magnetar broker`` on the shared storage
    under ``base``, with the command line ``magnetar cluster up`` uses. With
    ``netns`` it runs inside that network namespace (``ip netns exec``, which
    execs in place: the process is the broker, signals reach it), listening
    on and advertising ``address``. ``config``: a TOML file it reads (flags win)."""
    from magnetar.cluster_cli import broker_command

    base = Path(base)
    prefix = ["ip", "netns", "exec", netns] if netns else []

    def args(port: int, admin_port: int) -> list[str]:
        return prefix + broker_command("chaos", store_url, None, base, index, port, admin_port, session_ttl,
                                       str(config) if config else None, address=address)

    return BrokerProcess(args, base / f"broker-{index}.log", host=address)
