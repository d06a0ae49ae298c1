"""A test bed of hosts on one machine: one Linux network namespace per host,
each joined by a veth pair to a bridge of ours, with an address of its own
in a private /24 (``10.251.<n>.0/24``, free of every address and route the
machine has). Processes started on a host (``ip netns exec``) see only its
``lo`` and its ``veth0``: they reach the other hosts by those addresses and
nothing outside this machine.

::

    host namespace: bridge mg<tag>br  .1 (the starter's own view: health checks)
                      |  veth mg<tag>v<i> (host end)
    namespace mg-<tag>-<host>: veth0  .(10 + i)

Faults between hosts (none needs netem, tc or iptables: the kernel here has
none):

- :meth:`HostBed.cut`: packets from one host to another's address vanish
  (a permanent neighbour entry in the sender's namespace pointing that
  address at a MAC nobody has). One-way at the packet level; ``both=True``
  cuts the way back too;
- :meth:`HostBed.reset`: the host's TCP connections to another aborted
  (``ss -K``), as a timeout or a middlebox ends them;
- :meth:`HostBed.isolate`: the host's veth goes down: nothing reaches it,
  it reaches nothing;
- :meth:`HostBed.heal`: every cut and isolation undone (:meth:`HostBed.uncut`
  and :meth:`HostBed.rejoin` undo one, for faults that overlap);
- :meth:`HostBed.kill_all`: every process on the host killed (SIGKILL),
  the host still up (its kernel resets the connections they had);
- :meth:`HostBed.lose`: the same and the host isolated until healed, as a
  machine that died (no resets: peers notice by their own timeouts). Its
  disk is the caller's to delete.

Only our own objects are touched: namespaces ``mg-<tag>-*``, links
``mg<tag>br`` and ``mg<tag>v<i>``. :meth:`HostBed.setup` first removes such
leftovers of an earlier run of the same tag; it refuses while processes
still run in them (another bed of the tag at work) unless told to replace
it; :meth:`HostBed.teardown` kills every process
in our namespaces and deletes them; it is idempotent.

A developer tool (tools/pyproject.toml): nothing in ``magnetar/`` imports it.

Failure modes: :class:`HostsUnavailable` when not root or ``ip`` is
missing (a test fails with that line, it does not skip);
:class:`HostsError` when a command fails or no /24 is free.
"""
from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .lifetime import dying_with_parent

#: A locally administered MAC no interface of ours has.
NOWHERE_MAC = "02:00:5e:00:be:ef"
NS_VETH = "veth0"


class HostsUnavailable(RuntimeError):
    """The test bed cannot be made here (not root, no ``ip``)."""


class HostsError(RuntimeError):
    """A namespace, link, address or route could not be made or changed."""


def unavailable_reason() -> str | None:
    """Why this process cannot make the test bed, or None if it can."""
    if os.geteuid() != 0:
        return ("the test bed of hosts needs root (it makes network namespaces, veth pairs and a bridge): "
                "run it as root (CI does)")
    if shutil.which("ip") is None:
        return "the test bed of hosts needs the ip command (iproute2): apt-get install iproute2"
    return None


def _ip(*args: str, check: bool = True) -> str:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise HostsError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result.stdout


def free_subnet(tag: str) -> ipaddress.IPv4Network:
    """A /24 in 10.251.0.0/16 that no address or route of the machine
    touches; the first tried depends on ``tag`` (two beds, two subnets)."""
    used = []
    for m in re.finditer(r"\binet (\d+\.\d+\.\d+\.\d+/\d+)", _ip("-4", "-o", "addr", "show")):
        used.append(ipaddress.ip_interface(m.group(1)).network)
    for line in _ip("-4", "route", "show").splitlines():
        first = line.split(" ", 1)[0]
        if first and first[0].isdigit():
            used.append(ipaddress.ip_network(first if "/" in first else first + "/32", strict=False))
    start = sum(tag.encode()) % 256
    for k in range(256):
        candidate = ipaddress.ip_network(f"10.251.{(start + k) % 256}.0/24")
        if not any(candidate.overlaps(net) for net in used):
            return candidate
    raise HostsError("no free /24 in 10.251.0.0/16 for the test bed")


@dataclass
class Process:
    """One process started on a host."""
    host: str
    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; its exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGCONT)
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class HostBed:
    """The bridge and namespaces of one tag; see the module docstring.
    ``hosts``: the host names, in address order. ``detached``: processes
    outlive the process that started them (``make hosts-up``); otherwise
    the kernel kills them when it dies."""
    tag: str
    hosts: list[str]
    detached: bool = False
    subnet: ipaddress.IPv4Network | None = None
    processes: list[Process] = field(default_factory=list)
    _cuts: list[tuple[str, str]] = field(default_factory=list)
    _down: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9]{1,8}", self.tag):
            raise ValueError(f"tag {self.tag!r}: 1-8 lowercase letters or digits (link names hold 15 bytes)")
        for host in self.hosts:
            if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", host):
                raise ValueError(f"host name {host!r}: lowercase letters, digits and dashes")

    # -- names and addresses ----------------------------------------------------------------
    def namespace(self, host: str) -> str:
        return f"mg-{self.tag}-{host}"

    @property
    def bridge(self) -> str:
        return f"mg{self.tag}br"

    def _veth(self, host: str) -> str:
        return f"mg{self.tag}v{self.hosts.index(host)}"

    def address(self, host: str) -> str:
        assert self.subnet is not None, "setup() first"
        return str(self.subnet.network_address + 10 + self.hosts.index(host))

    @property
    def gateway(self) -> str:
        """The bridge's own address: the starting process's way to the hosts."""
        assert self.subnet is not None, "setup() first"
        return str(self.subnet.network_address + 1)

    def _ours(self, name: str) -> bool:
        return name.startswith(f"mg-{self.tag}-")

    def _our_link(self, name: str) -> bool:
        return re.fullmatch(rf"mg{re.escape(self.tag)}(br|v\d+)", name) is not None

    # -- life ---------------------------------------------------------------------------------
    def setup(self, replace: bool = False) -> "HostBed":
        """Make the bridge and one namespace per host (after removing this
        tag's leftovers). A process still running in one of them is another
        bed of this tag at work: HostsError, unless ``replace`` (then it is
        killed). Raises HostsUnavailable or HostsError (after undoing what
        it made)."""
        reason = unavailable_reason()
        if reason:
            raise HostsUnavailable(reason)
        if not replace:
            busy = [ns for ns in self.our_namespaces() if _ip("netns", "pids", ns, check=False).split()]
            if busy:
                raise HostsError(f"processes run in {', '.join(busy[:3])}: another test bed with tag "
                                 f"{self.tag!r} is at work; stop it (magnetar-chaos hosts down --tag {self.tag}) "
                                 f"or use another tag")
        self.remove_leftovers()
        self.subnet = free_subnet(self.tag)
        prefix = self.subnet.prefixlen
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/{prefix}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for host in self.hosts:
                ns, veth = self.namespace(host), self._veth(host)
                _ip("netns", "add", ns)
                _ip("link", "add", veth, "type", "veth", "peer", "name", NS_VETH, "netns", ns)
                _ip("link", "set", veth, "master", self.bridge)
                _ip("link", "set", veth, "up")
                _ip("-n", ns, "addr", "add", f"{self.address(host)}/{prefix}", "dev", NS_VETH)
                _ip("-n", ns, "link", "set", NS_VETH, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except HostsError:
            self.teardown()
            raise
        return self

    def our_namespaces(self) -> list[str]:
        names = [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]
        return [ns for ns in names if self._ours(ns)]

    def remove_leftovers(self) -> None:
        """Kill what runs in this tag's namespaces and delete them and our links."""
        for ns in self.our_namespaces():
            _kill_namespace(ns)
            _ip("netns", "del", ns, check=False)
        for line in _ip("-o", "link", "show").splitlines():
            m = re.match(r"\d+: ([^:@]+)[@:]", line)
            if m and self._our_link(m.group(1)):
                _ip("link", "del", m.group(1), check=False)

    def teardown(self) -> None:
        """Stop every process of ours, delete the namespaces and links.
        Idempotent, never raises."""
        # SIGTERM to all at once (clean shutdowns overlap), then whatever is left is killed.
        for proc in self.processes:
            if proc.alive:
                proc.popen.send_signal(signal.SIGCONT)
                proc.popen.terminate()
        deadline = time.monotonic() + 10.0
        for proc in self.processes:
            try:
                proc.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        self.processes.clear()
        self._cuts.clear()
        self._down.clear()
        try:
            self.remove_leftovers()
        except HostsError:
            pass

    # -- processes ----------------------------------------------------------------------------
    def start(self, host: str, name: str, argv: list[str], log_path: Path, *,
              env: dict[str, str] | None = None, cwd: Path | None = None) -> Process:
        """Run ``argv`` on ``host`` (``ip netns exec``, which execs in
        place: the process is the program, signals reach it), its stdout
        and stderr appended to ``log_path``."""
        args = ["ip", "netns", "exec", self.namespace(host), *argv]
        if not self.detached:
            args = dying_with_parent(args)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            popen = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, **(env or {})), cwd=cwd,
                                     start_new_session=self.detached)
        proc = Process(host, name, argv, log_path, popen)
        self.processes.append(proc)
        return proc

    def run(self, host: str, argv: list[str], *, timeout: float = 120.0, env: dict[str, str] | None = None,
            check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` on ``host`` to its end (``input`` on its stdin); its
        output captured. AssertionError with the output if it fails and ``check``."""
        args = dying_with_parent(["ip", "netns", "exec", self.namespace(host), *argv])
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, input=input,
                                env=dict(os.environ, **(env or {})))
        if check and result.returncode != 0:
            raise AssertionError(f"on {host}: {' '.join(argv)} exited {result.returncode}:\n"
                                 f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result

    def on(self, host: str) -> list[Process]:
        return [p for p in self.processes if p.host == host]

    # -- faults -------------------------------------------------------------------------------
    def cut(self, source: str, destination: str, *, both: bool = False) -> None:
        """Packets from ``source`` to ``destination``'s address vanish
        (and back, with ``both``); :meth:`heal` undoes it."""
        pairs = [(source, destination)] + ([(destination, source)] if both else [])
        for a, b in pairs:
            _ip("-n", self.namespace(a), "neigh", "replace", self.address(b), "lladdr", NOWHERE_MAC,
                "dev", NS_VETH, "nud", "permanent")
            self._cuts.append((a, b))

    def reset(self, host: str, peer: str) -> None:
        """Every TCP connection between ``host`` and ``peer``'s address
        aborted on ``host``'s side (``ss -K``: the kernel sends a reset),
        as a middlebox or a peer's timeout would end it."""
        subprocess.run(["ip", "netns", "exec", self.namespace(host), "ss", "-K", "dst", self.address(peer)],
                       capture_output=True, check=False)

    def isolate(self, host: str) -> None:
        """Nothing reaches ``host`` and it reaches nothing (its link down)."""
        _ip("link", "set", self._veth(host), "down")
        self._down.add(host)

    def kill_all(self, host: str) -> None:
        """Every process on ``host`` killed (SIGKILL); its link stays up, so
        its kernel answers what comes later with resets."""
        _kill_namespace(self.namespace(host))
        for proc in self.on(host):
            proc.kill()

    def lose(self, host: str) -> None:
        """The host is lost: every process on it killed, its link down."""
        self.isolate(host)
        _kill_namespace(self.namespace(host))
        for proc in self.on(host):
            proc.kill()

    def heal(self) -> None:
        """Every cut and isolation undone. HostsError if an entry survives."""
        for host in sorted(self._down):
            self.rejoin(host)
        while self._cuts:
            self.uncut(*self._cuts[-1])

    def rejoin(self, host: str) -> None:
        """Undo :meth:`isolate` (or :meth:`lose`) of ``host`` only: its link up."""
        _ip("link", "set", self._veth(host), "up")
        self._down.discard(host)

    def uncut(self, source: str, destination: str) -> None:
        """Undo one :meth:`cut` from ``source`` to ``destination`` only (the
        faults of several nemeses at once each heal their own). HostsError
        if the entry survives."""
        ns, address = self.namespace(source), self.address(destination)
        _ip("-n", ns, "neigh", "del", address, "dev", NS_VETH, check=False)
        if NOWHERE_MAC in _ip("-n", ns, "neigh", "show", address, "dev", NS_VETH, check=False):
            raise HostsError(f"the cut of {address} in {ns} survived the heal")
        try:
            self._cuts.remove((source, destination))
        except ValueError:
            pass


def _kill_namespace(ns: str, timeout: float = 5.0) -> None:
    """SIGKILL every process in namespace ``ns``, and wait until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise HostsError(f"processes {pids} in {ns} outlived SIGKILL")
        time.sleep(0.05)
