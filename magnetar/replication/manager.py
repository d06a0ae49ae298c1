"""The geo-replication extension: which topics replicate where.

A topic replicates to every cluster of its ``replication_clusters`` (its
own, set with ``topics set-replication-clusters``, else its namespace's)
other than the local one, provided the local one is in the list. The manager brings each loaded topic's replicators in line with
that list when the topic loads and then every ``interval`` seconds (policies
live in the shared configuration store; a change made in any region is seen
within one interval):

- a cluster added: a replicator starts, its cursor opened at the earliest
  entry still stored (what was written before replication was turned on
  goes too, as far as retention kept it);
- a cluster removed: its replicator stops and its cursor is deleted, so it
  no longer holds entries back from trimming.

Topics load lazily (on a client's first use), so the manager also loads,
every few seconds, the stored topics of replicated namespaces whose bundle
this broker owns or can take: after a restart, replication resumes without
waiting for a client (Pulsar loads a bundle's topics when it takes the
bundle, to the same end).

The periodic pass reads the policies a namespace at a time
(:func:`~magnetar.broker.namespaces.applied.applied_by_namespace`): a few
reads of the configuration store per namespace each interval, where a read
or two per loaded topic cost 10,000-20,000 a second at 10,000 topics. The
loading pass reads by tenant and namespace too (:meth:`GeoReplication._resume`).

Failure modes: a policy read that fails leaves the topic as it is until the
next pass. A topic that closes or moves stops its replicators itself; the
new owner's manager starts them again from the persisted cursors.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from magnetar.broker import topic_name
from magnetar.broker.namespaces import policy_keys, resources
from magnetar.broker.namespaces.applied import applied_by_namespace
from magnetar.broker.topics.replicators import REPLICATOR_CURSOR_PREFIX, is_replicator_cursor, replicator_cursor
from magnetar.broker.server.server import StartupError
from magnetar.client.auth import from_broker_client_settings
from magnetar.client.errors import PulsarError
from magnetar.storage import catalog

from .remote import RemoteClusters
from .replicator import Replicator
from .subscriptions import ReplicatedSubscriptions

if TYPE_CHECKING:
    from magnetar.broker.config import BrokerConfig
    from magnetar.broker.server.service import BrokerService
    from magnetar.broker.topics.topic import Topic

log = logging.getLogger(__name__)

#: Seconds between passes that load replicated topics nobody has loaded yet.
RESUME_INTERVAL = 5.0


def wanted_remotes(replication_clusters: list[str], local: str) -> set[str]:
    """The clusters a topic of a namespace with this list replicates to."""
    clusters = set(replication_clusters or ())
    return clusters - {local} if local in clusters else set()


class GeoReplication:
    """Broker extension (see ``magnetar.broker.server.server.Extension``)."""

    def __init__(self, service: "BrokerService", config: "BrokerConfig", interval: float = 1.0) -> None:
        self.service = service
        self.local = config.cluster_name
        self.interval = interval
        self.snapshot_interval = config.replicated_subscriptions_snapshot_frequency_ms / 1000
        self.snapshot_timeout = config.replicated_subscriptions_snapshot_timeout_s
        try:
            self.clusters = RemoteClusters(
                service.store, tls=config.broker_client_tls_enabled,
                trust_certs_file=config.broker_client_trust_certs,
                authentication=from_broker_client_settings(config.broker_client_authentication_plugin,
                                                           config.broker_client_authentication_parameters))
        except (ValueError, PulsarError) as exc:
            # The replicators' credential or TLS files: say which, do not start half-configured.
            raise StartupError(f"broker client settings: {exc}") from None
        self._task: asyncio.Task | None = None
        self._pending: set[asyncio.Task] = set()
        self._busy: set[str] = set()  # topics being reconciled (one pass at a time each)

    async def start(self) -> None:
        self.service.topic_loaded.append(self._on_topic_loaded)
        for topic in list(self.service.topics.values()):
            self._on_topic_loaded(topic)
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="geo-replication")

    async def stop(self) -> None:
        if self._on_topic_loaded in self.service.topic_loaded:
            self.service.topic_loaded.remove(self._on_topic_loaded)
        tasks = [t for t in (self._task, *self._pending) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for topic in list(self.service.topics.values()):
            for replicator in topic.replicators.values():
                replicator.stop()
            topic.replicators.clear()
        await self.clusters.close()

    # -- passes --------------------------------------------------------------------------
    def _on_topic_loaded(self, topic: "Topic") -> None:
        # Before the first consumer can read: a topic that was replicated may
        # hold markers from before this load, and _reconcile reads the store first.
        if any(is_replicator_cursor(name) for name in topic.ledger.cursors):
            topic.filter_markers = True
        task = asyncio.get_running_loop().create_task(self._reconcile(topic))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _loop(self) -> None:
        last_resume = -RESUME_INTERVAL
        loop = asyncio.get_running_loop()
        while True:
            if loop.time() - last_resume >= RESUME_INTERVAL:
                last_resume = loop.time()
                await self._resume()
            await asyncio.sleep(self.interval)
            await self._reconcile_all()

    async def _reconcile_all(self) -> None:
        """One pass over the loaded persistent topics, their policies read a
        namespace at a time (a few reads per namespace, not one or two per
        topic every second). A namespace whose read fails is logged and its
        topics stay as they are until the next pass."""
        topics = {t.name: t for t in list(self.service.topics.values()) if t.name.domain == "persistent"}
        async for namespace, applied in applied_by_namespace(self.service.store, topics):
            if isinstance(applied, Exception):
                log.warning("geo-replication: policies of %s: %s", namespace, applied)
                continue
            for name, policies in applied.items():
                await self._reconcile(topics[name], policies.get("replication_clusters") or [])

    async def _resume(self) -> None:
        """Load the stored topics of replicated namespaces that nobody has
        touched since this broker started (or took their bundle), so their
        replicators resume without waiting for a client. A topic whose
        bundle another broker owns is left to that broker's own pass.

        The namespaces come from the configuration store a tenant at a time
        (one range read of its namespaces' policies), the topics of each
        replicated one from one listing of its managed ledgers' keys: reads
        by tenant and namespace, where a walk of every stored managed ledger
        (its record, its cursors) cost several reads per topic every pass."""
        store = self.service.store
        try:
            tenants = await resources.list_tenants(store)
        except Exception as exc:
            log.warning("geo-replication: cannot list tenants: %s", exc)
            return
        for tenant in tenants:
            try:
                namespaces = await policy_keys.tenant_namespace_policies(store, tenant)
            except Exception as exc:
                log.warning("geo-replication: namespaces of %s: %s", tenant, exc)
                continue
            for namespace, policies in sorted(namespaces.items()):
                if not wanted_remotes(policies.get("replication_clusters") or [], self.local):
                    continue
                try:
                    locals_ = await catalog.child_names(store, f"{namespace}/persistent")
                except Exception as exc:
                    log.warning("geo-replication: cannot list the stored topics of %s: %s", namespace, exc)
                    continue
                for local_name in locals_:
                    full = f"persistent://{namespace}/{local_name}"
                    if full in self.service.topics:
                        continue
                    try:
                        await self.service.get_topic(topic_name.parse(full), create=False)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # owned elsewhere, moving, or not stored: not ours to load now
                        log.debug("geo-replication: not loading %s here: %s", full, exc)

    def _snapshots_of(self, topic: "Topic") -> ReplicatedSubscriptions:
        def remotes() -> set[str]:
            return set(topic.replicators)

        def connected(remote: str) -> bool:
            replicator = topic.replicators.get(remote)
            return replicator is not None and replicator.is_connected()

        controller = ReplicatedSubscriptions(topic, self.local, remotes, connected,
                                             interval=self.snapshot_interval, timeout=self.snapshot_timeout)
        controller.start()
        return controller

    async def _reconcile(self, topic: "Topic", clusters: list[str] | None = None) -> None:
        """Start and stop ``topic``'s replicators to match its replication
        clusters: ``clusters`` when the caller read them, else read here."""
        key = str(topic.name)
        if topic.name.domain != "persistent" or key in self._busy:
            return
        self._busy.add(key)
        try:
            if clusters is None:
                clusters = await resources.topic_replication_clusters(self.service.store, topic.name)
            if clusters is None:
                policies = await self.service.namespace_policies(topic.name.namespace_name)
                clusters = policies.get("replication_clusters") or []
            wanted = wanted_remotes(clusters, self.local)
            if topic.closed:
                return
            if wanted:
                topic.filter_markers = True  # stays on: markers may remain in the backlog
                if topic.marker_handler is None:
                    topic.marker_handler = self._snapshots_of(topic)
            elif topic.marker_handler is not None:
                handler, topic.marker_handler = topic.marker_handler, None
                handler.stop()
            for remote in sorted(wanted - set(topic.replicators)):
                cursor = await topic.ledger.open_cursor(replicator_cursor(remote), "earliest")
                if topic.closed:
                    return
                replicator = Replicator(key, cursor, self.local, remote, self.clusters)
                topic.replicators[remote] = replicator
                replicator.start()
                log.info("replicating %s to %s", key, remote)
            stale = {name[len(REPLICATOR_CURSOR_PREFIX):] for name in topic.ledger.cursors
                     if is_replicator_cursor(name)} - wanted
            for remote in sorted(stale):
                replicator = topic.replicators.pop(remote, None)
                if replicator is not None:
                    replicator.stop()
                await topic.ledger.delete_cursor(replicator_cursor(remote))
                log.info("stopped replicating %s to %s (not in replication_clusters)", key, remote)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the next pass tries again
            log.warning("geo-replication of %s: %s", key, exc)
        finally:
            self._busy.discard(key)
