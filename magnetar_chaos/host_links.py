"""A degraded link on the test bed of hosts (magnetar_harness/hosts.py): a
:class:`~magnetar_chaos.link_proxy.DegradingProxy` standing between one host and
chosen ports of other hosts, with nothing changed in the programs on them.

::

    link = HostLink(bed, "client", [(bed.address("broker-1"), 6650), ...]).up()
    link.proxy.set(delay_s=0.0005)          # any DegradingProxy setting, cut(), stats()
    link.down()                             # idempotent

How: each destination address is made local in the source host's namespace
(an address on its ``lo``) and the proxy listens there, on that address and
port, with a socket made inside the source's namespace; it connects on from
the starting process's own namespace, through the bridge. The source's
programs dial the addresses they always dial (a broker's advertised address
from a lookup included). TLS should pass as it is (bytes unchanged, the
certificate names the same address): not yet exercised on the bed.

What to know:

- the source's connections to those addresses on ports not listed are
  refused while the link stands: list every port the source uses there;
- connections the source had open to them stop working when the link comes
  up (their packets now land locally): :meth:`HostLink.up` resets them
  (``ss -K``), so their programs reconnect through the proxy;
- the destination sees the connections come from the bridge's address, not
  the source's: a :meth:`HostBed.cut` between the two does not touch them
  (stall or cut the proxy instead); only the source's own connections pass
  through the proxy, not the destination's connections to the source;
- the source namespace is set never to answer ARP for an address of its
  ``lo`` (``arp_ignore=1``, ``arp_announce=2``): it must not draw the other
  hosts' packets for the destinations to itself. Left so on :meth:`down`.

Failure modes: HostsError when an address or a socket cannot be made
(what was made is undone); ValueError for a host the bed does not have.
"""
from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import threading

from magnetar_harness.hosts import HostBed, HostsError

from .link_proxy import DegradingProxy, LinkSettings

_CLONE_NEWNET = 0x40000000


class HostLink:
    """The proxied link from ``source`` to ``targets`` (address, port); its
    own :class:`DegradingProxy` (``settings`` to begin with), started by :meth:`up`."""

    def __init__(self, bed: HostBed, source: str, targets: list[tuple[str, int]],
                 settings: LinkSettings | None = None, seed: int | None = None) -> None:
        if source not in bed.hosts:
            raise ValueError(f"{source!r} is not a host of the bed ({', '.join(bed.hosts)})")
        self.bed = bed
        self.source = source
        self.targets = list(dict.fromkeys(targets))
        self.proxy = DegradingProxy(settings, seed)
        self._borrowed: list[str] = []

    @property
    def namespace(self) -> str:
        return self.bed.namespace(self.source)

    @property
    def addresses(self) -> list[str]:
        return list(dict.fromkeys(address for address, _ in self.targets))

    def up(self) -> "HostLink":
        """Borrow the addresses, listen on every target's port, reset the
        source's old connections to them."""
        try:
            _in_namespace(self.namespace, _arp_quiet)
            for address in self.addresses:
                _ip("-n", self.namespace, "addr", "add", f"{address}/32", "dev", "lo")
                self._borrowed.append(address)
            self.proxy.start()
            for address, port in self.targets:
                sock = _in_namespace(self.namespace, lambda a=address, p=port: _listening(a, p))
                self.proxy.listen((address, port), sock=sock)
        except (OSError, HostsError) as exc:
            self.down()
            raise HostsError(f"the link from {self.source} could not be made: {exc}") from exc
        self._reset_connections()
        return self

    def down(self) -> None:
        """The proxy stopped (its connections reset), the addresses given
        back; the source's programs reconnect straight. Idempotent."""
        self.proxy.stop()
        while self._borrowed:
            _ip("-n", self.namespace, "addr", "del", f"{self._borrowed.pop()}/32", "dev", "lo", check=False)

    def _reset_connections(self) -> None:
        for address in self.addresses:
            subprocess.run(["ip", "netns", "exec", self.namespace, "ss", "-K", "dst", address],
                           capture_output=True, check=False)

    def __enter__(self) -> "HostLink":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()


def _ip(*args: str, check: bool = True) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise HostsError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")


def _listening(address: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    sock.listen(256)
    sock.setblocking(False)
    return sock


def _arp_quiet() -> None:
    # /proc/sys/net shows the namespace of the thread that opens it.
    for name, value in (("arp_ignore", "1"), ("arp_announce", "2")):
        with open(f"/proc/sys/net/ipv4/conf/all/{name}", "w") as f:
            f.write(value)


def _in_namespace(namespace: str, fn):
    """``fn()`` run on a thread of its own that entered network namespace
    ``namespace`` (setns; os.setns arrives with Python 3.12): a socket it
    makes stays in that namespace. Its result, or its exception raised."""
    out: dict = {}

    def run() -> None:
        try:
            fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.setns(fd, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {namespace}")
            finally:
                os.close(fd)
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            out["error"] = exc
    thread = threading.Thread(target=run, name=f"in-{namespace}")
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]
