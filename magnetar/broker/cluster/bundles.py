"""Namespace bundles: ranges of a 32-bit hash of the topic name.

A namespace is cut into ``n`` equal ranges (4 by default, as Pulsar's
``defaultNumberOfNamespaceBundles``); a topic belongs to the bundle whose
range holds the hash of its full name, so the partitions of one partitioned
topic spread over bundles. Ownership is per bundle. A bundle is named as in
Pulsar's admin API: ``0x00000000_0x40000000`` (lower bound inclusive, upper
exclusive, except that the last bundle includes ``0xffffffff``).

The hash is CRC-32C of the UTF-8 topic name: stable across processes and
versions (Python's ``hash`` is not), and already a dependency. Pulsar uses
Murmur3; the value only has to agree between Magnetar's own brokers.

A bundle can be split in two (:func:`split_point`, :meth:`Bundle.split`):
by the middle of its range (Pulsar's ``range_equally_divide``) or so that
its topics fall half on each side (``topic_count_equally_divide``). Which
bundles a namespace has then is its layout (:mod:`.layout`).

Pure functions: no I/O, no failure modes beyond ValueError on a bundle count
outside 1..1024, a malformed bundle name, or a bundle that cannot be split.
"""
from __future__ import annotations

from dataclasses import dataclass

import crc32c

FULL = 1 << 32
DEFAULT_BUNDLES = 4
MAX_BUNDLES = 1024


@dataclass(frozen=True, order=True)
class Bundle:
    """One hash range of a namespace."""

    namespace: str
    lower: int
    upper: int

    @property
    def range(self) -> str:
        """Pulsar's name of the range: ``0x00000000_0x40000000``."""
        return f"0x{self.lower:08x}_0x{min(self.upper, FULL - 1):08x}"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.range}"

    def holds(self, hash_value: int) -> bool:
        return self.lower <= hash_value < self.upper

    def split(self, at: int) -> tuple["Bundle", "Bundle"]:
        """The two halves ``[lower, at)`` and ``[at, upper)``; ValueError unless
        ``at`` lies strictly inside the range."""
        if not self.lower < at < self.upper:
            raise ValueError(f"cannot split bundle {self.range} at 0x{at:08x}: outside the range")
        return Bundle(self.namespace, self.lower, at), Bundle(self.namespace, at, self.upper)


def topic_hash(topic: str) -> int:
    """The 32-bit hash that places ``topic`` (its full name) in a bundle."""
    return crc32c.crc32c(topic.encode("utf-8"))


def split_namespace(namespace: str, count: int = DEFAULT_BUNDLES) -> list[Bundle]:
    """``namespace`` cut into ``count`` equal ranges covering the whole hash space."""
    if not isinstance(count, int) or not 1 <= count <= MAX_BUNDLES:
        raise ValueError(f"a namespace has 1..{MAX_BUNDLES} bundles, not {count!r}")
    bounds = [FULL * i // count for i in range(count)] + [FULL]
    return [Bundle(namespace, bounds[i], bounds[i + 1]) for i in range(count)]


#: Pulsar's names of the split algorithms Magnetar implements.
RANGE_EQUALLY_DIVIDE = "range_equally_divide"
TOPIC_COUNT_EQUALLY_DIVIDE = "topic_count_equally_divide"
SPLIT_ALGORITHMS = (RANGE_EQUALLY_DIVIDE, TOPIC_COUNT_EQUALLY_DIVIDE)


def split_point(bundle: Bundle, algorithm: str = RANGE_EQUALLY_DIVIDE, topics: list[str] = ()) -> int:
    """Where to cut ``bundle``: the middle of its range, or (by topic count) the
    median hash of ``topics`` that fall in it, so each half gets about as many.

    ValueError for an unknown algorithm, a bundle one hash wide, or fewer than
    two distinct topic hashes in the bundle for ``topic_count_equally_divide``.
    """
    if bundle.upper - bundle.lower < 2:
        raise ValueError(f"bundle {bundle.range} is one hash wide: it cannot be split")
    if algorithm == RANGE_EQUALLY_DIVIDE:
        return (bundle.lower + bundle.upper) // 2
    if algorithm == TOPIC_COUNT_EQUALLY_DIVIDE:
        hashes = sorted({h for h in map(topic_hash, topics) if bundle.holds(h)})
        if len(hashes) < 2:
            raise ValueError(f"bundle {bundle.range} holds {len(hashes)} topic(s): "
                             f"{TOPIC_COUNT_EQUALLY_DIVIDE} needs two to put one on each side")
        return hashes[len(hashes) // 2]  # > hashes[0] >= lower: the lower half keeps at least one
    raise ValueError(f"unknown split algorithm {algorithm!r}: use one of {', '.join(SPLIT_ALGORITHMS)}")


def bundle_of(topic: str, namespace: str, count: int = DEFAULT_BUNDLES) -> Bundle:
    """The bundle of ``namespace`` (cut into ``count``) that holds ``topic``."""
    h = topic_hash(topic)
    for bundle in split_namespace(namespace, count):
        if bundle.holds(h):
            return bundle
    raise AssertionError("the bundles cover the whole hash space")  # unreachable


def parse_range(namespace: str, text: str) -> Bundle:
    """The bundle ``0xLLLLLLLL_0xUUUUUUUU`` of ``namespace``; ValueError if malformed."""
    try:
        lo_text, hi_text = text.split("_")
        lower, upper = int(lo_text, 16), int(hi_text, 16)
    except ValueError:
        raise ValueError(f"bad bundle range {text!r}: expected 0xLLLLLLLL_0xUUUUUUUU") from None
    if not 0 <= lower < upper <= FULL - 1:
        raise ValueError(f"bad bundle range {text!r}: bounds out of order or out of 32 bits")
    return Bundle(namespace, lower, FULL if upper == FULL - 1 else upper)
