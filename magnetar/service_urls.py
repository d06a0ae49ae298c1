"""Checking a service URL given on the command line, before any work starts.

Commands that speak the binary protocol need ``pulsar://`` (or
``pulsar+ssl://``); an ``http://`` admin URL there is a common slip, and a
URL with no broker behind it should be said at once, not after a 30 s
timeout. Both checks raise ValueError with a message that says what to do.
"""
from __future__ import annotations

import socket
from urllib.parse import urlsplit


def require_pulsar_url(url: str, flag: str = "--service-url/-u") -> tuple[str, int]:
    """``(host, port)`` of a pulsar:// or pulsar+ssl:// URL; ValueError otherwise."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https"):
        raise ValueError(f"{url} is an admin (HTTP) URL; {flag} wants the broker's Pulsar URL, "
                         f"e.g. pulsar://{parts.hostname or 'localhost'}:6650")
    if parts.scheme not in ("pulsar", "pulsar+ssl") or not parts.hostname:
        raise ValueError(f"{url} is not a Pulsar URL; {flag} wants pulsar://HOST:PORT")
    try:
        port = parts.port or (6651 if parts.scheme == "pulsar+ssl" else 6650)
    except ValueError:
        raise ValueError(f"{url} has a bad port") from None
    return parts.hostname, port


def require_broker(url: str, timeout: float = 3.0) -> None:
    """ValueError unless something accepts connections at ``url``'s address."""
    host, port = require_pulsar_url(url)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise ValueError(f"no broker at {url} ({exc.strerror or exc}): start one (make standalone) "
                         f"or give its URL with --service-url/-u") from None
