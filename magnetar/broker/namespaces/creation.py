"""Whether a topic that is not stored yet may be created when a client asks for it.

The binary protocol's path (PRODUCER, SUBSCRIBE, LOOKUP with auto-creation)
loads topics on demand; this is the rule it applies first. The admin API's
create and delete operations live in ``server.lifecycle``.
"""
from __future__ import annotations

from magnetar.broker.errors import NotAllowed, TopicNotFound
from magnetar.broker.topic_name import TopicName
from magnetar.metadata import MetadataStore

from . import resources


async def check_creatable(store: MetadataStore, name: TopicName, create: bool) -> None:
    """Called before a topic that is not stored yet is loaded: raise
    TopicNotFound (or NotAllowed) unless it may be created now.

    ``create`` says whether the caller may create topics at all (auto
    creation); partitions of a partitioned topic are allowed regardless.
    Nothing is created in a namespace that is missing or being deleted.
    """
    if not await resources.namespace_open_for_topics(store, name.namespace_name):
        raise TopicNotFound(f"namespace {name.namespace_name} does not exist (or is being deleted)")
    if name.partition_index >= 0:
        count = await resources.get_partitions(store, name.partitioned_base)
        if count:
            if name.partition_index < count:
                return
            raise TopicNotFound(f"{name.partitioned_base} has {count} partitions; {name} is not one of them")
    if not create:
        raise TopicNotFound(f"topic {name} does not exist")
    if await resources.get_partitions(store, name):
        raise NotAllowed(f"{name} is a partitioned topic: use its partitions ({name}-partition-<i>)")
