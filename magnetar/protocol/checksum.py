"""CRC32C (Castagnoli), the checksum of Pulsar's payload frames, in C.

Uses the ``crc32c`` package, which reads any buffer (bytes, memoryview) in
place with the CPU's CRC instruction: frames are checked without a copy.
"""
from __future__ import annotations

import crc32c as _crc32c


def crc32c(data: bytes | memoryview, initial: int = 0) -> int:
    """CRC32C of ``data``, continuing from ``initial`` (0 starts a new sum)."""
    return _crc32c.crc32c(data, initial)
