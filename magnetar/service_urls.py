"""Checking a service URL given on the command line, before any work starts.

Commands that speak the binary protocol need ``pulsar://`` (or
``pulsar+ssl://``); an ``http://`` admin URL there is a common slip, and a
URL with no broker behind it should be said at once, not after a 30 s
timeout. Both checks raise ValueError with a message that says what to do.
"""
from __future__ import annotations

import socket
from urllib.parse import urlsplit


def require_pulsar_url(url: str, flag: str = "--service-url/-u") -> list[tuple[str, int]]:
    """``(host, port)`` of each host of a pulsar:// or pulsar+ssl:// URL
    (``pulsar://a:6650,b:6650`` names two, as Pulsar's clients accept);
    ValueError otherwise."""
    from magnetar.client.errors import InvalidUrl
    from magnetar.client.service_hosts import split_service_url

    parts = urlsplit(url)
    if parts.scheme in ("http", "https"):
        first = url.partition("://")[2].split(",")[0].split("/")[0].rsplit(":", 1)[0]
        raise ValueError(f"{url} is an admin (HTTP) URL; {flag} wants the broker's Pulsar URL, "
                         f"e.g. pulsar://{first or 'localhost'}:6650")
    try:
        singles = split_service_url(url)
    except InvalidUrl as exc:
        if parts.scheme not in ("pulsar", "pulsar+ssl"):
            raise ValueError(f"{url} is not a Pulsar URL; {flag} wants pulsar://HOST:PORT[,HOST:PORT...]") from None
        raise ValueError(f"{exc}; {flag} wants pulsar://HOST:PORT[,HOST:PORT...]") from None
    hosts = []
    for single in singles:
        one = urlsplit(single)
        hosts.append((one.hostname, one.port or (6651 if one.scheme == "pulsar+ssl" else 6650)))
    return hosts


def require_broker(url: str, timeout: float = 3.0) -> None:
    """ValueError unless something accepts connections at one of ``url``'s
    hosts (any broker of a cluster answers lookups)."""
    errors = []
    for host, port in require_pulsar_url(url):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            errors.append(str(exc.strerror or exc))
    raise ValueError(f"no broker at {url} ({'; '.join(dict.fromkeys(errors))}): start one (make standalone) "
                     f"or give its URL with --service-url/-u")
