"""Topic partitions and offset specifications.

Offsets are Magnetar's dense per-topic message offsets (``Message.offset``):
the first message of a topic has offset 0 and every message takes the next
one. A *range* ``[start, end)`` names the messages with ``start <= offset <
end``; ``end`` is exclusive, so "up to latest" is the topic's next offset.

The JSON shape, used by ``startingOffsets`` / ``endingOffsets`` and by the
streaming source's checkpointed offsets::

    {"persistent://public/default/orders": {"-1": 42},
     "persistent://public/default/clicks": {"0": 7, "1": 0}}

Topic -> {partition index as a string -> offset}. Partition ``-1`` is a
non-partitioned topic; ``0..n-1`` are the partitions of a partitioned topic.
Short topic names (``orders``, ``tenant/ns/orders``) are accepted and expanded.
In options, offset ``-2`` means earliest and ``-1`` latest (Kafka's
convention); checkpointed offsets are always concrete (>= 0).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

from magnetar.client.topic import full_topic_name, partition_name

from .errors import OptionError

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True, order=True)
class TopicPartition:
    """One readable log: a non-partitioned topic (partition -1) or one
    partition of a partitioned topic. ``topic`` is the fully qualified base
    name, which is what rows carry in their ``topic`` column."""

    topic: str
    partition: int = -1

    @property
    def name(self) -> str:
        """The name the broker knows this log by."""
        return self.topic if self.partition < 0 else partition_name(self.topic, self.partition)

    def __str__(self) -> str:
        return self.topic if self.partition < 0 else f"{self.topic}[{self.partition}]"


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or stop: ``default`` (EARLIEST or LATEST) for every
    partition, except those listed in ``explicit`` (offset, EARLIEST or LATEST)."""

    default: int
    explicit: Mapping[TopicPartition, int] = field(default_factory=dict)

    def for_partition(self, tp: TopicPartition) -> int:
        return self.explicit.get(tp, self.default)

    def check_covered_by(self, option: str, partitions: list[TopicPartition]) -> None:
        """Raise OptionError if the JSON names a partition the query does not read."""
        known = set(partitions)
        stray = sorted(str(tp) for tp in self.explicit if tp not in known)
        if stray:
            raise OptionError(
                f"option {option!r} names partitions this query does not read: {', '.join(stray)}; "
                f"it reads: {', '.join(str(tp) for tp in sorted(known)) or 'nothing'}"
            )


def parse_offset_spec(option: str, text: str | None, *, default: int, allow_earliest: bool = True,
                      allow_latest: bool = True) -> OffsetSpec:
    """Parse ``earliest``, ``latest`` or the JSON shape of the module docstring.

    Raises OptionError naming ``option`` for anything else, for offsets below
    -2, and for earliest/latest where they make no sense (``endingOffsets``
    cannot be earliest).
    """
    if text is None or not text.strip():
        return OffsetSpec(default)
    word = text.strip().lower()
    allowed = [w for w, ok in (("earliest", allow_earliest), ("latest", allow_latest)) if ok]
    if word in ("earliest", "latest"):
        if word not in allowed:
            raise OptionError(f"option {option!r} cannot be {word!r} (allowed: {' or '.join(allowed)} or JSON)")
        return OffsetSpec(EARLIEST if word == "earliest" else LATEST)
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise OptionError(
            f"option {option!r} is neither {', '.join(repr(w) for w in allowed)} nor valid JSON ({exc}); "
            f'expected e.g. {{"persistent://public/default/t": {{"-1": 42}}}}'
        ) from None
    explicit = offsets_from_json(option, doc)
    for tp, off in explicit.items():
        if (off == EARLIEST and not allow_earliest) or (off == LATEST and not allow_latest):
            word = "earliest (-2)" if off == EARLIEST else "latest (-1)"
            raise OptionError(f"option {option!r}: {tp} cannot be {word}")
    return OffsetSpec(default, explicit)


def offsets_from_json(what: str, doc: object, *, concrete: bool = False) -> dict[TopicPartition, int]:
    """The partition -> offset map of a decoded JSON document.

    ``concrete`` requires offsets >= 0 (checkpointed offsets); otherwise
    -2 (earliest) and -1 (latest) are allowed too. Raises OptionError.
    """
    if not isinstance(doc, dict):
        raise OptionError(f"{what}: expected a JSON object of topic -> {{partition: offset}}, got {_kind(doc)}")
    out: dict[TopicPartition, int] = {}
    lowest = 0 if concrete else EARLIEST
    for topic, parts in doc.items():
        try:
            full = full_topic_name(topic)
        except Exception as exc:
            raise OptionError(f"{what}: {exc}") from None
        if not isinstance(parts, dict) or not parts:
            raise OptionError(f"{what}: topic {topic!r} must map to a non-empty object of partition -> offset, "
                              f"got {_kind(parts)}")
        for key, offset in parts.items():
            try:
                partition = int(key)
            except (TypeError, ValueError):
                raise OptionError(f"{what}: partition {key!r} of {topic!r} is not an integer "
                                  "(use \"-1\" for a non-partitioned topic)") from None
            if partition < -1:
                raise OptionError(f"{what}: partition {partition} of {topic!r} is invalid (-1 or >= 0)")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < lowest:
                raise OptionError(f"{what}: offset {offset!r} of {topic!r} partition {key} must be an integer "
                                  f">= {lowest}")
            out[TopicPartition(full, partition)] = offset
    return out


@dataclass(frozen=True)
class TimeSpec:
    """Publish times (ms since the epoch) to start or stop at: ``default`` for
    every partition (None: none), except those in ``explicit``. A time
    resolves to the offset of the partition's first message published at or
    after it (its next offset when there is none)."""

    default: int | None = None
    explicit: Mapping[TopicPartition, int] = field(default_factory=dict)

    def for_partition(self, tp: TopicPartition) -> int | None:
        return self.explicit.get(tp, self.default)

    def __bool__(self) -> bool:
        return self.default is not None or bool(self.explicit)

    check_covered_by = OffsetSpec.check_covered_by


def parse_time_spec(option: str, text: str | None, global_option: str, global_text: str | None) -> TimeSpec:
    """``option`` is JSON of topic -> {partition: time in ms} (the offsets
    shape); ``global_option`` one time for every partition. Raises OptionError
    for bad JSON, a negative or non-integer time, or both options given."""
    default = None
    if global_text is not None and global_text.strip():
        try:
            default = int(global_text.strip())
        except ValueError:
            raise OptionError(f"option {global_option!r} must be a time in milliseconds since the epoch, "
                              f"got {global_text!r}") from None
        if default < 0:
            raise OptionError(f"option {global_option!r} must be >= 0, got {default}")
    if text is None or not text.strip():
        return TimeSpec(default)
    if default is not None:
        raise OptionError(f"give {option!r} or {global_option!r}, not both")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise OptionError(f"option {option!r} is not valid JSON ({exc}); expected e.g. "
                          f'{{"persistent://public/default/t": {{"-1": 1700000000000}}}}') from None
    explicit = offsets_from_json(option, doc, concrete=True)
    return TimeSpec(None, explicit)


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The JSON-ready form of a concrete offset map (Spark checkpoints it)."""
    doc: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        doc.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return doc


def _kind(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string"}.get(type(value), type(value).__name__)
