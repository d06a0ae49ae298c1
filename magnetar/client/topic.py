"""Topic names: short forms expanded the way Pulsar does.

``my-topic`` -> ``persistent://public/default/my-topic``;
``tenant/ns/my-topic`` -> ``persistent://tenant/ns/my-topic``.
"""
from __future__ import annotations

from .errors import InvalidTopicName

PARTITION_SUFFIX = "-partition-"


def full_topic_name(topic: str) -> str:
    """The fully qualified name of ``topic``; raises InvalidTopicName."""
    if not topic or topic.strip() != topic:
        raise InvalidTopicName(f"invalid topic name {topic!r}")
    if "://" in topic:
        scheme, _, rest = topic.partition("://")
        if scheme not in ("persistent", "non-persistent") or len(rest.split("/")) < 3:
            raise InvalidTopicName(f"invalid topic name {topic!r}")
        return topic
    parts = topic.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3 and all(parts):
        return f"persistent://{topic}"
    raise InvalidTopicName(f"invalid topic name {topic!r}")


def partition_name(topic: str, index: int) -> str:
    return f"{topic}{PARTITION_SUFFIX}{index}"


def partition_index(topic: str) -> int:
    """The partition index in a ``...-partition-N`` name, else -1."""
    head, sep, tail = topic.rpartition(PARTITION_SUFFIX)
    return int(tail) if sep and head and tail.isdigit() else -1
