"""The life of a child server process, as plain functions.

A child server (etcd, SeaweedFS) runs in its own session, so that a Ctrl-C
meant for the caller's terminal does not kill it before the brokers that
use it; its output goes to a log file whose tail explains a failed start.
``launcher`` is put before its command line (``setpriv --pdeathsig KILL``:
it dies with the process that started it).

Failure modes: :func:`wait_serving` raises the caller's error class with
the log's tail when the process exits or does not serve in time (it kills
it first); :func:`pause` and :func:`resume` raise ``RuntimeError`` when the
process is not running; the others are idempotent on a process that ended.
"""
from __future__ import annotations

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


def pause(process: subprocess.Popen | None, what: str) -> None:
    """SIGSTOP: it keeps its sockets but answers nothing (a hung server)."""
    if process is None or process.poll() is not None:
        raise RuntimeError(f"{what} is not running")
    os.kill(process.pid, signal.SIGSTOP)


def resume(process: subprocess.Popen | None, what: str) -> None:
    """SIGCONT after :func:`pause`."""
    if process is None or process.poll() is not None:
        raise RuntimeError(f"{what} is not running")
    os.kill(process.pid, signal.SIGCONT)


def log_tail(log_path: Path, lines: int = 20) -> str:
    """The last ``lines`` of the log, or ``(no log)``."""
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
