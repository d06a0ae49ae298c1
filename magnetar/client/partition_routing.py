"""Which partition a message goes to: Pulsar's routing modes and key hashes.

A message with a key always goes where its key hashes to, so one key stays
in order on one partition; ``hashing_scheme`` picks the hash (Java's
``String.hashCode`` by default, as the Java client; Murmur3 32-bit as an
option; both masked to a non-negative int, then modulo the partition count,
as Pulsar does). A message without a key follows ``message_routing_mode``:
round robin over the partitions (the default), one partition chosen at
random for the producer's life, or ``message_router(message, n)``.

The official C++/Python client's default hash (BoostHash) depends on the C++
library's ``std::hash`` and cannot be reproduced: asked for, it is refused.
"""
from __future__ import annotations

import enum
import random
import struct
from typing import Any, Callable

from .errors import InvalidConfiguration

_INT_MAX = 0x7FFFFFFF


class PartitionsRoutingMode(enum.IntEnum):
    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class HashingScheme(enum.IntEnum):
    Murmur3_32Hash = 0
    BoostHash = 1
    JavaStringHash = 2


def java_string_hash(key: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), masked non-negative."""
    h = 0
    units = key.encode("utf-16-be")
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h & _INT_MAX


def murmur3_32_hash(key: str, seed: int = 0) -> int:
    """Murmur3 x86 32-bit of the key's UTF-8 bytes, masked non-negative."""
    data = key.encode()
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & 0xFFFFFFFF
    tail_at = len(data) - len(data) % 4
    for (k,) in struct.iter_unpack("<I", data[:tail_at]):
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    tail = data[tail_at:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h & _INT_MAX


_HASHES: dict[HashingScheme, Callable[[str], int]] = {
    HashingScheme.JavaStringHash: java_string_hash,
    HashingScheme.Murmur3_32Hash: murmur3_32_hash,
}


def router(partitions: int, mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
           hashing_scheme: HashingScheme = HashingScheme.JavaStringHash,
           message_router: Callable[[Any, int], int] | None = None,
           rng: random.Random | None = None) -> Callable[[Any, str | None], int]:
    """A function ``(message, key) -> partition index`` for ``partitions`` partitions.

    Raises InvalidConfiguration for BoostHash, for CustomPartition without a
    ``message_router``, and (when routing) for a router answer out of range.
    """
    if partitions < 1:
        raise InvalidConfiguration("a partitioned topic has at least one partition")
    mode = PartitionsRoutingMode(mode)
    try:
        key_hash = _HASHES[HashingScheme(hashing_scheme)]
    except KeyError:
        raise InvalidConfiguration("BoostHash is the C++ library's own hash; use JavaStringHash or "
                                   "Murmur3_32Hash") from None
    if mode is PartitionsRoutingMode.CustomPartition and message_router is None:
        raise InvalidConfiguration("CustomPartition routing needs a message_router")
    rng = rng or random.Random()
    single = rng.randrange(partitions)
    next_index = [rng.randrange(partitions)]

    def route(message: Any, key: str | None) -> int:
        if mode is PartitionsRoutingMode.CustomPartition:
            index = message_router(message, partitions)  # type: ignore[misc]
            if not isinstance(index, int) or not 0 <= index < partitions:
                raise InvalidConfiguration(f"message_router chose {index!r}; expected 0..{partitions - 1}")
            return index
        if key:
            return key_hash(key) % partitions
        if mode is PartitionsRoutingMode.UseSinglePartition:
            return single
        index = next_index[0]
        next_index[0] = (index + 1) % partitions
        return index

    return route
