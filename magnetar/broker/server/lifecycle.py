"""Creating and deleting topics and namespaces: the rules that span the
metadata resources (:mod:`.resources`) and the topics the broker serves.

- A topic is created only in a namespace that exists. A partitioned topic is
  metadata (its partition count) plus one ordinary topic per partition
  (``<name>-partition-<i>``); partitions are created with it, and a missing
  partition of a partitioned topic may always be created on demand (a crash
  between the metadata write and the partitions is harmless). The base name
  of a partitioned topic cannot also be a non-partitioned topic.
- A topic or namespace in use is not deleted unless forced: a topic is in use
  while producers or consumers are attached (:class:`PreconditionFailed`,
  412); a namespace while it has topics (:class:`NotEmpty`, 409).
- Growing a partitioned topic creates the new partitions with every durable
  subscription of the existing ones, at their start, so consumers that find
  the new partitions later miss nothing published to them meanwhile.

Errors are :class:`~.resources.ResourceError` subclasses for the admin API,
and :class:`~.errors.TopicNotFound` / :class:`~.errors.NotAllowed` on the
binary protocol's paths (:func:`partitioned_metadata`; creation on load:
:func:`~magnetar.broker.namespaces.creation.check_creatable`).
"""
from __future__ import annotations

import logging

from magnetar.broker.subscriptions import cursor_ops

from magnetar.broker.namespaces import resources
from magnetar.broker.errors import TopicNotFound
from magnetar.broker.namespaces.resources import AlreadyExists, InvalidInput, NotEmpty, ResourceNotFound, PreconditionFailed
from magnetar.broker.topic_name import TopicName, parse

from magnetar.broker.topics.topic import Topic

from .service import BrokerService

log = logging.getLogger(__name__)

#: Most partitions one topic may have: each is a managed ledger with open files.
MAX_PARTITIONS = 1024


# -- the binary protocol's paths -------------------------------------------------
async def partitioned_metadata(service: BrokerService, name: TopicName, auto_create: bool = True) -> int:
    """The answer to PARTITIONED_METADATA: the partition count, 0 for a
    non-partitioned topic (or a partition).

    With ``default_num_partitions > 0`` and auto creation on, a topic that
    does not exist yet is created partitioned here (clients ask this first).
    Raises TopicNotFound when the namespace does not exist.
    """
    store = service.store
    if name.partition_index >= 0:
        return 0
    count = await resources.get_partitions(store, name)
    if count:
        return count
    if not await resources.namespace_exists(store, name.namespace_name):
        raise TopicNotFound(f"namespace {name.namespace_name} does not exist")
    default = service.config.default_num_partitions
    if (default > 0 and auto_create and service.config.allow_auto_topic_creation
            and not await service.topic_exists(name)):
        try:
            await create_partitioned_topic(service, name, default)
        except AlreadyExists:
            pass  # another client created it meanwhile
        return await resources.get_partitions(store, name)
    return 0


# -- listing ------------------------------------------------------------------------
async def namespace_topics(service: BrokerService, namespace: str) -> list[str]:
    """Every persistent topic of the namespace, partitions included (not the
    partitioned topics' base names), as Pulsar lists them."""
    names = set(await service.topics_of_namespace(namespace))
    for base in await resources.list_partitioned(service.store, namespace):
        count = await resources.get_partitions(service.store, parse(base))
        names.update(f"{base}-partition-{i}" for i in range(count))
    return sorted(names)


# -- non-partitioned topics --------------------------------------------------------
async def _require_namespace(service: BrokerService, name: TopicName) -> None:
    if not await resources.namespace_open_for_topics(service.store, name.namespace_name):
        raise ResourceNotFound(f"Namespace {name.namespace_name} does not exist (or is being deleted)")


async def create_topic(service: BrokerService, name: TopicName) -> None:
    """Create a non-partitioned topic (it is loaded)."""
    await _require_namespace(service, name)
    if await resources.get_partitions(service.store, name):
        raise AlreadyExists(f"{name} already exists as a partitioned topic")
    if await service.topic_exists(name):
        raise AlreadyExists(f"Topic {name} already exists")
    await service.get_topic(name, create=True)


def in_use(topic: Topic) -> bool:
    return bool(topic.producers or topic.waiting or any(s.consumers for s in topic.subscriptions.values()))


async def delete_topic(service: BrokerService, name: TopicName, force: bool = False) -> None:
    """Delete a non-partitioned topic (or one partition) with its subscriptions and data."""
    if await resources.get_partitions(service.store, name):
        raise AlreadyExists(f"{name} is a partitioned topic: delete it with DELETE .../partitions")
    if not await service.topic_exists(name):
        raise ResourceNotFound(f"Topic {name} does not exist")
    topic = service.topics.get(str(name))
    if topic is not None and in_use(topic) and not force:
        raise PreconditionFailed(f"Topic {name} has active producers or consumers (use force)")
    await service.delete_topic(name)
    log.info("deleted topic %s", name)


# -- partitioned topics ------------------------------------------------------------
def check_partition_count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_PARTITIONS:
        raise InvalidInput(f"the number of partitions must be an integer in 1..{MAX_PARTITIONS}, got {value!r}")
    return value


async def create_partitioned_topic(service: BrokerService, name: TopicName, partitions: int) -> None:
    """Write the partition count, then create the partitions."""
    check_partition_count(partitions)
    if name.partition_index >= 0:
        raise InvalidInput(f"a partitioned topic's name cannot end in -partition-<n>: {name}")
    await _require_namespace(service, name)
    if await service.topic_exists(name):
        raise AlreadyExists(f"Topic {name} already exists as a non-partitioned topic")
    await resources.create_partitioned(service.store, name, partitions)
    if service.cluster is not None:
        # Each partition is created by the broker that owns its bundle, on
        # first use (a partition of a partitioned topic may always be created).
        log.info("created partitioned topic %s with %d partitions", name, partitions)
        return
    for i in range(partitions):
        await service.get_topic(name.partition(i), create=True)
    log.info("created partitioned topic %s with %d partitions", name, partitions)


async def update_partitioned_topic(service: BrokerService, name: TopicName, partitions: int) -> None:
    """Grow a partitioned topic to ``partitions``."""
    check_partition_count(partitions)
    if not await resources.get_partitions(service.store, name):
        raise ResourceNotFound(f"Partitioned topic {name} does not exist")
    before = await resources.update_partitions(service.store, name, partitions)
    subscriptions: set[str] = set()
    for i in range(before):
        topic = await service.get_topic(name.partition(i), create=True)
        subscriptions.update(n for n, s in topic.subscriptions.items() if s.durable)
    for i in range(before, partitions):
        topic = await service.get_topic(name.partition(i), create=True)
        for sub in sorted(subscriptions - set(topic.subscriptions)):
            try:
                await cursor_ops.create(topic, sub, None, earliest=True)
            except KeyError:
                pass  # a consumer got there first
    log.info("partitioned topic %s grew from %d to %d partitions", name, before, partitions)


async def delete_partitioned_topic(service: BrokerService, name: TopicName, force: bool = False) -> None:
    """Delete every partition, then the partition count."""
    count = await resources.get_partitions(service.store, name)
    if not count:
        raise ResourceNotFound(f"Partitioned topic {name} does not exist")
    partitions = [name.partition(i) for i in range(count)]
    busy = [p for p in partitions if (t := service.topics.get(str(p))) is not None and in_use(t)]
    if busy and not force:
        raise PreconditionFailed(f"Partitioned topic {name} has active producers or consumers (use force)")
    for partition in partitions:
        if await service.topic_exists(partition):
            await service.delete_topic(partition)
    await resources.delete_partitioned(service.store, name)
    log.info("deleted partitioned topic %s", name)


async def targets(service: BrokerService, name: TopicName) -> list[TopicName]:
    """The topics an operation on ``name`` applies to: its partitions when it
    is partitioned, else itself. ResourceNotFound when it is neither."""
    count = await resources.get_partitions(service.store, name)
    if count:
        return [name.partition(i) for i in range(count)]
    if await service.topic_exists(name):
        return [name]
    raise ResourceNotFound(f"Topic {name} does not exist")


# -- namespaces ------------------------------------------------------------------------
async def delete_namespace(service: BrokerService, namespace: str, force: bool = False) -> None:
    """Delete a namespace; with ``force`` its topics go first, else it must be empty.

    The namespace is marked deleted before its topics are looked at, so no
    client can create a topic in it meanwhile (a refused, non-forced delete
    takes the mark back). If deleting a topic fails the mark stays: topics
    cannot be created there until the delete is retried.
    """
    store = service.store
    await resources.set_policy(store, namespace, "deleted", True)  # ResourceNotFound
    partitioned = await resources.list_partitioned(store, namespace)
    plain = await service.topics_of_namespace(namespace)
    if (partitioned or plain) and not force:
        await resources.set_policy(store, namespace, "deleted", None)
        raise NotEmpty(f"Cannot delete non empty namespace {namespace}: it has {len(plain)} topic(s) "
                       f"and {len(partitioned)} partitioned topic(s) (use force)")
    for full in partitioned:
        await delete_partitioned_topic(service, parse(full), force=True)
    for full in await service.topics_of_namespace(namespace):
        await service.delete_topic(parse(full))
    await resources.delete_namespace(service.store, namespace)
    log.info("deleted namespace %s", namespace)
