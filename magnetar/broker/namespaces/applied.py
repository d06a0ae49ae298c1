"""The policies that apply to one topic: its namespace's, with the topic's
own (set on Pulsar's topic-level paths) in front.

Pulsar's order: a policy set on the topic wins; else the namespace's; else
the broker's default (what the namespace field ``None`` means to the features
that read it). ``backlog_quota_map`` is taken whole from the topic when it
has any quota. The topic-level fields beside the namespace's:
``max_producers`` and ``max_consumers`` (None: no limit; the namespace's
``max_producers_per_topic`` / ``max_consumers_per_topic`` when the topic sets none).

**Many topics at once.** :func:`applied_policies` costs two reads (the
namespace's document and the topic's own); a round over every loaded topic
(message expiry, the refresh after a policy change, geo-replication's pass)
uses :func:`applied_by_namespace` instead: per namespace, one read of its
policies and either one read per distinct (partitioned) topic, for up to
:data:`GETS_UP_TO` of them, or one range read per
:data:`~.policy_keys.TOPIC_POLICIES_PAGE` topic documents of the namespace.
At 10,000 loaded topics in a few namespaces that is a few reads a round,
not 20,000 competing with the object committer's etcd transactions. What it
returns was read during the call: a change is seen by the next call.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from magnetar.metadata.store import MetadataStore

from magnetar.broker.topic_name import TopicName

from . import policy_keys, resources

#: Policies a topic may set for itself (stored names; the REST paths are Pulsar's).
TOPIC_FIELDS = ("retention_policies", "message_ttl_in_seconds", "deduplicationEnabled", "backlog_quota_map",
                "max_producers", "max_consumers", "publish_rate", "dispatch_rate", "subscription_dispatch_rate",
                "replication_clusters")


def overlay(namespace_policies: dict, own: dict) -> dict:
    """``namespace_policies`` with every policy ``own`` sets in front."""
    out = {**namespace_policies, "max_producers": namespace_policies.get("max_producers_per_topic"),
           "max_consumers": namespace_policies.get("max_consumers_per_topic")}
    for field, value in own.items():
        if value is None or (field == "backlog_quota_map" and not value):
            continue
        out[field] = value
    return out


async def applied_policies(store: MetadataStore, name: TopicName) -> dict:
    """The policies in force for ``name`` (see :func:`overlay`)."""
    return overlay(await resources.namespace_policies(store, name.namespace_name),
                   await resources.topic_policies(store, name))


#: Up to this many distinct topics of a namespace, their own policies are
#: read one by one; more, with range reads of the namespace's documents
#: (which cost by the documents stored, loaded or not).
GETS_UP_TO = 4


async def applied_by_namespace(store: MetadataStore, names: Iterable[TopicName]
                               ) -> AsyncIterator[tuple[str, dict[TopicName, dict] | Exception]]:
    """For each namespace of ``names`` in turn (in order of first appearance),
    ``(namespace, {name: the policies in force})`` (as :func:`applied_policies`
    gives them), or ``(namespace, error)`` when a read of it failed: the
    caller logs it and goes on with the next namespace. Each namespace is read
    right before it is yielded, so a round acts on policies at most one
    namespace old."""
    by_namespace: dict[str, list[TopicName]] = {}
    for name in names:
        by_namespace.setdefault(name.namespace_name, []).append(name)
    for namespace, members in by_namespace.items():
        try:
            found = await read_namespace(store, namespace, members)
        except Exception as exc:  # this namespace's read failed: the others still go
            yield namespace, exc
            continue
        yield namespace, found


async def read_namespace(store: MetadataStore, namespace: str, members: list[TopicName]) -> dict[TopicName, dict]:
    """The policies in force for each of ``members`` (topics of ``namespace``):
    its record, and the topics' documents one read each for up to
    :data:`GETS_UP_TO` distinct topics, else by range. Raises what the store raises."""
    policies = await resources.namespace_policies(store, namespace)
    bases = {policy_keys.topic_policies_child(name): name for name in members}
    if len(bases) <= GETS_UP_TO:
        own = {child: await resources.topic_policies(store, name) for child, name in bases.items()}
    else:
        own = await policy_keys.namespace_topic_policies(store, namespace)
    return {name: overlay(policies, own.get(policy_keys.topic_policies_child(name), {})) for name in members}
