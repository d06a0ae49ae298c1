"""Topic lists for GET_TOPICS_OF_NAMESPACE: pattern filtering and the list hash.

Pattern subscriptions send a regex such as ``persistent://public/default/abc-.*``.
As in Pulsar, the domain (``persistent://``) is taken off both the pattern
and the names, and a partition matches when its partitioned topic's name
matches (so ``abc-.*`` brings in ``abc-x-partition-0``). The match is a full
match, with Python's regex dialect (close to Java's for what patterns use).

The hash lets a client that polls for new topics learn "nothing changed"
without the list: any stable digest works, since clients only compare hashes
the broker gave them.
"""
from __future__ import annotations

import re

from magnetar.protocol.checksum import crc32c

from magnetar.broker.topic_name import InvalidTopicName, parse


def _without_domain(name: str) -> str:
    return name.split("://", 1)[1] if "://" in name else name


def filter_topics(topics: list[str], pattern: str) -> list[str]:
    """The topics whose partitioned base name matches ``pattern``.

    Raises ``re.error`` for a pattern that does not compile.
    """
    regex = re.compile(_without_domain(pattern))
    out = []
    for topic in topics:
        try:
            base = str(parse(topic).partitioned_base)
        except InvalidTopicName:
            continue
        if regex.fullmatch(_without_domain(base)):
            out.append(topic)
    return out


def topics_hash(topics: list[str]) -> str:
    """A digest of the set of names (order does not matter)."""
    crc = 0
    for topic in sorted(topics):
        crc = crc32c(topic.encode() + b"\n", crc)  # names hold no newline
    return f"{crc:08x}"
