"""Whether this cluster serves a topic at all (geo-replication, Pulsar's rule).

A region serves the topics of a namespace only if it is one of the
namespace's ``replication_clusters`` (or of the topic's own list, which
replaces the namespace's): elsewhere Pulsar answers lookups, producers and
subscriptions with an error saying the namespace is not served in this
cluster, instead of serving a copy that never replicates. A client pointed
at the wrong region is told so at once rather than writing where nobody
reads.

The rule applies to brokers of a region (a separate configuration store);
a standalone broker or a lone cluster serves every namespace as before, and
an empty list (no replication policy) is served everywhere.
"""
from __future__ import annotations

from magnetar.broker.errors import NotServedHere
from magnetar.broker.topic_name import TopicName
from magnetar.metadata import MetadataStore

from . import resources


async def applied_replication_clusters(store: MetadataStore, name: TopicName) -> list[str]:
    """The topic's own ``replication_clusters`` if set, else its namespace's
    (empty when neither sets one, or the namespace does not exist)."""
    clusters = await resources.topic_replication_clusters(store, name)
    if clusters is None:
        policies = await resources.namespace_policies(store, name.namespace_name)
        clusters = policies.get("replication_clusters") or []
    return list(clusters)


async def check_served_here(store: MetadataStore, name: TopicName, local_cluster: str) -> None:
    """Raise :class:`NotServedHere` when ``name``'s replication clusters are
    set and do not include ``local_cluster``. Metadata errors propagate (the
    caller answers ServiceNotReady and the client retries)."""
    clusters = await applied_replication_clusters(store, name)
    if clusters and local_cluster not in clusters:
        raise NotServedHere(
            f"Namespace {name.namespace_name} is not served in cluster {local_cluster}: "
            f"topic {name} lives in {', '.join(sorted(clusters))} (its replication_clusters); "
            f"connect to one of those clusters")
