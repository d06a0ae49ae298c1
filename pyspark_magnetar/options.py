"""Reading and checking the options given to ``spark.read/readStream/write/
writeStream.format("magnetar")``.

Spark hands options over lower-cased, as strings. Everything is validated
when the reader or writer is created, on the driver, so a bad option fails
the query before any task runs, with an OptionError naming the option.
Unknown options are ignored (Spark adds its own, such as ``path`` and
``checkpointLocation``) unless they look like a misspelling of ours, which
is an error: a silently ignored ``startingOffset`` would read from the wrong
place.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from magnetar.client.partition_routing import HashingScheme
from magnetar.client.topic import full_topic_name

from .errors import OptionError
from .offsets import EARLIEST, LATEST, OffsetSpec, TimeSpec, parse_offset_spec, parse_time_spec

if TYPE_CHECKING:
    from .value_columns import ValueSpec

_READ_OPTIONS = ("service_url", "topic", "topics", "topicsPattern", "startingOffsets", "endingOffsets",
                 "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingTimestamp", "endingTimestamp",
                 "maxRecordsPerTrigger", "maxOffsetsPerTrigger", "maxRecordsPerPartition", "minPartitions",
                 "failOnDataLoss", "pollTimeoutMs", "operationTimeoutSeconds", "valueFormat")
_WRITE_OPTIONS = ("service_url", "topic", "batchingMaxMessages", "maxPendingMessages", "operationTimeoutSeconds",
                  "hashingScheme")
#: Key hashes a write to a partitioned topic may route by (as Pulsar's clients name them).
HASHING_SCHEMES = {"javastringhash": HashingScheme.JavaStringHash, "murmur3_32hash": HashingScheme.Murmur3_32Hash}

DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_OPERATION_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TopicSelection:
    """What to read: explicit topics, or every topic of a namespace whose
    full name matches ``pattern`` (checked again at every micro-batch)."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    namespace: str | None = None

    def describe(self) -> str:
        return f"topicsPattern {self.pattern!r}" if self.pattern else ", ".join(self.topics)


@dataclass(frozen=True)
class ReadOptions:
    service_url: str
    selection: TopicSelection
    starting: OffsetSpec
    ending: OffsetSpec
    max_records_per_trigger: int | None
    max_records_per_partition: int
    fail_on_data_loss: bool
    poll_timeout_ms: int
    operation_timeout_s: float
    #: Where to start / stop by publish time (ms); partitions it does not name use ``starting`` / ``ending``.
    starting_time: TimeSpec = TimeSpec()
    ending_time: TimeSpec = TimeSpec()
    #: At least this many tasks for a batch (or micro-batch) with rows: long ranges are split.
    min_partitions: int | None = None
    #: ``auto``: a JSON or Avro topic's values as a struct column; ``binary``: always bytes.
    value_format: str = "auto"
    #: The value struct's schema, fixed on the driver (None: values are bytes); see value_columns.
    value: "ValueSpec | None" = None


@dataclass(frozen=True)
class WriteOptions:
    service_url: str
    topic: str | None
    batching_max_messages: int
    max_pending_messages: int
    operation_timeout_s: float
    #: The destination's schema when ``value`` is a struct (fixed on the driver).
    value: "ValueSpec | None" = None
    #: How keys pick a partition of a partitioned destination (:mod:`.partition_rows`).
    hashing_scheme: HashingScheme = HashingScheme.JavaStringHash


def read_options(options: Mapping[str, str], *, streaming: bool | None) -> ReadOptions:
    """Options of a batch (``streaming=False``) or streaming read (None: either,
    without the checks that depend on which).

    Defaults follow Spark's Kafka source: batch reads go from earliest to
    latest, streams start at latest. Raises OptionError.
    """
    opts = _lower(options)
    _reject_misspellings(opts, _READ_OPTIONS)
    for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
        if streaming is True and opts.get(name.lower()):
            raise OptionError(f"option {name!r} is for batch reads only; a stream has no end "
                              "(use Trigger.AvailableNow to stop at the offsets present at start)")
    for name in ("maxRecordsPerTrigger", "maxOffsetsPerTrigger"):
        if streaming is False and opts.get(name.lower()):
            raise OptionError(f"option {name!r} is for streaming reads only")
    per_trigger = _positive_int(opts, "maxRecordsPerTrigger", None)
    offsets_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger", None)
    if per_trigger is not None and offsets_per_trigger is not None and per_trigger != offsets_per_trigger:
        raise OptionError(f"options 'maxRecordsPerTrigger' ({per_trigger}) and 'maxOffsetsPerTrigger' "
                          f"({offsets_per_trigger}) disagree; offsets are dense, so they mean the same: give one")
    starting = parse_offset_spec("startingOffsets", opts.get("startingoffsets"),
                                 default=LATEST if streaming else EARLIEST)
    ending = parse_offset_spec("endingOffsets", opts.get("endingoffsets"), default=LATEST, allow_earliest=False)
    return ReadOptions(
        service_url=_service_url(opts),
        selection=_selection(opts),
        starting=starting,
        ending=ending,
        max_records_per_trigger=per_trigger or offsets_per_trigger,
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition", DEFAULT_MAX_RECORDS_PER_PARTITION),
        starting_time=parse_time_spec("startingOffsetsByTimestamp", opts.get("startingoffsetsbytimestamp"),
                                      "startingTimestamp", opts.get("startingtimestamp")),
        ending_time=parse_time_spec("endingOffsetsByTimestamp", opts.get("endingoffsetsbytimestamp"),
                                    "endingTimestamp", opts.get("endingtimestamp")),
        min_partitions=_positive_int(opts, "minPartitions", None),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        poll_timeout_ms=_positive_int(opts, "pollTimeoutMs", DEFAULT_POLL_TIMEOUT_MS),
        operation_timeout_s=_positive_float(opts, "operationTimeoutSeconds", DEFAULT_OPERATION_TIMEOUT_S),
        value_format=_value_format(opts),
    )


def _value_format(opts: Mapping[str, str]) -> str:
    raw = opts.get("valueformat")
    word = (raw or "auto").strip().lower()
    if word not in ("auto", "binary"):
        raise OptionError(f"option 'valueFormat' must be auto (a JSON or Avro topic's schema) or binary, got {raw!r}")
    return word


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """Options of a batch or streaming write. Raises OptionError."""
    opts = _lower(options)
    for name in ("topics", "topicspattern", "startingoffsets", "endingoffsets"):
        if opts.get(name):
            raise OptionError(f"option {name!r} is for reads; a write takes 'topic' (or a 'topic' column)")
    _reject_misspellings(opts, _WRITE_OPTIONS)
    topic = opts.get("topic")
    if topic is not None:
        topic = _full_name("topic", topic.strip())
    batching = _positive_int(opts, "batchingMaxMessages", 1000)
    pending = _positive_int(opts, "maxPendingMessages", 10_000)
    if pending < batching:
        raise OptionError(f"option 'maxPendingMessages' ({pending}) must be >= 'batchingMaxMessages' ({batching})")
    return WriteOptions(
        service_url=_service_url(opts),
        topic=topic,
        batching_max_messages=batching,
        max_pending_messages=pending,
        operation_timeout_s=_positive_float(opts, "operationTimeoutSeconds", DEFAULT_OPERATION_TIMEOUT_S),
        hashing_scheme=_hashing_scheme(opts),
    )


def _hashing_scheme(opts: Mapping[str, str]) -> HashingScheme:
    raw = (opts.get("hashingscheme") or "JavaStringHash").strip()
    scheme = HASHING_SCHEMES.get(raw.lower())
    if scheme is None:
        hint = (" (the C++ client's BoostHash depends on its standard library and cannot be reproduced)"
                if raw.lower() == "boosthash" else "")
        raise OptionError(f"option 'hashingScheme' must be JavaStringHash (the default) or Murmur3_32Hash, "
                          f"got {raw!r}{hint}")
    return scheme


# -- pieces ------------------------------------------------------------------------------
def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): v for k, v in options.items()}


def _reject_misspellings(opts: Mapping[str, str], known: tuple[str, ...]) -> None:
    lowered = {k.lower(): k for k in known}
    for key in opts:
        if key in lowered:
            continue
        close = difflib.get_close_matches(key, list(lowered), n=1, cutoff=0.85)
        if close:
            raise OptionError(f"unknown option {key!r}; did you mean {lowered[close[0]]!r}?")


def _service_url(opts: Mapping[str, str]) -> str:
    url = (opts.get("service_url") or opts.get("serviceurl") or "").strip()
    if not url:
        raise OptionError("option 'service_url' is required, e.g. pulsar://localhost:6650")
    if not url.startswith("pulsar://"):
        raise OptionError(f"option 'service_url' must be a pulsar://host:port URL, got {url!r}")
    return url


def _selection(opts: Mapping[str, str]) -> TopicSelection:
    given = [name for name in ("topic", "topics", "topicspattern") if opts.get(name)]
    if len(given) != 1:
        what = "none" if not given else ", ".join(given)
        raise OptionError(f"exactly one of 'topic', 'topics' or 'topicsPattern' is required (given: {what})")
    if given[0] == "topicspattern":
        return _pattern(opts["topicspattern"])
    raw = opts[given[0]]
    names = [t.strip() for t in raw.split(",")] if given[0] == "topics" else [raw.strip()]
    if any(not n for n in names):
        raise OptionError(f"option {given[0]!r} has an empty topic name: {raw!r}")
    full = tuple(dict.fromkeys(_full_name(given[0], n) for n in names))  # ordered, no repeats
    return TopicSelection(topics=full)


def _pattern(raw: str) -> TopicSelection:
    """``persistent://tenant/ns/regex``, ``tenant/ns/regex`` or ``regex``
    (public/default). The regex must match the whole topic name."""
    text = raw.strip()
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme != "persistent":
            raise OptionError(f"option 'topicsPattern': only persistent topics can be read, got {raw!r}")
    else:
        rest = text if text.count("/") >= 2 else f"public/default/{text}"
    tenant, _, tail = rest.partition("/")
    ns, _, regex = tail.partition("/")
    if not tenant or not ns or not regex:
        raise OptionError(f"option 'topicsPattern' {raw!r} is not [persistent://]tenant/namespace/regex")
    full = f"persistent://{tenant}/{ns}/{regex}"
    try:
        re.compile(full)
    except re.error as exc:
        raise OptionError(f"option 'topicsPattern' {raw!r} is not a valid regular expression: {exc}") from None
    return TopicSelection(pattern=full, namespace=f"{tenant}/{ns}")


def _full_name(option: str, name: str) -> str:
    try:
        return full_topic_name(name)
    except Exception as exc:
        raise OptionError(f"option {option!r}: {exc}") from None


def _positive_int(opts: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise OptionError(f"option {name!r} must be a positive integer, got {raw!r}")
    return value


def _positive_float(opts: Mapping[str, str], name: str, default: float) -> float:
    raw = opts.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be a positive number, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option {name!r} must be a positive number, got {raw!r}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return default
    word = str(raw).strip().lower()
    if word in ("true", "1", "yes"):
        return True
    if word in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name!r} must be true or false, got {raw!r}")
