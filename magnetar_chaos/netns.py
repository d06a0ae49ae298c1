"""A private network for a chaos cluster, so the nemesis can partition it
(the ``partition`` fault): one Linux network namespace per broker, each
joined by a veth pair to a bridge in the host namespace.

Layout, in a /24 of 10/8 drawn from the seed (:func:`choose_subnet`) among
those no host address or route touches::

    host namespace: bridge mgc<tag>br   .1 (clients' source)  .2 (etcd listens here)
                                        .3 (the object store listens here, --storage object)
                       |  veth mgc<tag>b<k> (host end)
    namespace mgc-<tag>-b<k>: veth0     .(10 + k)   broker k listens and advertises here

Clients in the host namespace reach every broker through the bridge; brokers
reach etcd and each other through it (switched, so no forwarding needs
turning on). The shared storage is a directory: file systems are not
per-namespace.

Partitions (:meth:`Network.partition`, one at a time, undone by
:meth:`Network.heal`); ``k`` is the victim:

- ``isolate``: broker k's host end of its veth goes down: nothing reaches it
  and it reaches nothing (etcd, the other brokers, the clients);
- ``zombie``: broker k cannot talk to etcd nor to the other brokers, yet the
  clients still reach it (a minority partition with clients on both sides);
- ``etcd``: broker k's packets to etcd vanish; clients and brokers still
  reach it (etcd's packets to k still arrive: on an established stream k
  keeps getting what etcd pushes, while its keepalives and acks are lost);
- ``clients``: broker k's packets to the clients' source address (the
  bridge's .1) vanish; etcd and the other brokers still reach it and it
  them. Its session stays alive, so it keeps its bundles while no client
  can talk to it (a client's SYN arrives, the SYN-ACK is lost; on an open
  connection the client's frames arrive and are acted on, the answers are
  lost);
- ``majority``: every broker but k is cut from etcd and from k (both
  ways); they still reach each other and the clients. Only k keeps a
  session: the majority of the brokers must give up their bundles, k takes
  them all;
- ``one-way``: broker k's packets to etcd and to the other brokers vanish,
  theirs to k still arrive (an entry in k's namespace only, none in the
  others'). A peer's SYN to k arrives and k's SYN-ACK is lost: the peer's
  connect hangs until its own timeout while k holds a half-open connection;
  k's own connects lose their SYN. Clients are not affected.

Not drawn by ``partition`` (:data:`MODES`) but cut on its own by the
``cut-objectstore`` fault: ``objectstore``, broker k's packets to the object
store's address (.3) vanish; etcd, the other brokers and the clients still
reach it and it them (its session stays; its commits cannot land).

All but ``isolate`` point the addresses to be cut at a MAC no interface has
(a permanent neighbour entry, inside the namespaces only): packets vanish
on the wire, as in a real partition, and the host's tables are not touched.
A neighbour entry is per destination, so every cut is one-way at the packet
level; a cut is two-way where both ends have an entry (``zombie``,
``majority``). (The kernel here has no netem, no tc actions and no
iptables.)

Only our own objects are ever touched: namespaces named ``mgc-<tag>-b<k>``,
links named ``mgc<tag>br`` and ``mgc<tag>b<k>``. :meth:`Network.setup`
first removes such leftovers of an earlier run of the same tag (a crash, a
SIGKILL), unless a process still lives in one of the namespaces: then a
concurrent run owns them and setup refuses. :meth:`Network.teardown`
deletes everything it made; it is idempotent, and registered with atexit as
a last resort.

Failure modes: :class:`PartitionUnavailable` (a ValueError: the run is
refused up front) when not root or ``ip`` is missing; :class:`NetworkError`
when a command fails or no /24 of 10/8 is free (setup undoes what it made).
"""
from __future__ import annotations

import atexit
import hashlib
import ipaddress
import os
import random
import re
import shutil
import subprocess
from dataclasses import dataclass

PREFIX = "mgc"
MODES = ("isolate", "zombie", "etcd", "clients", "majority", "one-way")
#: The cut of the ``cut-objectstore`` fault (not among the partitions drawn).
OBJECTSTORE_MODE = "objectstore"
#: A locally administered MAC no interface of ours has: frames sent to it
#: are flooded by the bridge and dropped by every receiver.
NOWHERE_MAC = "02:00:5e:00:de:ad"
NS_VETH = "veth0"


class PartitionUnavailable(ValueError):
    """The partition fault cannot run here (not root, no ``ip``)."""


class NetworkError(RuntimeError):
    """A namespace, link or address could not be made or changed."""


def unavailable_reason() -> str | None:
    """Why this process cannot make namespaces, or None if it can."""
    if os.geteuid() != 0:
        return ("the partition fault needs root (it makes network namespaces and veth pairs): "
                "run as root or leave partition out of --faults")
    if shutil.which("ip") is None:
        return "the partition fault needs the ip command (iproute2), which is not installed"
    return None


def run_tag(seed: int) -> str:
    """A short tag for this seed's names: the seed itself when it fits (so a
    leftover tells whose it is), else 8 hex digits of its hash. Link names
    hold at most 15 bytes: ``mgc`` + tag + ``br`` must fit."""
    if 0 <= seed < 10 ** 8:
        return str(seed)
    return hashlib.sha1(str(seed).encode()).hexdigest()[:8]


@dataclass(frozen=True)
class Names:
    tag: str

    def namespace(self, k: int) -> str:
        return f"{PREFIX}-{self.tag}-b{k}"

    def host_veth(self, k: int) -> str:
        return f"{PREFIX}{self.tag}b{k}"

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.tag}br"

    def is_namespace(self, name: str) -> bool:
        return re.fullmatch(rf"{PREFIX}-{re.escape(self.tag)}-b\d+", name) is not None

    def is_link(self, name: str) -> bool:
        return re.fullmatch(rf"{PREFIX}{re.escape(self.tag)}(br|b\d+)", name) is not None


def used_networks(addr_text: str, route_text: str) -> list[ipaddress.IPv4Network]:
    """The IPv4 networks the host already uses, from ``ip -4 -o addr show``
    and ``ip -4 route show`` (``default`` counts as nothing: every subnet
    is more specific than it)."""
    nets = []
    for m in re.finditer(r"\binet (\d+\.\d+\.\d+\.\d+/\d+)", addr_text):
        nets.append(ipaddress.ip_interface(m.group(1)).network)
    for line in route_text.splitlines():
        first = line.split(" ", 1)[0]
        if first and first[0].isdigit():
            nets.append(ipaddress.ip_network(first if "/" in first else first + "/32", strict=False))
        elif first in ("blackhole", "unreachable", "prohibit") and len(line.split()) > 1:
            nets.append(ipaddress.ip_network(line.split()[1], strict=False))
    return nets


def choose_subnet(seed: int, used: list[ipaddress.IPv4Network], tries: int = 4096) -> ipaddress.IPv4Network:
    """A /24 of 10/8 drawn from ``seed`` (its own random stream: the
    nemesis's draws stay the same) that overlaps none of ``used``. Raises
    NetworkError if ``tries`` draws all overlap."""
    rng = random.Random(f"chaos-subnet-{seed}")
    for _ in range(tries):
        candidate = ipaddress.ip_network(f"10.{rng.randrange(256)}.{rng.randrange(256)}.0/24")
        if not any(candidate.overlaps(net) for net in used):
            return candidate
    raise NetworkError("no free /24 in 10.0.0.0/8 for the chaos network")


@dataclass(frozen=True)
class Plan:
    """Addresses in ``subnet``: the bridge (clients), etcd, the object store, broker k."""
    subnet: ipaddress.IPv4Network

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def etcd(self) -> str:
        return str(self.subnet.network_address + 2)

    @property
    def objectstore(self) -> str:
        return str(self.subnet.network_address + 3)

    def broker(self, k: int) -> str:
        if not 0 <= k < 200:
            raise ValueError(f"broker index {k} out of range")
        return str(self.subnet.network_address + 10 + k)


def cuts(mode: str, victim: int, count: int, plan: Plan) -> list[tuple[int, str]]:
    """For a neighbour-entry partition: (broker whose namespace gets the
    entry, address it can no longer send to); see the module docstring for
    each mode. Raises ValueError for ``isolate`` or an unknown mode."""
    others = [k for k in range(count) if k != victim]
    if mode == "etcd":
        return [(victim, plan.etcd)]
    if mode == "zombie":
        return [(victim, plan.etcd)] + [e for k in others
                                        for e in ((victim, plan.broker(k)), (k, plan.broker(victim)))]
    if mode == "clients":
        return [(victim, plan.gateway)]
    if mode == "majority":
        return [e for k in others for e in ((k, plan.etcd), (k, plan.broker(victim)), (victim, plan.broker(k)))]
    if mode == "one-way":
        return [(victim, plan.etcd)] + [(victim, plan.broker(k)) for k in others]
    if mode == OBJECTSTORE_MODE:
        return [(victim, plan.objectstore)]
    raise ValueError(f"{mode!r} is not a neighbour-entry partition")


def describe(mode: str, victim: int, count: int) -> str:
    """The partition in words, for the nemesis's log line."""
    if mode == "majority":
        cut = ",".join(f"broker-{k}" for k in range(count) if k != victim)
        return f"majority {cut} cut from etcd and broker-{victim}"
    return f"{mode} broker-{victim}"


def _ip(*args: str, check: bool = True) -> str:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result.stdout


class Network:
    """The namespaces, veth pairs and bridge of one run; see the module docstring."""

    def __init__(self, seed: int, count: int) -> None:
        self.names = Names(run_tag(seed))
        self.seed = seed
        self.count = count
        self.plan: Plan | None = None
        self._made = False
        self._cut: list[tuple[int, str]] = []
        self._down: int | None = None

    def namespace(self, k: int) -> str:
        return self.names.namespace(k)

    def setup(self) -> Plan:
        """Make the network (after removing this tag's leftovers); returns its plan."""
        self.remove_leftovers()
        self.plan = Plan(choose_subnet(self.seed, used_networks(_ip("-4", "-o", "addr", "show"),
                                                                _ip("-4", "route", "show"))))
        self._made = True
        atexit.register(self.teardown)
        try:
            prefix = self.plan.subnet.prefixlen
            br = self.names.bridge
            _ip("link", "add", br, "type", "bridge")
            _ip("addr", "add", f"{self.plan.gateway}/{prefix}", "dev", br)
            _ip("addr", "add", f"{self.plan.etcd}/{prefix}", "dev", br)  # secondary: clients keep .1
            _ip("addr", "add", f"{self.plan.objectstore}/{prefix}", "dev", br)
            _ip("link", "set", br, "up")
            for k in range(self.count):
                ns, host_end = self.names.namespace(k), self.names.host_veth(k)
                _ip("netns", "add", ns)
                _ip("link", "add", host_end, "type", "veth", "peer", "name", NS_VETH, "netns", ns)
                _ip("link", "set", host_end, "master", br)
                _ip("link", "set", host_end, "up")
                _ip("-n", ns, "addr", "add", f"{self.plan.broker(k)}/{prefix}", "dev", NS_VETH)
                _ip("-n", ns, "link", "set", NS_VETH, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except NetworkError:
            self.teardown()
            raise
        return self.plan

    def remove_leftovers(self) -> None:
        """Delete this tag's namespaces and links left by an earlier run.
        Raises NetworkError if a process lives in one (a run in progress)."""
        leftovers = [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]
        leftovers = [ns for ns in leftovers if self.names.is_namespace(ns)]
        for ns in leftovers:
            pids = _ip("netns", "pids", ns, check=False).split()
            if pids:
                raise NetworkError(f"processes {' '.join(pids)} run in namespace {ns}: another chaos run "
                                   f"with this seed is going on, or the brokers of one that was killed "
                                   f"outlived it; wait for it or stop them, or use another seed")
        for ns in leftovers:
            _ip("netns", "del", ns, check=False)
        self._delete_links()

    def _delete_links(self) -> None:
        for line in _ip("-o", "link", "show").splitlines():
            m = re.match(r"\d+: ([^:@]+)[@:]", line)
            if m and self.names.is_link(m.group(1)):
                _ip("link", "del", m.group(1), check=False)

    def teardown(self) -> None:
        """Delete every namespace and link of ours. Idempotent, never raises;
        call it once the processes inside are gone (a namespace with a live
        process outlives its name)."""
        if not self._made:
            return
        self._made = False
        self._cut, self._down = [], None
        for k in range(self.count):
            _ip("netns", "del", self.names.namespace(k), check=False)  # takes its veth pair along
        self._delete_links()
        try:
            atexit.unregister(self.teardown)
        except Exception:  # noqa: BLE001 - at exit, nothing left to do
            pass

    # -- the fault ------------------------------------------------------------------------------
    def partition(self, mode: str, victim: int) -> None:
        """Cut broker ``victim`` off as ``mode`` says (one of MODES); heal() undoes it."""
        assert self.plan is not None, "setup() first"
        if self._cut or self._down is not None:
            raise NetworkError("a partition is already in place")
        if mode == "isolate":
            self._down = victim
            _ip("link", "set", self.names.host_veth(victim), "down")
            return
        for k, address in cuts(mode, victim, self.count, self.plan):
            self._cut.append((k, address))
            _ip("-n", self.names.namespace(k), "neigh", "replace", address, "lladdr", NOWHERE_MAC,
                "dev", NS_VETH, "nud", "permanent")

    def heal(self) -> None:
        """Undo the partition in place (if any): the link up, the entries
        gone (ARP finds the real MACs again). Raises NetworkError if an
        entry could not be removed."""
        if self._down is not None:
            _ip("link", "set", self.names.host_veth(self._down), "up")
            self._down = None
        while self._cut:
            k, address = self._cut.pop()
            _ip("-n", self.names.namespace(k), "neigh", "del", address, "dev", NS_VETH, check=False)
            # A heal that left an entry behind would be a partition nobody
            # logged: every later fault's verdict would be wrong.
            left = _ip("-n", self.names.namespace(k), "neigh", "show", address, "dev", NS_VETH, check=False)
            if NOWHERE_MAC in left:
                raise NetworkError(f"the entry for {address} in {self.names.namespace(k)} survived the heal")
