"""BrokerService: the topics this broker serves, loaded on demand.

Owns the metadata store and the managed ledger factory. A topic is loaded
once even when many clients ask for it at the same time; a topic whose
storage failed is unloaded, so the next request reloads it from disk.

In a cluster (``cluster`` set), a topic is served only while this broker owns
its bundle: :meth:`get_topic` raises ServiceNotReady otherwise (the client
looks up again). The service is its member's host
(:class:`~magnetar.broker.cluster.host.BundleHost`): the member unloads a
bundle's topics through :meth:`unload_bundle` the moment the bundle is no
longer ours, and moves bundles through :meth:`release_bundle` and
:meth:`hand_over_bundle`. The service alone keeps which bundles it released
and holds (their topics, by bundle) until they are handed over.

A load reads the policies in force once, with the other loads of its
namespace asked at the same time (:mod:`..namespaces.load_policies`), and
applies a change noted while it loaded once the topic is loaded (the
watch's refresh passes by a topic not loaded yet).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import asyncio
import collections
import logging
import secrets
from typing import Callable

from magnetar.metadata import MetadataStore
from magnetar.storage import ManagedLedgerFactory, ManagedLedgerFencedError, catalog

from magnetar.broker.cluster.bundles import Bundle
from magnetar.broker.topics.moving import MovingTopic

if TYPE_CHECKING:  # a cluster member's code loads only when the broker is clustered (server.py)
    from magnetar.broker.cluster.member import ClusterMember
from magnetar.broker.bounded import CLOSE_CONCURRENCY, each_bounded
from magnetar.broker.config import BrokerConfig
from magnetar.broker.topics.dedup import PidAllocator, delete_snapshot
from magnetar.broker.errors import ServiceNotReady
from magnetar.broker.namespaces.creation import check_creatable
from magnetar.broker.namespaces.serving import check_served_here
from magnetar.broker.namespaces.policies import backlog_quotas, retention_policy
from magnetar.broker.topics.producer import Producer
from magnetar.broker.namespaces.resources import POLICIES as POLICIES_ROOT  # namespace policies live below it
from magnetar.broker.durations import DurationCounts
from magnetar.broker.policies.dispatch_rate import dispatch_rates_for
from magnetar.broker.policies.publish_rate import limiter_for
from magnetar.broker.namespaces.applied import applied_by_namespace
from magnetar.broker.namespaces.load_policies import LoadPolicies
from magnetar.broker.namespaces.policy_keys import EVERY_TOPIC, changed_policies
from magnetar.broker.namespaces.resources import namespace_policies
from magnetar.broker.namespaces.resources import TOPIC_POLICIES  # topic-level policies live below it
from magnetar.broker.topics.compaction import Compactor
from magnetar.broker.topics.schemas import SchemaRegistry
from magnetar.broker.topics.non_persistent import NonPersistentTopic
from magnetar.broker.topics.topic import Topic
from magnetar.broker.topic_name import TopicName
from magnetar.broker.server import arrivals
from magnetar.protocol.frames import BufferPool

log = logging.getLogger(__name__)

#: A topic loaded this soon after its bundle moved here counts as moved (its
#: clients arrive within milliseconds of the hand-over; later loads are new use).
ARRIVAL_WINDOW_S = 5.0
#: Receive buffers the connections share, kept when idle (1 MiB each, more
#: for larger frames): one per connection in the middle of a large frame.
RECEIVE_BUFFERS_KEPT = 8


class BrokerService:
    def __init__(self, config: BrokerConfig, store: MetadataStore, factory: ManagedLedgerFactory) -> None:
        self.config = config
        self.store = store
        self.factory = factory
        #: The connections' receive buffers (server/connection.py), reused once no frame of them is left.
        self.receive_buffers = BufferPool(keep=RECEIVE_BUFFERS_KEPT, mapped=True)
        self.topics: dict[str, Topic] = {}
        #: Non-persistent topics (in memory, see topics.non_persistent) by name.
        self.non_persistent: dict[str, NonPersistentTopic] = {}
        self._loading: dict[str, asyncio.Future] = {}
        #: Topics being deleted, by name: a load of one waits for its end
        #: (the delete's unload sends its clients straight back here).
        self._deleting: dict[str, asyncio.Future] = {}
        #: Topics load on first use, at most this many at once.
        self._load_slots = asyncio.Semaphore(config.max_concurrent_topic_loads)
        self.connections: set = set()
        self.broker_id = 0
        #: Part of every producer name this broker assigns, new at each start:
        #: deduplication state is kept per producer name and outlives a
        #: restart, so a name given twice would make a new producer's sends
        #: look like an old one's duplicates (acknowledged, not stored).
        self.instance_id = secrets.token_hex(4)
        self.pid_allocator = PidAllocator(store)
        self.schemas = SchemaRegistry(store, config.schema_compatibility_strategy, config.schema_validation_enforced,
                                      namespace_policies=self.namespace_policies)
        self.compactor = Compactor(self)
        #: Whose policies changed since the refresher's last pass (policy_keys.changed_policies).
        self._policy_changes: set[tuple[str | None, str | None]] = set()
        self._policy_refresher: asyncio.Task | None = None
        #: Policy changes noted, by namespace (None: every namespace's): a
        #: load compares them before its read and once loaded (_load).
        self._policy_notes: collections.Counter[str | None] = collections.Counter()
        #: The policies a load applies, read with the other loads of its namespace at once.
        self._load_policies = LoadPolicies(store)
        self._policy_watch = store.watch(POLICIES_ROOT, self._on_policy_change)
        self._topic_policy_watch = store.watch(TOPIC_POLICIES, self._on_policy_change)
        self.closing = False
        #: Lookups answered (binary and HTTP), and those that named another broker.
        self.lookup_answers = 0
        #: How long lookups took to answer (binary and HTTP), for the metrics.
        self.lookup_seconds = DurationCounts()
        self.lookup_redirects = 0
        #: Bundles released by a move in progress (PIP-307) and their topics,
        #: held until handed over: the one record of released bundles.
        self._released: dict[Bundle, list[Topic]] = {}
        #: Hand-overs under way (kept so they are not garbage-collected mid-flight).
        self._handovers: set[asyncio.Task] = set()
        #: Topics loaded for bundles moving here before they were taken (arrivals.py).
        self.topics_prepared = 0
        #: Checks CONNECT's credential (security.authentication); None: off.
        self.authenticator = None
        #: Decides what a role may do (security.authorization); None: off.
        self.authorizer = None
        #: This broker's part in a cluster; None for a standalone broker.
        self.cluster: ClusterMember | None = None
        #: Called with each topic right after it is loaded (geo-replication
        #: starts its replicators there); must not raise.
        self.topic_loaded: list[Callable[[Topic], None]] = []

    async def get_topic(self, name: TopicName, create: bool | None = None) -> Topic:
        """The loaded topic; loads (and, if allowed, creates) it first.

        Raises TopicNotFound when it does not exist and may not be created.
        """
        if self.closing:
            raise ServiceNotReady("broker is shutting down")
        if name.domain != "persistent":
            return await self._non_persistent_topic(name, create)
        key = str(name)
        await self._after_delete(key)
        topic = await self._loaded(key)
        if topic is not None:
            if self.cluster is not None and not self.cluster.serving:
                # Out of session: its bundles may be someone else's by now, and
                # the unload of every topic (which waits on the store) may not
                # have reached this one yet. New producers and consumers go
                # elsewhere; the client looks up again.
                raise ServiceNotReady(f"topic {name}: this broker lost its metadata session; look up again")
            if self.cluster is not None and not self.cluster.owns(name):
                # Loaded for a bundle still Assigning here (arrivals.py): wait for Owned.
                await self.cluster.check_owner(name)
            return topic
        if self.cluster is not None:
            await self.cluster.check_owner(name)  # ServiceNotReady unless the bundle is ours
        return await self._load_once(name, create)

    async def _load_once(self, name: TopicName, create: bool | None, moving: MovingTopic | None = None) -> Topic:
        """The topic ``name``, loaded by one load however many ask at once
        (the owner is checked by the caller; ``moving``: what the source of a
        move said of it, see ``topics/moving.py``)."""
        key = str(name)
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        topic = await self._loaded(key)
        if topic is not None:
            return topic
        if key in self._deleting:  # began while the caller waited on the owner check
            return await self.get_topic(name, create)
        fut = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            noted = self._notes_of(name)
            # Read before the slot: the loads of a burst (a bundle taken over,
            # first uses after a start) ask at once, so their namespace's
            # policies are read together, not a few at a time as slots free.
            policies = await self._load_policies.policies(name)
            async with self._load_slots:  # bounded: a burst of first uses after a start
                topic = await self._load(name, self.config.allow_auto_topic_creation if create is None else create,
                                         moving, policies, noted)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters re-raise it themselves
            raise
        finally:
            self._loading.pop(key, None)
        fut.set_result(topic)
        return topic

    async def _after_delete(self, key: str) -> None:
        """Wait until no delete of ``key`` is under way (a load then creates
        it anew, or finds it gone)."""
        while (deleting := self._deleting.get(key)) is not None:
            await asyncio.shield(deleting)

    async def _loaded(self, key: str) -> Topic | None:
        """The loaded topic ``key`` if it can serve, else None (then load it).
        A topic whose managed ledger another broker opened since (its
        metadata changed elsewhere: a broker that took the bundle for a
        moment, with a stale view, after a partition) is unloaded here: its
        view ends where the other broker took over, so it would refuse every
        producer and serve readers a log without what the other broker
        stored. Loading it again recovers all of it."""
        topic = self.topics.get(key)
        if topic is None or topic.closed:
            return None
        if topic.ledger.state != "fenced":
            return topic
        log.info("%s was opened elsewhere since it was loaded here: loading it again", key)
        if self.topics.get(key) is topic:
            await self.unload(topic)
        return None

    async def _non_persistent_topic(self, name: TopicName, create: bool | None) -> NonPersistentTopic:
        """The in-memory topic ``name`` (``non-persistent://``), made on first use."""
        key = str(name)
        topic = self.non_persistent.get(key)
        if topic is not None and not topic.closed:
            return topic
        if self.cluster is not None:
            await self.cluster.check_owner(name)  # ServiceNotReady unless the bundle is ours
        await check_creatable(self.store, name, self.config.allow_auto_topic_creation if create is None else create)
        topic = self.non_persistent.get(key)
        if topic is None or topic.closed:
            topic = self.non_persistent[key] = NonPersistentTopic(self, name)
            log.info("serving non-persistent topic %s", name)
        return topic

    async def _load(self, name: TopicName, create: bool, moving: MovingTopic | None, policies: dict,
                    noted: int) -> Topic:
        """Load ``name`` with ``policies`` (the policies in force, read when
        :attr:`_policy_notes` counted ``noted`` changes for it)."""
        ml_name = name.managed_ledger_name
        # A topic not stored yet is checked before it is made (namespace
        # exists, partition rules), in the open's own read of its record.
        ledger = await self.factory.open(ml_name, retention=retention_policy(policies),
                                         creating=lambda: check_creatable(self.store, name, create))
        topic = await Topic.load(self, name, ledger, moving, dedup_enabled=self._dedup_enabled(policies))
        if ledger.state != "open":
            # The load outlived its managed ledger instance: another broker
            # opened it meanwhile (a load slowed by a flapping store, the
            # bundle gone and back), or it failed. Its view may predate that
            # broker's receipts, and its fence was announced before this
            # topic listened. Drop it; the next lookup recovers afresh.
            await self.unload(topic)
            raise ServiceNotReady(f"topic {name}: its managed ledger was {ledger.state} while it loaded; "
                                  "look up again")
        self._apply_policies(topic, policies)
        hold = self.config.load_balancer_transfer_dispatch_hold_ms / 1000
        if hold > 0 and self.cluster is not None and self.cluster.arrived_within(name, ARRIVAL_WINDOW_S):
            topic.dispatch_hold_until = asyncio.get_running_loop().time() + hold
        self.topics[str(name)] = topic
        if self._notes_of(name) != noted:
            # A change noted after the read began may not be in what was
            # applied, and the refresh it started may have passed this topic
            # by (not loaded yet): refresh it now that it is.
            self._refresh_soon((name.namespace_name, name.partitioned_base.local))
        # The record version and the instance tell, after the fact, which
        # view of the managed ledger a load was built on.
        log.info("loaded topic %s (next offset %d, epoch %d, ledger record version %d, instance %x)",
                 name, topic.next_offset, topic.topic_epoch, ledger.record_version, id(ledger))
        for listener in self.topic_loaded:
            listener(topic)
        return topic

    async def check_served_here(self, name: TopicName) -> None:
        """Raise NotServedHere when this broker is a region that is not in
        ``name``'s replication clusters (see :mod:`..namespaces.serving`).
        The binary protocol's LOOKUP, PARTITIONED_METADATA, PRODUCER and
        SUBSCRIBE ask this first; the admin API does not (an operator may
        still read the stats of a copy left behind)."""
        if self.config.separate_configuration_store:
            await check_served_here(self.store, name, self.config.cluster_name)

    async def topic_exists(self, name: TopicName) -> bool:
        return str(name) in self.topics or await self.factory.exists(name.managed_ledger_name)

    async def topics_of_namespace(self, namespace: str) -> list[str]:
        """Fully qualified names of the persistent topics stored under ``tenant/namespace``."""
        # The children of one metadata key: no topic is loaded, and the
        # other namespaces' topics are not read (compacted views nest deeper).
        ns = namespace.strip("/")
        names = set(await catalog.child_names(self.store, f"{ns}/persistent"))
        names.update(t.name.local for t in self.topics.values() if t.name.namespace_name == ns)
        return sorted(f"persistent://{ns}/{n}" for n in names)

    async def namespace_policies(self, namespace: str) -> dict:
        """See :func:`.resources.namespace_policies` (None values: unset)."""
        return await namespace_policies(self.store, namespace)

    def _dedup_enabled(self, policies: dict) -> bool:
        """The ``deduplicationEnabled`` policy in ``policies`` (the topic's or its namespace's), else the broker default."""
        value = policies.get("deduplicationEnabled")
        return self.config.deduplication_enabled if value is None else bool(value)

    @staticmethod
    def _apply_policies(topic: Topic, policies: dict) -> None:
        topic.backlog_quotas = backlog_quotas(policies)
        topic.max_producers = policies.get("max_producers")
        topic.max_consumers = policies.get("max_consumers")
        topic.publish_limiter = limiter_for(policies.get("publish_rate"), topic.publish_limiter)
        topic.ledger.set_storage_profile(policies.get("storage_profile"))  # object storage: latency or cost
        rates = dispatch_rates_for(policies, topic.config, topic.dispatch_rates)
        if rates is not topic.dispatch_rates:
            topic.dispatch_rates = rates
            for sub in list(topic.subscriptions.values()):
                if sub.dispatcher is not None:
                    sub.dispatcher.rates_changed()  # a throttled one need not wait out the old rate

    def _on_policy_change(self, note) -> None:
        """A key under the policy roots changed: refresh the loaded topics it
        concerns (not every loaded topic), in one refresher task that takes
        the changes that came meanwhile in its next pass (a burst of changes
        costs a pass or two, not a pass each)."""
        scope = changed_policies(note.key)
        if scope is None:
            return
        self._policy_notes[scope[0]] += 1
        self._refresh_soon(scope)

    def _notes_of(self, name: TopicName) -> int:
        """How many policy changes that may concern ``name`` were noted so far."""
        return self._policy_notes[name.namespace_name] + self._policy_notes[None]

    def _refresh_soon(self, scope: tuple[str | None, str | None]) -> None:
        """Refresh the loaded topics ``scope`` names (:func:`.changed_policies`), in the refresher task."""
        self._policy_changes.add(scope)
        if self._policy_refresher is None or self._policy_refresher.done():
            self._policy_refresher = asyncio.get_running_loop().create_task(self._refresh_changed(),
                                                                            name="policy refresh")

    async def _refresh_changed(self) -> None:
        while self._policy_changes:
            scopes, self._policy_changes = self._policy_changes, set()
            every = EVERY_TOPIC in scopes
            namespaces = {ns for ns, local in scopes if local is None}
            named = {scope for scope in scopes if scope[1] is not None}
            topics = [t for t in list(self.topics.values())
                      if every or t.name.namespace_name in namespaces
                      or (t.name.namespace_name, t.name.partitioned_base.local) in named]
            try:
                await self._refresh_policies(topics, raise_unread=False)  # unread namespaces: logged
            except Exception:
                log.exception("applying changed policies failed")

    async def refresh_policies_of(self, name: TopicName) -> None:
        """Apply the policies in force to ``name`` (every loaded partition of
        it) now: an admin call that changed them answers after this, so its
        caller's next request sees them (the watch would, a moment later)."""
        base = str(name.partitioned_base)
        await self._refresh_policies([t for t in self.topics.values() if str(t.name.partitioned_base) == base])

    async def refresh_all_policies(self) -> None:
        """Apply the policies in force to every loaded topic (a broker default changed)."""
        await self._refresh_policies()

    async def _refresh_policies(self, topics: list[Topic] | None = None, raise_unread: bool = True) -> None:
        """Apply the policies in force to ``topics`` (None: every loaded one),
        read a namespace at a time (:func:`.applied_by_namespace`: a few
        reads per namespace, not two per topic). A namespace whose read fails
        keeps its topics' policies as they were (logged); the others are
        applied, then the first such error is raised (``raise_unread``)."""
        topics = list(self.topics.values()) if topics is None else topics
        by_name = {topic.name: topic for topic in topics}
        failed: Exception | None = None
        async for namespace, applied in applied_by_namespace(self.store, by_name):
            if isinstance(applied, Exception):
                log.warning("cannot read the policies of namespace %s: %s", namespace, applied)
                failed = failed or applied
                continue
            for name, policies in applied.items():
                topic = by_name[name]
                topic.dedup.enabled = self._dedup_enabled(policies)
                topic.ledger.set_retention(retention_policy(policies))
                self._apply_policies(topic, policies)
        if failed is not None and raise_unread:
            raise failed

    def notify_producer_closed(self, producer: Producer) -> None:
        # After its pending receipts: see Producer.when_reported.
        producer.when_reported(producer.disconnect)

    def fail_topic(self, topic: Topic, exc: BaseException) -> None:
        """Storage failed under ``topic``, or another broker opened its managed
        ledger: unload it (its clients look it up again)."""
        if isinstance(exc, ManagedLedgerFencedError):
            log.info("%s: unloading it: %s", topic.name, exc)
        else:
            log.error("storage failure on %s, unloading it: %s", topic.name, exc)
        asyncio.get_running_loop().create_task(self.unload(topic))

    async def unload(self, topic: Topic) -> None:
        await topic.close()
        if self.topics.get(str(topic.name)) is topic:
            del self.topics[str(topic.name)]
        await topic.ledger.close()

    async def unload_bundle(self, bundle: Bundle) -> None:
        """Close the loaded topics of ``bundle`` (it is no longer ours): their
        clients are disconnected and look the topics up again."""
        for topic in list(self.topics.values()):
            if bundle.namespace == topic.name.namespace_name and self.cluster is not None \
                    and self.cluster.bundle_of(topic.name) == bundle:
                log.info("unloading %s: bundle %s moved", topic.name, bundle)
                try:
                    await self.unload(topic)
                except Exception:
                    log.exception("unloading %s failed", topic.name)
        for topic in list(self.non_persistent.values()):
            if self.cluster is not None and self.cluster.bundle_of(topic.name) == bundle:
                await self.close_non_persistent(topic)

    async def close_non_persistent(self, topic: NonPersistentTopic) -> None:
        """Drop an in-memory topic: its clients reconnect (to its owner)."""
        if self.non_persistent.get(str(topic.name)) is topic:
            del self.non_persistent[str(topic.name)]
        await topic.close()

    def non_persistent_topics_of(self, namespace: str) -> list[str]:
        """The non-persistent topics this broker serves in ``tenant/namespace``."""
        return sorted(name for name, t in self.non_persistent.items() if t.name.namespace_name == namespace.strip("/"))

    def _topics_of(self, bundle: Bundle) -> list[Topic]:
        cluster = self.cluster
        return [t for t in self.topics.values()
                if cluster is not None and t.name.namespace_name == bundle.namespace and cluster.bundle_of(t.name) == bundle]

    def loaded_topics(self) -> list[Topic | NonPersistentTopic]:
        """The loaded topics, persistent and not: what this broker's load
        reports count, by bundle (``cluster/load_report.py``)."""
        return [*self.topics.values(), *self.non_persistent.values()]

    async def release_bundle(self, bundle: Bundle) -> list[str]:
        """First phase of moving ``bundle`` without lookups (PIP-307): its topics
        stop appending, close their ledgers and persist their cursors (all at
        once, bounded); clients stay connected, held.
        The bundle is held released from the first step (before any wait),
        even with no topic loaded, until :meth:`hand_over_bundle`. Returns
        the released topics' names, busiest first (the destination loads
        them before it takes the bundle: ``arrivals.py``)."""
        held = self._released.setdefault(bundle, [])
        topics = self._topics_of(bundle)
        for topic in topics:
            log.info("releasing %s: bundle %s is moving", topic.name, bundle)
            held.append(topic)
            del self.topics[str(topic.name)]

        async def release(topic: Topic) -> None:
            await topic.release()
            # Now, not at the hand-over: the destination reads the cursors
            # when it opens the topic, before it takes the bundle.
            await topic.ledger.close_cursors()

        await each_bounded(topics, release, CLOSE_CONCURRENCY, log, "releasing (its clients will look it up)")
        busiest = sorted(topics, key=lambda t: (not t.producers, -t.msg_in))
        return [t.moving() for t in busiest]

    async def prepare_bundle(self, bundle: Bundle, topics: list[MovingTopic]) -> None:
        """Load ``topics`` of ``bundle``, which is moving here, before this
        broker takes it (``arrivals.py``)."""
        cluster = self.cluster
        if cluster is None or self.closing:
            return

        def belongs(name: TopicName) -> bool:
            return name.namespace_name == bundle.namespace and cluster.bundle_of(name) == bundle

        loaded = await arrivals.prepare(topics, belongs, lambda name, m: self._load_once(name, False, m))
        self.topics_prepared += loaded
        log.info("bundle %s: %d of %d moving topics loaded before taking it", bundle, loaded, len(topics))

    def bundle_arrived(self, bundle: Bundle) -> None:
        """``bundle`` moved here and is ours: its topics loaded before that
        (:meth:`prepare_bundle`) hold their dispatch from now, as a topic
        loaded after the move does from its load."""
        hold = self.config.load_balancer_transfer_dispatch_hold_ms / 1000
        if hold > 0:
            until = asyncio.get_running_loop().time() + hold
            for topic in self._topics_of(bundle):
                topic.dispatch_hold_until = max(topic.dispatch_hold_until, until)

    def holds_released(self, bundle: Bundle) -> bool:
        """Whether ``bundle`` was released here and waits to be handed over."""
        return bundle in self._released

    def hand_over_bundle(self, bundle: Bundle, assigned: tuple[str, str] | None) -> None:
        """Last phase: tell the released topics' clients where the bundle went
        (``assigned``: the new owner's plain and TLS service URLs; None: they
        look it up), once each topic's cursors hold the
        acknowledgements taken while it moved."""
        topics = self._released.pop(bundle, [])
        if topics:
            task = asyncio.get_running_loop().create_task(self._hand_over(topics, assigned))
            self._handovers.add(task)
            task.add_done_callback(self._handovers.discard)

    async def handed_over(self) -> None:
        """Return once the hand-overs under way have told their clients."""
        while self._handovers:
            await asyncio.gather(*list(self._handovers), return_exceptions=True)

    @staticmethod
    async def _hand_over(topics: list[Topic], assigned: tuple[str, str] | None) -> None:
        await asyncio.gather(*(t.hand_over(assigned) for t in topics), return_exceptions=True)

    async def unload_all(self) -> None:
        """Close every loaded topic (this broker lost its metadata session)."""
        await each_bounded(list(self.topics.values()), self.unload, CLOSE_CONCURRENCY, log, "unloading")
        for topic in list(self.non_persistent.values()):
            await self.close_non_persistent(topic)

    async def delete_topic(self, name: TopicName) -> None:
        """Unload the topic and delete its managed ledger, compacted views and
        producer history. Loads of the name that arrive meanwhile (its own
        clients, reconnecting) wait until it is done; a load already under
        way is let finish, and what it loaded is deleted."""
        key = str(name)
        await self._after_delete(key)  # one delete of a name at a time
        done = asyncio.get_running_loop().create_future()
        self._deleting[key] = done
        try:
            pending = self._loading.get(key)
            if pending is not None:
                await asyncio.gather(asyncio.shield(pending), return_exceptions=True)
            topic = self.topics.get(key)
            if topic is not None:
                await self.unload(topic)
            await self.factory.delete(name.managed_ledger_name)
            await self.compactor.delete_views(name)
            # A topic created again under this name starts with no producer history.
            await delete_snapshot(self.store, name.managed_ledger_name)
        finally:
            del self._deleting[key]
            done.set_result(None)

    async def close(self) -> None:
        self.closing = True
        self._policy_watch.cancel()
        self._topic_policy_watch.cancel()
        if self._policy_refresher is not None:
            self._policy_refresher.cancel()
        self.compactor.close()
        # Together, a bounded number at a time: a topic's close waits on its
        # final snapshot's write, and the next ones need not wait for it.
        await each_bounded(list(self.topics.values()), lambda t: t.close(), CLOSE_CONCURRENCY, log, "closing")
        self.topics.clear()
        for np_topic in list(self.non_persistent.values()):
            await np_topic.close()
        self.non_persistent.clear()
