"""The ``regions`` topology of ``magnetar-chaos run``: two regions that
geo-replicate (docs/regions.md), the workloads writing into one of them.

What runs (what ``magnetar geo up --regions 2`` runs, made of the harness's
own :class:`magnetar_harness.broker.BrokerProcess` so each broker can be killed, paused
and restarted on its own): one etcd; ``region-a`` and ``region-b``, each a
one-broker cluster with its own metadata prefix and storage, sharing the
configuration store (prefix ``/global``). The chaos namespace
(``public/default``) replicates between both; the runner sets
deduplication and infinite retention on it (policies live in the shared
store, so both regions have them).

- The workloads and consumers connect to region A, so the checker judges
  A exactly as in the other topologies, with two exceptions: ``dedup-b``
  writes the ``dedup`` topic in region B at the same time (each region
  replicates to the other; :meth:`RegionsSystem.settle` waits for B's
  replicator to A before the final reads), and the
  :class:`FollowingConsumer`, which the ``failover`` fault moves between
  the regions.
- Region B's broker listens on ``127.0.0.2`` and is reached only through a
  :class:`LinkProxy` standing at its advertised address ``127.0.0.1:<port>``
  (its admin port likewise, through a plain forwarder): the cluster record
  in the configuration store names that address, so A's replicators reach
  B through the proxy, whichever broker restarts.
- After the run (:meth:`RegionsSystem.read_replicas`) each topic's copy in
  B is read once A's replicator reports an empty backlog to B (topic stats,
  ``replication.region-b.replicationBacklog`` = 0: its cursor's mark-delete
  moves only after B's receipts), waited for with a deadline. The reads are
  recorded as ``replica-read`` ops; :func:`.checker.check` judges them
  (**not replicated**, **duplicated by replication**, **replicated out of
  order**). A consumer in A with a replicated subscription (PIP-33,
  :class:`ReplicatedSubscriptionConsumer`, added by
  :meth:`RegionsSystem.extra_workloads`) is judged in A like the others;
  its copy's mark-delete position in B is recorded as a
  ``replica-subscription`` op (**replicated subscription ahead** if it
  covers a message the consumer never received).

Faults: ``kill``, ``pause``, ``restart`` of either region's broker (drawn at
random; a pause may outlast the 3 s session); ``cut``: every connection
to region B (A's replicators'; B's reach A directly) dropped and the link
held down 1-4 s (each connection
attempt dropped at its first bytes: the replicators' sends wait, then
resume; B deduplicates what is sent again); ``kill-etcd`` (SIGKILL, restart
on the same data after 1-3 s) and ``pause-etcd`` (SIGSTOP 1-4 s) of the
etcd both regions share; ``failover``: the :class:`FollowingConsumer` (a
replicated subscription) moves to the other region, once that region has a
copy of its subscription.

Failure modes: :class:`~.broker.BrokerDidNotStart` if a broker does not
start; ``EtcdNotInstalled`` / ``EtcdStartError`` for etcd; OSError if a
port of region B cannot be taken on both loopback addresses. A replica
that has not caught up by the deadline is read anyway and marked
``caught_up: false``: what it lacks is reported as not replicated.
"""
from __future__ import annotations

import json
import random
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable

from magnetar_harness.broker import BrokerProcess
from magnetar_harness.etcd import start_etcd

from .broker import region_broker
from .consumers import Receiver, SubscriptionConsumer
from .faults import REGIONS as REGIONS_TOPOLOGY, faults_of
from .history import History
from .proxy import CutProxy
from .systems import ETCD_FAULTS, SESSION_TTL_S, _broker_config, _checked_sync_policy, _hit, hit_etcd
from .workloads import DedupProducer, read_log

REGIONS = ("region-a", "region-b")
#: Where region B's broker really listens: its advertised address
#: (127.0.0.1) belongs to the proxies in front of it.
REPLICA_BIND = "127.0.0.2"
#: How long the final reads wait for A's replicators to drain, per topic.
CATCH_UP_S = 120.0
#: The subscription whose state replicates (PIP-33), on the dedup topic.
REPLICATED_SUBSCRIPTION = "chaos-replicated"
#: The replicated subscription whose consumer the ``failover`` fault moves.
FOLLOWING_SUBSCRIPTION = "chaos-following"
#: How long a failover waits for region B to have a copy of the following
#: subscription (the first snapshot after it was created), then for the
#: consumer to be subscribed in its new region.
FAILOVER_WAIT_S = 30.0


class ReplicatedSubscriptionConsumer(SubscriptionConsumer):
    """A Failover consumer in region A on :data:`REPLICATED_SUBSCRIPTION`,
    created with ``replicate_subscription_state_enabled``: A's acknowledged
    position travels to B's copy of the subscription. Judged in A like the
    other Failover consumer (every acknowledged send, each producer in
    order); its copy in B is judged by the checker (never ahead of what
    this consumer received)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, consumer_type="Failover", **kwargs)
        self.subscription = REPLICATED_SUBSCRIPTION

    def _open(self, pulsar, client):
        return client.subscribe(self.topic, self.subscription, consumer_type=pulsar.ConsumerType.Failover,
                                initial_position=pulsar.InitialPosition.Earliest,
                                replicate_subscription_state_enabled=True)


class FollowingConsumer(ReplicatedSubscriptionConsumer):
    """A Failover consumer on :data:`FOLLOWING_SUBSCRIPTION` (replicated,
    PIP-33) that the ``failover`` fault moves between the regions, as an
    application whose region went away would: it closes its client and
    subscribes with the same name in the other region, from ``Latest``.
    Only the replicated copy of the subscription makes that lossless (a
    subscription new to a region starts at its end), so the checker's
    **missed by consumers** is the test of the copy: every acknowledged send
    must reach this subscription in one region or the other, each
    producer's messages first arriving in order. Its ``receive`` ops name
    the region they came from.

    After the run it drains, in either region, only once the other
    region's replicator has no backlog towards it (:attr:`caught_up_in`):
    what has not crossed yet is still to come, not missed."""

    #: Replication may lag after the last fault (a cut's reconnect backoff).
    DRAIN_MAX_S = 60.0

    def __init__(self, name: str, regions: dict[str, str], topic: str, history: History, seed: int) -> None:
        first = REGIONS[0]
        super().__init__(name, regions[first], topic, history, seed)
        self.subscription = FOLLOWING_SUBSCRIPTION
        self.regions = regions
        #: Where it was told to read, and where it is connected now.
        self.region = self.connected_region = first
        self.arrived = threading.Event()
        #: Region -> whether it has everything the other region acknowledged (while draining).
        self.caught_up_in: dict[str, Callable[[], bool]] = {}
        self._subscribed_once = False

    def follow(self, region: str) -> None:
        """Ask the consumer to move to ``region`` (it does so within half a
        second, between two receives); :attr:`arrived` is set once it is
        subscribed there."""
        self.arrived.clear()
        self.region = region
        self.service_url = self.regions[region]

    def _open(self, pulsar, client):
        # Earliest only the first time (the subscription is created in A
        # before any message is sent); after a failover, Latest.
        position = pulsar.InitialPosition.Latest if self._subscribed_once else pulsar.InitialPosition.Earliest
        consumer = client.subscribe(self.topic, self.subscription, consumer_type=pulsar.ConsumerType.Failover,
                                    initial_position=position, replicate_subscription_state_enabled=True)
        self._subscribed_once = True
        return consumer

    def _opened(self, service_url: str) -> None:
        self.connected_region = next(r for r, url in self.regions.items() if url == service_url)
        self.history.add(self.process, "info", "subscribed", topic=self.topic, subscription=self.subscription,
                         region=self.connected_region)
        if self.connected_region == self.region:  # not a connect begun before the move was asked
            self.arrived.set()

    def _labels(self) -> dict:
        return {"region": self.connected_region}

    def _caught_up(self) -> bool:
        return self.caught_up_in.get(self.connected_region, lambda: True)()


class LinkProxy(CutProxy):
    """A :class:`CutProxy` that can also be held down: while :attr:`down`,
    a connection is dropped as soon as either side sends anything (a new
    connection is accepted, then dropped at its first frame), as a network
    that lost the route would."""

    down = False

    def relay(self, from_broker: bool = False):
        def send(data: bytes, dst) -> None:
            if self.down:
                raise OSError("the link is down")  # _pump closes both sides
            dst.sendall(data)
        return send


class RegionsSystem:
    """Two regions on one etcd (see the module docstring). The runner
    writes into :attr:`service_url` (region A) and, after its final reads,
    calls :meth:`read_replicas`; each :meth:`inject` returns once healed."""

    faults = faults_of(REGIONS_TOPOLOGY)

    #: How long a fault's effects go on after its heal: a lapsed session is
    #: noticed up to a TTL later (as in the cluster topology).
    aftermath_s = SESSION_TTL_S + 2.0

    def __init__(self, out_dir: Path, faults: tuple[str, ...] | list[str] = (), seed: int = 0,
                 sync_policy: str = "always") -> None:
        """Nothing starts here. ``faults`` and ``seed`` are the runner's
        common arguments: every fault of this topology works anywhere
        (no root, no ptrace), so none is refused up front. Both regions'
        brokers store with ``sync_policy`` (ValueError if unknown)."""
        self.sync_policy = _checked_sync_policy(sync_policy)
        self.base = out_dir / "regions"
        self.etcd = None
        self.brokers: dict[str, BrokerProcess] = {}
        #: In front of region B's Pulsar port (the replication link) and admin port.
        self.link: LinkProxy | None = None
        self._admin_forward: CutProxy | None = None
        #: (topic, subscription) of the replicated subscriptions, set by extra_workloads.
        self.replicated_subscriptions: list[tuple[str, str]] = []
        #: The topics a workload writes into region B too, set by extra_workloads.
        self.written_in_b: list[str] = []
        #: The consumer the ``failover`` fault moves, set by extra_workloads.
        self.following: FollowingConsumer | None = None

    @property
    def service_url(self) -> str:
        """Region A's: where the workloads write."""
        return self.brokers[REGIONS[0]].service_url

    @property
    def admin_url(self) -> str:
        return self.brokers[REGIONS[0]].admin_url

    @property
    def replica_service_url(self) -> str:
        return self.brokers[REGIONS[1]].service_url

    @property
    def replica_admin_url(self) -> str:
        return self.brokers[REGIONS[1]].admin_url

    def start(self) -> None:
        self.etcd = start_etcd(self.base / "etcd", die_with_parent=True)
        shared = self.etcd.store_url("global")
        config = _broker_config(self.base, self.sync_policy)
        a, b = REGIONS
        self.brokers[a] = region_broker(self.base / a, a, self.etcd.store_url(a), shared, config, SESSION_TTL_S)
        self.brokers[b] = replica = region_broker(self.base / b, b, self.etcd.store_url(b), shared, config,
                                                  SESSION_TTL_S, bind=REPLICA_BIND)
        # The proxies first: B registers 127.0.0.1:<port> in its cluster
        # record as it starts, and A's replicators dial it at once.
        self.link = LinkProxy(replica.port, listen_port=replica.port, target_host=REPLICA_BIND)
        self._admin_forward = CutProxy(replica.admin_port, listen_port=replica.admin_port, target_host=REPLICA_BIND)
        self.brokers[a].start()
        replica.start()
        _admin(self.admin_url, "/admin/v2/namespaces/public/default/replication", "POST", list(REGIONS))
        # Policies live in the shared store: B sees the list A set (a condition, not a pause).
        _wait(lambda: sorted(_admin(self.replica_admin_url, "/admin/v2/namespaces/public/default/replication")
                             or []) == sorted(REGIONS), 30.0, "region B to see the replication clusters")

    def inject(self, kind: str, rng: random.Random) -> str:
        if kind == "cut":
            assert self.link is not None
            self.link.down = True
            try:
                cut = self.link.cut()
                hold = rng.uniform(1.0, 4.0)
                time.sleep(hold)  # the link stays down: the replicators' sends wait
            finally:
                self.link.down = False
            return f"cut {cut} connections to {REGIONS[1]}, link down {hold:.1f} s"
        if kind in ETCD_FAULTS:
            return hit_etcd(self.etcd, kind, rng)
        if kind == "failover":
            return self.fail_over()
        region = rng.choice(REGIONS)
        _hit(self.brokers[region], kind, rng, longest_pause=2 * SESSION_TTL_S + 2)
        return f"{kind} {region}"

    def fail_over(self) -> str:
        """The ``failover`` fault: move the :class:`FollowingConsumer` to the
        other region, once that region has a copy of its subscription
        (region A always has; B once a snapshot completed there: before,
        PIP-33 promises nothing, so the move waits rather than skip
        messages the checker would call missed). Returns once it is
        subscribed there, or says why it did not move."""
        consumer = self.following
        if consumer is None:
            return "failover: no following consumer"
        source = consumer.region
        target = REGIONS[1] if source == REGIONS[0] else REGIONS[0]
        admin = self.admin_url if target == REGIONS[0] else self.replica_admin_url
        started = time.monotonic()
        has_copy = _wait(lambda: self.subscription_exists(admin, consumer.topic, FOLLOWING_SUBSCRIPTION),
                         FAILOVER_WAIT_S, None)
        if not has_copy:
            return f"failover: {target} has no copy of {FOLLOWING_SUBSCRIPTION} after {FAILOVER_WAIT_S:.0f} s"
        consumer.follow(target)
        moved = consumer.arrived.wait(FAILOVER_WAIT_S)
        took = time.monotonic() - started
        if not moved:
            return f"failover {source} -> {target}: not subscribed there after {took:.1f} s"
        return f"failover {source} -> {target}: subscribed there {took:.1f} s after asked"

    @staticmethod
    def subscription_exists(admin_url: str, topic: str, subscription: str) -> bool:
        path = "/admin/v2/" + topic.replace("://", "/", 1) + "/internalStats"
        return subscription in ((_admin(admin_url, path) or {}).get("cursors") or {})

    def extra_workloads(self, workloads: list, history: History, seed: int) -> list:
        """What this topology adds to the runner's workloads, on the
        ``dedup`` process's topic: a second deduplicated producer,
        ``dedup-b``, writing into region B (both regions write the topic at
        once, each replicating to the other); a consumer with a replicated
        subscription in region A; and the :class:`FollowingConsumer` that
        ``failover`` moves between the regions. The receivers of that topic
        in A drain only once B's replicator to A has no backlog."""
        a, b = REGIONS
        topic = next(w.topic for w in workloads if w.process == "dedup")
        self.replicated_subscriptions = [(topic, REPLICATED_SUBSCRIPTION), (topic, FOLLOWING_SUBSCRIPTION)]
        self.written_in_b = [topic]

        def in_a() -> bool:  # A has all B acknowledged
            return self.replication_backlog(topic, source=b) == 0

        def in_b() -> bool:
            return self.replication_backlog(topic, source=a) == 0

        following = FollowingConsumer("following", {a: self.service_url, b: self.replica_service_url},
                                      topic, history, seed + 13)
        following.caught_up_in = {a: in_a, b: in_b}
        self.following = following
        replicated = ReplicatedSubscriptionConsumer("replicated", self.service_url, topic, history, seed + 11)
        for w in workloads + [replicated]:
            if isinstance(w, Receiver) and w.topic == topic:
                w.caught_up = in_a
        in_region_b = DedupProducer("dedup-b", self.replica_service_url, topic, history, seed + 12)
        in_region_b.labels = {"region": b}  # not counted against the reads of A's next offsets
        return [in_region_b, replicated, following]

    def settle(self, topics: list[str]) -> None:
        """Before the runner's final reads in A: wait (up to
        :data:`CATCH_UP_S` per topic) for B's replicator to A to drain the
        topics written in B, so A's log holds what B acknowledged. One not
        drained by then is read anyway: what it lacks is reported."""
        for topic in self.written_in_b:
            if topic in topics:
                _wait(lambda: self.replication_backlog(topic, source=REGIONS[1]) == 0, CATCH_UP_S, None)

    def read_replicas(self, history: History, topics: list[str]) -> None:
        """Record, for each topic, its copy in region B as a ``replica-read``
        op (``log`` entries ``[offset, value, "ledger:entry"]``, B's
        positions), once A's replicator to B has drained (or the deadline
        passed: ``caught_up`` false); then, for each replicated
        subscription, its copy's mark-delete position in B as a
        ``replica-subscription`` op (``mark_delete`` None if B has no copy:
        no snapshot completed)."""
        b = REGIONS[1]
        for topic in topics:
            history.add("final-replica", "invoke", "replica-read", topic=topic, region=b)
            started = time.monotonic()
            caught_up = _wait(lambda: self.replication_backlog(topic) == 0, CATCH_UP_S, None)
            waited = round(time.monotonic() - started, 3)
            log = read_log(self.replica_service_url, topic, positions=True)
            history.add("final-replica", "ok", "replica-read", topic=topic, region=b, log=log,
                        caught_up=caught_up, waited_s=waited)
        for topic, subscription in self.replicated_subscriptions:
            path = "/admin/v2/" + topic.replace("://", "/", 1) + "/internalStats"
            cursor = (_admin(self.replica_admin_url, path) or {}).get("cursors", {}).get(subscription)
            history.add("final-replica", "ok", "replica-subscription", topic=topic, region=b,
                        subscription=subscription, mark_delete=cursor.get("markDeletePosition") if cursor else None)

    def replication_backlog(self, topic: str, source: str = REGIONS[0]) -> int | None:
        """``source`` region's backlog of ``topic`` towards the other
        region, from its topic stats (A's towards B by default); None if it
        does not answer or has no replicator there yet."""
        a, b = REGIONS
        admin, target = (self.admin_url, b) if source == a else (self.replica_admin_url, a)
        path = "/admin/v2/" + topic.replace("://", "/", 1) + "/stats"
        try:
            stats = _admin(admin, path)
        except (OSError, ValueError):
            return None  # the region is loading the topic, or busy: ask again
        entry = (stats or {}).get("replication", {}).get(target)
        return None if entry is None else int(entry.get("replicationBacklog", -1))

    def stop(self) -> None:
        """Stop both brokers, the proxies and etcd. Safe after a failed start."""
        try:
            for broker in self.brokers.values():
                broker.stop()
            for proxy in (self.link, self._admin_forward):
                if proxy is not None:
                    proxy.close()
        finally:
            if self.etcd is not None and self.etcd.running:
                self.etcd.stop()


def _admin(base_url: str, path: str, method: str = "GET", body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base_url + urllib.parse.quote(path), data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        raw = resp.read()
        return json.loads(raw) if raw else None


def _wait(condition, timeout: float, what: str | None) -> bool:
    """Poll ``condition`` until true (True) or ``timeout`` (False, or
    TimeoutError naming ``what`` if given). Errors count as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return True
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            if what is not None:
                raise TimeoutError(f"waited {timeout:.0f} s for {what}")
            return False
        time.sleep(0.2)  # the poll interval of a condition with a deadline
