"""The systems a chaos run can target, and the faults each one takes.

- ``standalone``: one ``magnetar standalone`` process, its clients
  connected through a proxy (:mod:`.proxy`). Faults: ``kill`` (SIGKILL, down
  0.5-2 s, restart on the same data), ``pause`` (SIGSTOP 1-6 s),
  ``restart`` (SIGTERM, start), ``cut`` (every client connection cut, two to
  five times over 0.5-2 s: frames lost mid-way, clients reconnect),
  ``disk-full`` (the data directory, a 512 MB tmpfs, filled for 1-3 s:
  see :mod:`.disk`; needs root), ``fsync-error`` (its fsync and fdatasync
  calls fail with EIO for 1-3 s: see :mod:`.fsync`; needs ptrace),
  ``clock-jump`` (its wall clock steps forward or back, held 3-6 s or left:
  see :mod:`.clock`; needs libfaketime, installed when root).
- ``cluster``: an etcd and three ``magnetar broker`` processes on shared
  storage (session TTL 3 s); the clients' service URL names all three
  (``pulsar://b0,b1,b2``), so any broker may be hit. The same faults hit
  one broker, so its bundles move to the others; a pause may outlast the
  session (a zombie owner comes back). Also ``kill-etcd`` (SIGKILL, restart
  on the same data after 1-3 s) and ``pause-etcd`` (SIGSTOP 1-4 s);
  ``fsync-error`` and ``clock-jump`` on any broker; ``move`` (a workload topic's bundle
  unloaded to another broker, chosen at random: PIP-307), ``move-kill``
  (the same, its destination killed while the handover runs),
  ``move-kill-source`` (the same, its source, the owner, killed while the
  handover runs and restarted within its session; the heal line says how
  long the bundle had no owner, ``STUCK`` past :data:`STUCK_S`),
  ``move-pause-source`` (its source paused past its session mid-handover:
  a zombie owner), ``move-partition-source`` (its source cut from etcd and
  the other brokers past its session mid-handover; root),
  ``move-partition-destination`` (its destination cut off so, mid-handover;
  root), ``split`` (that bundle cut in two) and ``split-kill`` (its owner
  killed mid-split), see :mod:`.moves`. A kill, pause or restart
  right after a move hits the move's destination half the time: a bundle
  moved to a broker that then dies. With ``partition`` (root only) the
  brokers run in network namespaces of their own (:mod:`.netns`) and a
  partition drawn among its modes (a broker cut from everything; from etcd
  and the other brokers; from etcd only; from the clients only; the other
  two brokers cut from etcd and from it, a majority; or its packets to etcd
  and the other brokers lost, one way) holds for 1-4 s longer than the
  session TTL (a ``clients`` cut 4-16 s), then heals. With ``--storage
  object`` the brokers keep their ledgers in a SeaweedFS of the run's own,
  and ``kill-objectstore``, ``pause-objectstore``, ``kill-wipe`` (a
  broker killed, its data directory deleted) and ``cut-objectstore`` (root:
  a broker cut from the object store only) join in: see :mod:`.objectstore`.

Every broker of a run stores with one sync policy (``--sync-policy``,
:data:`SYNC_POLICIES`): ``always`` (the default) or ``interval``.

Each ``inject`` returns once the system is healed (restarted, resumed).
Which faults each system takes, and their help, is :mod:`.faults` (a new
fault is one entry there).
``regions`` (two replicating regions) is in :mod:`.regions`, built on these helpers.
"""
from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from magnetar_harness.broker import BrokerProcess
from magnetar_harness.etcd import start_etcd
from magnetar_harness.objectstore import start_seaweed

from .broker import cluster_broker, standalone_broker
from .objectstore import BUCKET as OBJECT_BUCKET
from .objectstore import OBJECT_STORE_FAULTS, checked_storage, cut_from_objectstore, \
    hit_objectstore, kill_and_wipe, stop_objectstore
from .clock import draw_clock_jump, make_clock_files
from .disk import SmallDisk
from .faults import CLUSTER, STANDALONE, faults_of
from .fsync import FsyncErrors, FsyncErrorsUnavailable, draw_fsync_fault
from .fsync import unavailable_reason as fsync_unavailable_reason
from .moves import (NoBrokerAnswers, do_move, move_bundle, plan_move, plan_split, split_bundle, wait_owned,
                    wait_topic_owned)
from .netns import MODES, Network, PartitionUnavailable, describe, unavailable_reason
from .proxy import CutProxy

SESSION_TTL_S = 3.0
#: Entries per ledger in the brokers under test (Magnetar's default is
#: 50,000): small enough that every topic rolls to new ledgers a few times
#: a minute, so rollovers happen under faults and next to readers at the
#: tail (where a skip hid until a long run crossed 50,000 entries).
LEDGER_ENTRIES = 2000
#: How long a bundle may stay without an owner after a move-kill-source
#: before the heal line calls it stuck: a lapsed session (3 s), the leader's
#: sweep, the new owner's recovery take a few seconds, not twenty.
STUCK_S = 20.0


#: The storage sync policies a run may give its brokers (``--sync-policy``).
#: ``always``: a receipt follows the entry's fdatasync. ``interval``: it
#: follows write(), the fdatasync comes within 100 ms (the broker's default
#: period). The faults are process faults (SIGKILL, SIGSTOP, SIGTERM,
#: cut connections, moves) or EIO from a skipped fsync syscall: none drops
#: the page cache, so under either policy an acknowledged entry survives
#: and the checker's promise is the same (docs/reliability.md).
SYNC_POLICIES = ("always", "interval")


def _checked_sync_policy(sync_policy: str) -> str:
    """``sync_policy`` if it is one of :data:`SYNC_POLICIES`, else ValueError
    (before anything starts)."""
    if sync_policy not in SYNC_POLICIES:
        raise ValueError(f"sync policy {sync_policy!r} is not available; choose from {', '.join(SYNC_POLICIES)}")
    return sync_policy


def _broker_config(directory: Path, sync_policy: str = "always", object_store_url: str | None = None) -> Path:
    """The TOML file every broker of a run reads; with ``object_store_url``
    the brokers keep their ledgers there (``backend = "object"``)."""
    _checked_sync_policy(sync_policy)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "chaos-broker.toml"
    text = f"[storage]\nmax_entries_per_ledger = {LEDGER_ENTRIES}\nsync_policy = \"{sync_policy}\"\n"
    if object_store_url:
        text += f'backend = "object"\nobject_store_url = "{object_store_url}"\n'
    path.write_text(text)
    return path


def _fsync_injector(faults) -> FsyncErrors | None:
    """The injector if ``fsync-error`` is asked for; raises
    FsyncErrorsUnavailable (a ValueError: nothing started yet) if this
    machine cannot ptrace."""
    if "fsync-error" not in faults:
        return None
    reason = fsync_unavailable_reason()
    if reason is not None:
        raise FsyncErrorsUnavailable(reason)
    return FsyncErrors()


def _fail_fsyncs(injector: FsyncErrors, broker: BrokerProcess, rng: random.Random, name: str) -> str:
    fault = draw_fsync_fault(rng)
    assert broker.proc is not None
    failed = injector.inject(broker.proc.pid, fault)
    return f"fsync-error {name}: {fault.describe()}, {failed} calls failed"


def _broker_name(ids: list[str], broker: str) -> str:
    return f"broker-{ids.index(broker)}" if broker in ids else broker


def _hit(broker: BrokerProcess, kind: str, rng: random.Random, longest_pause: float) -> None:
    if kind == "kill":
        broker.kill()
        time.sleep(rng.uniform(0.5, 2.0))  # down for a while: clients retry against nothing
        broker.start()
    elif kind == "pause":
        broker.pause()
        time.sleep(rng.uniform(1.0, longest_pause))  # frozen: clients time out and resend
        broker.resume()
    elif kind == "restart":
        broker.stop()
        broker.start()


#: The faults of a topology's etcd (``cluster``, ``regions``).
ETCD_FAULTS = ("kill-etcd", "pause-etcd")


def hit_etcd(etcd, kind: str, rng: random.Random) -> str:
    """``kill-etcd`` (SIGKILL, restart on the same data after 1-3 s) or
    ``pause-etcd`` (SIGSTOP 1-4 s); returns once etcd runs again."""
    if kind == "kill-etcd":
        etcd.kill()
        time.sleep(rng.uniform(1.0, 3.0))
        etcd.start()
    else:
        etcd.pause()
        time.sleep(rng.uniform(1.0, 4.0))
        etcd.resume()
    return kind


class StandaloneSystem:
    faults = faults_of(STANDALONE)

    def __init__(self, out_dir: Path, faults: tuple[str, ...] | list[str] = (), seed: int = 0,
                 sync_policy: str = "always") -> None:
        self.sync_policy = _checked_sync_policy(sync_policy)
        self.broker = standalone_broker(out_dir / "data", ["--config", str(out_dir / "chaos-broker.toml")])
        self.out_dir = out_dir
        self.proxy: CutProxy | None = None
        #: The data directory on a small tmpfs, for the disk-full fault only.
        self.disk = SmallDisk(out_dir / "data") if "disk-full" in faults else None
        self.fsync = _fsync_injector(faults)
        #: The broker's clock file, for the clock-jump fault only.
        self.clock = make_clock_files(faults, out_dir)
        if self.clock is not None:
            self.clock.attach(self.broker, "broker")

    @property
    def service_url(self) -> str:
        """Where the clients connect: through the proxy once started."""
        return self.proxy.url if self.proxy is not None else self.broker.service_url

    @property
    def admin_url(self) -> str:
        return self.broker.admin_url

    def start(self) -> None:
        _broker_config(self.out_dir, self.sync_policy)
        if self.disk is not None:
            self.disk.mount()
        self.broker.start()
        self.proxy = CutProxy(self.broker.port)

    def inject(self, kind: str, rng: random.Random) -> str:
        if kind == "cut":
            assert self.proxy is not None
            cut = 0
            for _ in range(rng.randint(2, 5)):
                cut += self.proxy.cut()
                time.sleep(rng.uniform(0.1, 0.4))
            return f"cut {cut} connections"
        if kind == "disk-full":
            assert self.disk is not None
            taken = self.disk.fill()
            time.sleep(rng.uniform(1.0, 3.0))  # writes fail with ENOSPC meanwhile
            self.disk.free()
            return f"disk-full ({taken >> 20} MB taken)"
        if kind == "fsync-error":
            assert self.fsync is not None
            return _fail_fsyncs(self.fsync, self.broker, rng, "broker")
        if kind == "clock-jump":
            assert self.clock is not None
            return self.clock.jump("broker", draw_clock_jump(rng))
        _hit(self.broker, kind, rng, longest_pause=6.0)
        return kind

    def stop(self) -> None:
        if self.fsync is not None:
            self.fsync.close()  # detached before the broker is stopped
        if self.proxy is not None:
            self.proxy.close()
        self.broker.stop()
        if self.disk is not None:
            self.disk.free()
            self.disk.unmount()


@dataclass(frozen=True)
class Partition:
    """One partition fault: who is cut off, how (a mode of :mod:`.netns`), how long."""
    victim: int
    mode: str
    hold_s: float


def draw_partition(rng: random.Random, brokers: int, session_ttl: float) -> Partition:
    """The next partition from the nemesis's random stream: a mode, a victim,
    and a hold of 1-4 s past the session TTL (the victim's session lapses,
    its bundles move: the case worth testing). Any broker may be the
    victim, broker 0 included: the clients' service URL names them all.
    The mode is drawn among all of :data:`.netns.MODES`; for ``majority``
    the victim is the one broker left with etcd. A ``clients`` cut holds
    4-16 s instead (nothing lapses; the clients' 10 s send timeout does)."""
    mode = rng.choice(MODES)
    victim = rng.randrange(brokers)
    if mode == "clients":
        # No session lapses in this mode: what it tests is the clients'
        # timeouts, so it holds up to 16 s, past the workloads' 10 s send
        # timeout about half the time (sends fail, producers reconnect).
        return Partition(victim, mode, rng.uniform(session_ttl + 1.0, session_ttl + 13.0))
    return Partition(victim, mode, rng.uniform(session_ttl + 1.0, session_ttl + 4.0))


def _move_and_strike(move, ids: list[str], strike, rng: random.Random) -> tuple[threading.Thread, list[str], str]:
    """Ask for ``move`` on a thread and call ``strike()`` 0-60 ms later (a
    handover takes a few to some tens of milliseconds: the fault lands
    during it or just after); ``strike`` returns once its fault is healed.
    Returns the asking thread (to join), the list its answer lands in, and
    whether the fault came before or after that answer."""
    outcome: list[str] = []
    asking = threading.Thread(target=lambda: outcome.append(do_move(move, ids)[0]), daemon=True)
    asking.start()
    time.sleep(rng.uniform(0.0, 0.06))
    when = "after the unload answered" if outcome else "before the unload answered"
    strike()
    return asking, outcome, when


def _kill_briefly(victim: BrokerProcess, rng: random.Random):
    """A strike for :func:`_move_and_strike`: SIGKILL, restart 0.5-2 s later."""
    def strike() -> None:
        victim.kill()
        time.sleep(rng.uniform(0.5, 2.0))
        victim.start()
    return strike


#: The moves whose source is struck mid-handover, and how: killed and back
#: within its session; paused past its session (a zombie owner that wakes
#: after the bundle moved on); partitioned from etcd and the other brokers
#: past its session, its clients still reaching it (a zombie by the network).
SOURCE_STRIKES = {"move-kill-source": "killed", "move-pause-source": "paused", "move-partition-source": "partitioned"}


class ClusterSystem:
    faults = faults_of(CLUSTER)
    #: How long a fault's effects go on after its heal: a lapsed session is
    #: noticed up to a TTL later, then its bundles move (the checker widens
    #: the fault's window by this much).
    aftermath_s = SESSION_TTL_S + 2.0

    def __init__(self, out_dir: Path, faults: tuple[str, ...] | list[str] = (), brokers: int = 3,
                 seed: int = 0, sync_policy: str = "always", storage: str = "file") -> None:
        """Raises PartitionUnavailable, FsyncErrorsUnavailable or
        ClockJumpUnavailable (ValueErrors) if ``partition``, ``fsync-error``
        or ``clock-jump`` is asked for where namespaces cannot be made, ptrace
        is not allowed or libfaketime cannot be had, and ValueError for an
        unknown ``sync_policy`` or ``storage``, or object store faults without
        ``storage="object"``; nothing is started yet. ``storage="object"``:
        the brokers keep their ledgers in a SeaweedFS of the run's own
        (:mod:`.objectstore`)."""
        self.sync_policy = _checked_sync_policy(sync_policy)
        self.storage = checked_storage(storage, faults)
        self.objectstore = None
        self.base = out_dir / "cluster"
        self.count = brokers
        self.brokers: list[BrokerProcess] = []
        self.etcd = None
        self.net: Network | None = None
        #: The workloads' topics, whose bundles ``move`` and ``split`` act on
        #: (the runner sets them before the first fault).
        self.topics: list[str] = []
        #: Where the last move took a bundle, until the next kill, pause or restart.
        self._moved_to: int | None = None
        if {"partition", "move-partition-source", "move-partition-destination", "cut-objectstore"} & set(faults):
            reason = unavailable_reason()
            if reason is not None:
                raise PartitionUnavailable(reason)
            self.net = Network(seed, brokers)
        self.fsync = _fsync_injector(faults)
        self.clock = make_clock_files(faults, out_dir)

    @property
    def service_url(self) -> str:
        """Every broker, in order (``pulsar://h0:p0,h1:p1,h2:p2``): the clients,
        official and Magnetar's, try the next when one is down."""
        return "pulsar://" + ",".join(b.service_url.removeprefix("pulsar://") for b in self.brokers)

    @property
    def admin_url(self) -> str:
        """Broker 0's, for the setup before any fault."""
        return self.brokers[0].admin_url

    @property
    def admin_urls(self) -> list[str]:
        return [b.admin_url for b in self.brokers]

    def start(self) -> None:
        plan = self.net.setup() if self.net is not None else None
        # In namespaces, etcd listens on the bridge's second address (which
        # the partition cuts), the brokers each on their own.
        self.etcd = start_etcd(self.base / "etcd", host=plan.etcd if plan else "127.0.0.1", die_with_parent=True)
        store_url = self.etcd.store_url("chaos")
        object_store_url = None
        if self.storage == "object":
            # In namespaces, on a bridge address of its own: cut-objectstore
            # cuts a broker from it and from nothing else.
            self.objectstore = start_seaweed(self.base / "objectstore", bucket=OBJECT_BUCKET,
                                             host=plan.objectstore if plan else "127.0.0.1", die_with_parent=True)
            object_store_url = self.objectstore.store_url("chaos")
        config = _broker_config(self.base, self.sync_policy, object_store_url)
        self.brokers = [
            cluster_broker(self.base, k, store_url, SESSION_TTL_S,
                           address=plan.broker(k) if plan else "127.0.0.1",
                           netns=self.net.namespace(k) if self.net else None, config=config)
            for k in range(self.count)]
        if self.clock is not None:
            for k, broker in enumerate(self.brokers):
                self.clock.attach(broker, f"broker-{k}")
        for broker in self.brokers:
            broker.start()

    def inject(self, kind: str, rng: random.Random) -> str:
        if kind in ETCD_FAULTS:
            return hit_etcd(self.etcd, kind, rng)
        if kind in OBJECT_STORE_FAULTS:
            return hit_objectstore(self.objectstore, kind, rng)
        if kind == "cut-objectstore":
            assert self.net is not None
            return cut_from_objectstore(self.net, rng.randrange(self.count), rng)
        if kind == "kill-wipe":
            victim = rng.randrange(self.count)
            self._moved_to = None
            return kill_and_wipe(self.brokers[victim], self.base / f"broker-{victim}", rng, f"broker-{victim}")
        if kind == "partition":
            assert self.net is not None
            cut = draw_partition(rng, self.count, SESSION_TTL_S)
            self.net.partition(cut.mode, cut.victim)
            try:
                time.sleep(cut.hold_s)  # the partition itself: sessions lapse, bundles move
            finally:
                self.net.heal()
            return f"partition {describe(cut.mode, cut.victim, self.count)} {cut.hold_s:.1f} s"
        if kind == "fsync-error":
            assert self.fsync is not None
            victim = rng.randrange(self.count)
            return _fail_fsyncs(self.fsync, self.brokers[victim], rng, f"broker-{victim}")
        if kind == "clock-jump":
            assert self.clock is not None
            return self.clock.jump(f"broker-{rng.randrange(self.count)}", draw_clock_jump(rng))
        if kind in ("move", "move-kill", "move-partition-destination", "split", "split-kill") or kind in SOURCE_STRIKES:
            return self._move_or_split(kind, rng)
        victim = rng.randrange(self.count)
        if self._moved_to is not None and rng.random() < 0.5:
            victim = self._moved_to  # a bundle just moved there: the new owner dies
        self._moved_to = None
        _hit(self.brokers[victim], kind, rng, longest_pause=2 * SESSION_TTL_S + 2)
        return f"{kind} broker-{victim}"

    def _move_or_split(self, kind: str, rng: random.Random) -> str:
        """What happened, as text; a cluster that refuses or cannot answer
        just now (right after etcd came back, every broker may be out of its
        session) is recorded, not a failed run."""
        if not self.topics:
            return f"{kind}: no topic yet"
        topic = rng.choice(self.topics)
        try:
            if kind == "split":
                return split_bundle(self.admin_urls, topic)
            if kind in ("move-kill", "move-partition-destination"):
                return self._move_and_strike_destination(kind, topic, rng)
            if kind == "split-kill":
                return self._split_and_kill_owner(topic, rng)
            if kind in SOURCE_STRIKES:
                return self._move_and_strike_source(kind, topic, rng)
            what, destination = move_bundle(self.admin_urls, topic, rng)
        except NoBrokerAnswers as exc:
            return f"{kind}: {exc}"
        ids = [u.removeprefix("http://") for u in self.admin_urls]
        self._moved_to = ids.index(destination) if destination in ids else None
        return what

    def _move_and_strike_destination(self, kind: str, topic: str, rng: random.Random) -> str:
        """Ask for a move and strike its destination 0-60 ms later (a
        handover takes a few to some tens of milliseconds: the fault lands
        during it or just after): ``move-kill`` SIGKILLs it and restarts it
        0.5-2 s after; ``move-partition-destination`` cuts it from etcd and
        the other brokers for 1-4 s past its session. The unload answers
        once the destination owns the bundle or, if it was struck first,
        once the leader gave the bundle to another broker."""
        ids = [u.removeprefix("http://") for u in self.admin_urls]
        move = plan_move(self.admin_urls, topic, rng)
        destination = ids.index(move.destination)
        if kind == "move-kill":
            strike, struck = _kill_briefly(self.brokers[destination], rng), "killed"
        else:
            strike = self._zombie_for(destination, rng.uniform(SESSION_TTL_S + 1.0, SESSION_TTL_S + 4.0))
            struck = "partitioned"
        asking, outcome, when = _move_and_strike(move, ids, strike, rng)
        asking.join(60)  # the broker side gives up on a handover after 30 s
        return f"{outcome[0] if outcome else 'move: no answer in 60 s'}; destination {struck} {when}"

    def _split_and_kill_owner(self, topic: str, rng: random.Random) -> str:
        """Ask for a split of ``topic``'s bundle (at another broker than its
        owner) and SIGKILL the owner, which does the split, 0-60 ms later;
        restart it 0.5-2 s after. Then wait for the bundle now holding the
        topic (the whole one, or a half) to be owned again, as
        ``move-kill-source`` does."""
        ids = [u.removeprefix("http://") for u in self.admin_urls]
        _, bundle, owner = plan_split(self.admin_urls, topic)
        if owner not in ids:
            return f"split-kill: bundle {bundle} has no owner just now"
        asked = next(u for u in self.admin_urls if u.removeprefix("http://") != owner)
        outcome: list[str] = []
        asking = threading.Thread(
            target=lambda: outcome.append(split_bundle(self.admin_urls, topic, (asked, bundle, owner))), daemon=True)
        started = time.monotonic()
        asking.start()
        time.sleep(rng.uniform(0.0, 0.06))
        when = "after the split answered" if outcome else "before the split answered"
        _kill_briefly(self.brokers[ids.index(owner)], rng)()
        waited, now_owner = wait_topic_owned(self.admin_urls, topic, STUCK_S)
        owned = (f"owned by {_broker_name(ids, now_owner)} {time.monotonic() - started:.1f} s after the split"
                 if now_owner is not None else f"STUCK: no owner {time.monotonic() - started:.1f} s after the split")
        asking.join(60)
        return f"{outcome[0] if outcome else 'split: no answer in 60 s'}; owner killed {when}; {owned}"

    def _move_and_strike_source(self, kind: str, topic: str, rng: random.Random) -> str:
        """Ask for a move (at a broker other than the source) and strike the
        bundle's current owner 0-60 ms later, mid-handover or just after, as
        ``kind`` says (:data:`SOURCE_STRIKES`):

        - ``move-kill-source``: SIGKILL, restarted 0.5-2 s later (within its
          3 s session, so the cluster may never see it leave);
        - ``move-pause-source``: SIGSTOP for 1-4 s past its session, then
          SIGCONT: it wakes as a zombie that still thinks it is handing the
          bundle over, with its clients' connections open;
        - ``move-partition-source``: cut from etcd and the other brokers for
          1-4 s past its session, its clients still reaching it.

        Then wait for the bundle to be owned again: the heal line says by
        whom and after how long, or that it had no owner for
        :data:`STUCK_S` (a stuck bundle: the clients of its topics cannot
        send)."""
        ids = [u.removeprefix("http://") for u in self.admin_urls]
        move = plan_move(self.admin_urls, topic, rng)
        if move.owner not in ids:
            return f"{kind}: bundle {move.bundle} has no owner just now"
        source = ids.index(move.owner)
        victim = self.brokers[source]
        move = replace(move, asked=next(u for u in self.admin_urls if u.removeprefix("http://") != move.owner))
        if kind == "move-kill-source":
            strike = _kill_briefly(victim, rng)
        else:
            hold = rng.uniform(SESSION_TTL_S + 1.0, SESSION_TTL_S + 4.0)
            strike = self._pause_for(victim, hold) if kind == "move-pause-source" else self._zombie_for(source, hold)
        started = time.monotonic()
        asking, outcome, when = _move_and_strike(move, ids, strike, rng)
        waited, owner = wait_owned(self.admin_urls, topic, move.bundle, STUCK_S)
        owned = (f"owned by {_broker_name(ids, owner)} {time.monotonic() - started:.1f} s after the unload"
                 if owner is not None else
                 f"STUCK: no owner {time.monotonic() - started:.1f} s after the unload" if waited >= STUCK_S
                 else "split meanwhile")
        asking.join(60)  # the broker side gives up on a handover after 30 s
        return (f"{outcome[0] if outcome else 'move: no answer in 60 s'}; "
                f"source {SOURCE_STRIKES[kind]} {when}; {owned}")

    @staticmethod
    def _pause_for(victim: BrokerProcess, hold: float):
        def strike() -> None:
            victim.pause()
            try:
                time.sleep(hold)  # frozen past its session: the leader passes its bundles on
            finally:
                victim.resume()
        return strike

    def _zombie_for(self, source: int, hold: float):
        assert self.net is not None
        net = self.net

        def strike() -> None:
            net.partition("zombie", source)
            try:
                time.sleep(hold)  # cut from etcd and peers past its session, clients still in reach
            finally:
                net.heal()
        return strike

    def stop(self) -> None:
        """Stop the brokers and etcd, then remove the network (healed first,
        so an isolated broker can stop cleanly). Safe after a failed start."""
        try:
            if self.fsync is not None:
                self.fsync.close()
            if self.net is not None:
                self.net.heal()
            for broker in self.brokers:
                broker.stop()
            if self.etcd is not None and self.etcd.running:
                self.etcd.stop()
            stop_objectstore(self.objectstore)
        finally:
            if self.net is not None:
                self.net.teardown()


SYSTEMS = {"standalone": StandaloneSystem, "cluster": ClusterSystem}
