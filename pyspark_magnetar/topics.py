"""Driver-side questions to the broker: which partitions a query reads,
where each one ends (its next offset) and where it begins (its earliest
retained offset).

All functions are coroutines on a :class:`magnetar.client.AsyncClient` (run
them through :class:`~pyspark_magnetar.session.BrokerSession`). The client
has no call for GET_TOPICS_OF_NAMESPACE yet, so :func:`namespace_topics`
sends that command over the client's pooled connection.
"""
from __future__ import annotations

import re

from magnetar.client import AsyncClient, MessageId
from magnetar.client.errors import Timeout
from magnetar.client.entry_reader import create_entry_reader
from magnetar.client.topic import PARTITION_SUFFIX, partition_index
from magnetar.protocol import Type, command, pb

from .errors import TopicNotFoundError
from .offsets import TopicPartition
from .options import TopicSelection


async def next_offset(client: AsyncClient, tp: TopicPartition) -> int:
    """The offset the next message of ``tp`` will get (its high-water mark).

    With auto topic creation on (the broker's default) this creates a
    missing topic: check existence with :func:`resolve_partitions` first.
    Raises the client's errors (TopicNotFound, Timeout, ConnectError, ...).
    """
    return await client.get_next_offset(tp.name)


async def earliest_offset(client: AsyncClient, tp: TopicPartition, next_off: int, timeout_ms: int) -> int:
    """The offset of the first message still stored in ``tp``; ``next_off``
    (the caller's fresh next offset) when nothing is stored.

    Costs one short-lived entry reader (raw entries: a compressed chunk of
    a chunked message counts as stored, though it cannot be decoded alone). A topic whose every message was removed by
    retention answers only after ``timeout_ms`` (the reader waits for a first
    message that never comes).
    """
    if next_off == 0:
        return 0
    reader = await create_entry_reader(client, tp.name, MessageId.earliest, inclusive=True, receiver_queue_size=1)
    try:
        try:
            entry = (await reader.read_entries(1, timeout_ms))[0]
        except Timeout:
            return next_off
        return next_off if entry.first_offset is None else min(entry.first_offset, next_off)
    finally:
        await reader.close()


async def namespace_topics(client: AsyncClient, namespace: str) -> list[str]:
    """Fully qualified names of the persistent topics (and partitions) of ``tenant/namespace``."""
    reply = await client.ask_any_host(
        lambda: command(Type.GET_TOPICS_OF_NAMESPACE, request_id=client.new_request_id(), namespace=namespace,
                        mode=pb.CommandGetTopicsOfNamespace.PERSISTENT))
    return list(reply.getTopicsOfNamespaceResponse.topics)


async def resolve_partitions(client: AsyncClient, sub: TopicSelection, *,
                             check_exists: bool = True) -> list[TopicPartition]:
    """The partitions ``sub`` reads now, sorted.

    Explicit topics must exist (TopicNotFoundError otherwise: reading must
    not create topics); ``check_exists=False`` skips that check (one
    namespace listing per namespace), for a stream that checked at start.
    A pattern may match nothing, which is an empty list.
    """
    if sub.pattern is not None:
        regex = re.compile(sub.pattern)
        bases = {_base_name(name) for name in await namespace_topics(client, sub.namespace or "public/default")}
        out: list[TopicPartition] = []
        for base in sorted(b for b in bases if regex.fullmatch(b)):
            out.extend(await _partitions_of(client, base))
        return sorted(out)
    listed: dict[str, set[str]] = {}
    out = []
    for topic in sub.topics:
        parts = await _partitions_of(client, topic)
        if check_exists and parts == [TopicPartition(topic)]:
            namespace = topic.split("://", 1)[1].rsplit("/", 1)[0]
            if namespace not in listed:
                listed[namespace] = set(await namespace_topics(client, namespace))
            if topic not in listed[namespace]:
                raise TopicNotFoundError(f"topic {topic} does not exist (namespace {namespace} has "
                                         f"{len(listed[namespace])} topics)")
        out.extend(parts)
    return sorted(set(out))


async def _partitions_of(client: AsyncClient, topic: str) -> list[TopicPartition]:
    names = await client.get_topic_partitions(topic)
    if names == [topic]:
        return [TopicPartition(topic)]
    return [TopicPartition(topic, partition_index(name)) for name in names]


def _base_name(name: str) -> str:
    """``.../t-partition-3`` -> ``.../t``; other names unchanged."""
    return name if partition_index(name) < 0 else name.rsplit(PARTITION_SUFFIX, 1)[0]
