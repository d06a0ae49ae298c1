"""A service URL naming one or more brokers, and which of them to ask next.

Pulsar's clients accept ``pulsar://h1:6650,h2:6651,h3`` (and the same after
``pulsar+ssl://``): one scheme, then hosts separated by commas, each with
its own port or the scheme's default. A client asks them for lookups and
partition counts only (the answer names the broker to produce or consume
on), so any live broker of the cluster will do.

:class:`ServiceHosts` keeps the hosts in the order given and a current one:
the client starts with the first, and moves to the next (wrapping around)
when the current one cannot be reached or does not answer in time; it then
stays on the host that worked, so one dead broker costs one timeout, not
one per lookup.

Failure modes: :func:`split_service_url` raises InvalidUrl for a wrong
scheme, an empty host (``pulsar://a:1,,b:2``, a trailing comma), a bad
port, or a path or query after the hosts.
"""
from __future__ import annotations

from .connection import TLS_SCHEME, parse_service_url
from .errors import InvalidUrl

SCHEMES = ("pulsar", TLS_SCHEME)


def split_service_url(url: str) -> list[str]:
    """One single-host URL per host of ``url``, in its order, each with the
    scheme of ``url``: ``pulsar://a:1,b:2`` gives ``["pulsar://a:1",
    "pulsar://b:2"]``. A trailing ``/`` is allowed (it often is in configs);
    anything else wrong raises InvalidUrl naming the whole URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise InvalidUrl(f"unsupported service URL {url!r} (expected pulsar://host:port[,host:port...] "
                         f"or pulsar+ssl://host:port[,host:port...])")
    rest = rest.rstrip("/")
    if any(c in rest for c in "/?#@"):
        # A path, query or user part: a broker URL has none, and guessing
        # which part was meant would connect somewhere nobody asked for.
        raise InvalidUrl(f"service URL {url!r} has something after its hosts; give scheme://host:port,... only")
    urls = []
    for position, host in enumerate(rest.split(","), start=1):
        if not host.strip():
            raise InvalidUrl(f"service URL {url!r} has an empty host (number {position}): "
                             f"hosts are separated by single commas")
        single = f"{scheme}://{host.strip()}"
        try:
            parse_service_url(single)
        except InvalidUrl:
            raise InvalidUrl(f"service URL {url!r}: host number {position} ({host!r}) is not host[:port]") from None
        urls.append(single)
    return urls


class ServiceHosts:
    """The hosts of a service URL and the one to try first.

    Not thread-safe: a client uses it from its event loop only.
    """

    def __init__(self, url: str) -> None:
        self.urls = split_service_url(url)
        self._current = 0

    @property
    def current(self) -> str:
        return self.urls[self._current]

    def in_order(self) -> list[str]:
        """Every host once, the current one first, then the ones after it."""
        return self.urls[self._current:] + self.urls[:self._current]

    def failed(self, url: str) -> None:
        """``url`` could not be reached or did not answer: if it is the
        current host, the next one becomes current. A failure of a host that
        is no longer current (an older attempt ending late) moves nothing,
        so concurrent lookups do not skip a good host."""
        if self.urls[self._current] == url:
            self._current = (self._current + 1) % len(self.urls)
