"""Option enums, with the official ``pulsar`` package's member names and the
wire values of the protocol, so an int from either side means the same thing."""
from __future__ import annotations

import enum


class CompressionType(enum.IntEnum):
    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class ConsumerType(enum.IntEnum):
    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class InitialPosition(enum.IntEnum):
    Latest = 0
    Earliest = 1


class ProducerAccessMode(enum.IntEnum):
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3
