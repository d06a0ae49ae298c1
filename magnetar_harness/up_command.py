"""What ``cluster up`` and ``geo up`` share as child processes: started
with unbuffered output, every line they print kept and handed to a parser
on a thread until ``ready``; stopped with SIGTERM like a user's Ctrl-C,
and the brokers they named killed after, so nothing outlives them; and the
admin calls made to those brokers.

Failure modes: :func:`start_up` raises AssertionError with the command's
output (and ``logs()``) when it does not print ``ready`` within its
timeout, after stopping it.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from typing import Callable, Iterable


def start_up(args: list[str], on_line: Callable[[str], None], output: list[str], timeout: float, what: str,
             pids: Callable[[], Iterable[int]], logs: Callable[[], str] = lambda: "",
             root: str | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``python -m magnetar.cli *args``; each line goes to ``output`` and
    ``on_line``; returns once it printed ``ready``. On a time-out, stops it
    and kills ``pids()`` (the brokers it named so far). ``root``: the
    checkout whose code it runs (None: the one importable here; a bench's
    peer tree otherwise: ``-m`` puts the cwd first on ``sys.path``). ``env``:
    added to its environment (its ``PYTHONPATH`` after ``root``)."""
    added = dict(env or {})
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if root is not None:
        env["PYTHONPATH"] = root
    if "PYTHONPATH" in added:
        added["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), added["PYTHONPATH"]) if p)
    env.update(added)
    proc = subprocess.Popen([sys.executable, "-m", "magnetar.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=root)
    ready = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            output.append(line.rstrip())
            on_line(line)
            if line.strip() == "ready":
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(timeout):
        stop_up(proc, pids())
        raise AssertionError(f"{what} did not start:\n" + "\n".join(output) + logs())
    return proc


def stop_up(proc: subprocess.Popen | None, pids: Iterable[int], timeout: float = 60.0) -> int | None:
    """SIGTERM (SIGKILL after ``timeout`` s), then SIGKILL to every pid in
    ``pids`` still alive; the command's exit status."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pid in pids:  # nothing may outlive the command
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode


def admin_call(admin_url: str, path: str, method: str = "GET", body=None, token: str | None = None):
    """One admin REST call; its JSON answer (None when empty)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(admin_url + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
        return json.loads(raw) if raw else None
