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

Pure functions: no I/O, no failure modes beyond ValueError on a bundle count
outside 1..1024 or a malformed bundle name.
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


def topic_hash(topic: str) -> int:
    """The 32-bit hash that places ``topic`` (its full name) in a bundle."""
    return crc32c.crc32c(topic.encode("utf-8"))


def split_namespace(namespace: str, count: int = DEFAULT_BUNDLES) -> list[Bundle]:
    """``namespace`` cut into ``count`` equal ranges covering the whole hash space."""
    if not isinstance(count, int) or not 1 <= count <= MAX_BUNDLES:
        raise ValueError(f"a namespace has 1..{MAX_BUNDLES} bundles, not {count!r}")
    bounds = [FULL * i // count for i in range(count)] + [FULL]
    return [Bundle(namespace, bounds[i], bounds[i + 1]) for i in range(count)]


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
