"""Restarting a cluster's brokers one at a time (``magnetar admin brokers
restart-rolling``), through the admin API only.

For each broker, the leader last (one election instead of one per restart):
wait until the cluster has settled (no bundle moving), then stop the broker
after its bundles moved away (a drain, so their clients follow without a
lookup), then wait until it serves again (a new registry record: a later
``started``, not draining, its health check ok, a load report sent) and the
cluster has settled again, before the next one.

Two ways to restart one broker: by default ``POST .../brokers/shutdown`` (it
drains and exits) and its supervisor starts it again (systemd's
``Restart=always``, ``magnetar cluster up --restart-exited``); with an
``exec`` template, ``POST .../brokers/drain`` and then that shell command,
which must restart the broker (``{broker}``, ``{host}``, ``{port}`` are
replaced: ``ssh {host} sudo systemctl restart magnetar-broker``).

Failure modes: :class:`RollingRestartError`, naming the broker and what did
not happen in time; the procedure stops there, the brokers after it are not
touched.
"""
from __future__ import annotations

import shlex
import subprocess
import time
from typing import Callable

from .client import AdminApiError, AdminClient, AdminUnreachable


class RollingRestartError(Exception):
    pass


LOAD_REPORT = "/admin/v2/broker-stats/load-report"


def _ask(clients: list[AdminClient], path: str):
    """The answer of the first of ``clients`` that answers (None if none does)."""
    for c in clients:
        try:
            return c.request("GET", path)
        except (AdminApiError, AdminUnreachable, OSError):
            continue
    return None


def _wait(what: str, check: Callable[[], bool], timeout_s: float, poll_s: float = 0.5) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout_s:
            raise RollingRestartError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(poll_s)
    return time.monotonic() - started


def wait_settled(clients: list[AdminClient], settle_s: float, timeout_s: float, what: str) -> None:
    """Wait until no bundle has been moving for ``settle_s`` in a row."""
    quiet_since: list[float | None] = [None]

    def settled() -> bool:
        moving = _ask(clients, "/admin/v2/brokers/transitions")
        now = time.monotonic()
        if moving is None or moving:
            quiet_since[0] = None
            return False
        if quiet_since[0] is None:
            quiet_since[0] = now
        return now - quiet_since[0] >= settle_s

    _wait(what, settled, timeout_s)


def restart_rolling(seed: AdminClient, client_for: Callable[[str], AdminClient], *, exec_template: str | None = None,
                    settle_s: float = 5.0, timeout_s: float = 120.0,
                    say: Callable[[str], None] = print, run: Callable[[str], int] | None = None) -> list[dict]:
    """Restart every live broker of ``seed``'s cluster in turn (module
    docstring); ``client_for(broker_id)`` talks to that broker. Returns one
    row per broker: its id, the drain's answer (with ``exec``), the seconds
    until it served again."""
    run = run or (lambda cmd: subprocess.run(cmd, shell=True).returncode)
    report = seed.request("GET", LOAD_REPORT)
    if not isinstance(report, dict) or not report:
        raise RollingRestartError("the broker answered no load report: is it a cluster member?")
    brokers = sorted(report)
    try:
        leader = seed.request("GET", "/admin/v2/brokers/leaderBroker").get("brokerId")
    except AdminApiError:
        leader = None
    order = [b for b in brokers if b != leader] + ([leader] if leader in brokers else [])
    clients = {b: client_for(b) for b in brokers}
    wait_settled([seed, *clients.values()], settle_s, timeout_s, "the cluster settling before the first restart")
    rows = []
    for broker in order:
        others = [clients[b] for b in brokers if b != broker]
        started_before = report.get(broker, {}).get("started", 0.0)
        row: dict = {"broker": broker}
        t0 = time.monotonic()
        if exec_template:
            say(f"{broker}: draining")
            row["drain"] = clients[broker].request("POST", "/admin/v2/brokers/drain")
            host, _, port = broker.rpartition(":")
            command = exec_template.format(broker=shlex.quote(broker), host=shlex.quote(host), port=port)
            say(f"{broker}: {command}")
            code = run(command)
            if code != 0:
                raise RollingRestartError(f"{broker}: the restart command exited with {code}: {command}")
        else:
            say(f"{broker}: shutting down (drain, then exit; its supervisor starts it again)")
            clients[broker].request("POST", "/admin/v2/brokers/shutdown")

        def back() -> bool:
            doc = _ask(others, LOAD_REPORT) or {}
            entry = doc.get(broker)
            if not entry or entry.get("started", 0.0) <= started_before or entry.get("draining"):
                return False
            if not entry.get("load"):
                return False  # no load report yet: the load manager does not see it yet
            try:
                return clients[broker].request("GET", "/admin/v2/brokers/health") == "ok"
            except (AdminApiError, AdminUnreachable, OSError):
                return False

        _wait(f"{broker} serving again", back, timeout_s)
        wait_settled(list(clients.values()), settle_s, timeout_s, f"the cluster settling after {broker}")
        row["seconds"] = round(time.monotonic() - t0, 1)
        say(f"{broker}: serving again; cluster settled ({row['seconds']} s)")
        rows.append(row)
        report = _ask(list(clients.values()), LOAD_REPORT) or report
    return rows
