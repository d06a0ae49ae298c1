"""The policies that apply to one topic: its namespace's, with the topic's
own (set on Pulsar's topic-level paths) in front.

Pulsar's order: a policy set on the topic wins; else the namespace's; else
the broker's default (what the namespace field ``None`` means to the features
that read it). ``backlog_quota_map`` is taken whole from the topic when it
has any quota. The topic-level fields beside the namespace's:
``max_producers`` and ``max_consumers`` (None: no limit; the namespace's
``max_producers_per_topic`` / ``max_consumers_per_topic`` when the topic sets none).
"""
from __future__ import annotations

from magnetar.metadata.store import MetadataStore

from magnetar.broker.topic_name import TopicName

from . import resources

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
