"""The life of a child server process: plain functions, and
:class:`ChildServer`, what etcd's and SeaweedFS's servers share.

A child server (etcd, SeaweedFS) runs in its own session, so that a Ctrl-C
meant for the caller's terminal does not kill it before the brokers that
use it; its output goes to a log file whose tail explains a failed start.
``launcher`` is put before its command line (``setpriv --pdeathsig KILL``:
it dies with the process that started it).

Failure modes: :func:`wait_serving` raises the caller's error class with
the log's tail when the process exits or does not serve in time (it kills
it first); :func:`pause` and :func:`resume` raise ``RuntimeError`` when the
process is not running (:func:`pause` also when it does not stop in time);
the others are idempotent on a process that ended.
"""
from __future__ import annotations

import abc
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR as a server's listener has it: a port in TIME_WAIT after
        # our own restart counts as free, a listening one does not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def launch(args: list[str], log_path: Path, *, launcher: list[str] = (), cwd: Path | None = None,
           env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``launcher + args`` in its own session, output appended to ``log_path``."""
    log = open(log_path, "ab")
    try:
        return subprocess.Popen(list(launcher) + args, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=cwd, env=env, start_new_session=True)
    finally:
        log.close()


def wait_serving(process: subprocess.Popen, serving: Callable[[], bool], timeout: float, log_path: Path,
                 what: str, error: type[Exception]) -> None:
    """Return once ``serving()``; raise ``error`` (with the log's tail) if
    the process exits first, or after killing it if ``timeout`` s pass."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise error(f"{what} exited with code {process.returncode} while starting:\n{log_tail(log_path)}")
        if serving() and process.poll() is None:
            return
        if time.monotonic() > deadline:
            kill(process)
            raise error(f"{what} did not serve within {timeout} s:\n{log_tail(log_path)}")
        time.sleep(0.05)


def stop(process: subprocess.Popen | None, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` s."""
    if process is None:
        return
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def kill(process: subprocess.Popen | None) -> None:
    """SIGKILL (a crash), and reap it."""
    if process is None:
        return
    if process.poll() is None:
        process.kill()
    process.wait()


def pause(process: subprocess.Popen | None, what: str, timeout: float = 5.0) -> None:
    """SIGSTOP to its process group (it leads one: :func:`launch`); returns
    once every thread is stopped. It keeps its sockets but answers nothing
    (a hung server).

    Waiting matters: ``kill`` only queues the stop, and each thread stops
    when it next leaves the kernel. Without the wait, a thread of a server
    with several (SeaweedFS's Go runtime: eight) answered a request sent
    just after ``kill`` returned, in about 1 ms (5 probes of 15 on a loaded
    machine)."""
    if process is None or process.poll() is not None:
        raise RuntimeError(f"{what} is not running")
    os.killpg(process.pid, signal.SIGSTOP)
    wait_stopped(process.pid, what, timeout)


def wait_stopped(pid: int, what: str, timeout: float = 5.0) -> None:
    """Return once every thread of ``pid`` is stopped (after a SIGSTOP sent
    to it); RuntimeError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not _all_threads_stopped(pid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not stop within {timeout} s of SIGSTOP")
        time.sleep(0.001)


def _all_threads_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (or gone): ``/proc`` says T."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return True
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
        if state not in ("T", "t", "Z", "X"):
            return False
    return True


def resume(process: subprocess.Popen | None, what: str) -> None:
    """SIGCONT to its process group after :func:`pause`."""
    if process is None or process.poll() is not None:
        raise RuntimeError(f"{what} is not running")
    os.killpg(process.pid, signal.SIGCONT)


def log_tail(log_path: Path, lines: int = 20) -> str:
    """The last ``lines`` of the log, or ``(no log)``."""
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class ChildServer(abc.ABC):
    """A server we run as a child process (``EtcdServer``, ``SeaweedServer``):
    its lifecycle after start. A subclass picks its ports and command line
    in ``start()`` (which returns self) and launches with :meth:`_spawn`.
    ``what`` names it in errors; ``log_path`` and ``launcher`` as in
    :func:`launch`."""

    what = "server"

    def __init__(self, log_path: Path, launcher: list[str] | None = None) -> None:
        self.log_path = Path(log_path)
        #: Put before its command line (``setpriv --pdeathsig KILL``: it dies
        #: with the process that started it).
        self.launcher = list(launcher or [])
        self.process: subprocess.Popen | None = None

    @abc.abstractmethod
    def start(self, start_timeout: float = 30.0) -> "ChildServer":
        """Pick ports, launch with :meth:`_spawn`, return self once serving."""

    def _spawn(self, args: list[str], serving: Callable[[], bool], timeout: float, error: type[Exception], *,
               cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
        """Launch ``args`` and return once ``serving()``; ``error`` (with the
        log's tail) if it exits or does not serve within ``timeout`` s."""
        self.process = launch(args, self.log_path, launcher=self.launcher, cwd=cwd, env=env)
        try:
            wait_serving(self.process, serving, timeout, self.log_path, self.what, error)
        except error:
            self.process = None
            raise

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, SIGKILL after ``timeout`` s. Idempotent; its data stays for a restart."""
        stop(self.process, timeout)
        self.process = None

    def kill(self) -> None:
        """SIGKILL (a crash); its data stays for a restart."""
        kill(self.process)
        self.process = None

    def pause(self) -> None:
        """SIGSTOP, returning once it is stopped: it keeps its sockets but
        answers nothing (a hung server). RuntimeError if it is not running."""
        pause(self.process, self.what)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        resume(self.process, self.what)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
