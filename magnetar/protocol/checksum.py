"""CRC32C (Castagnoli), the checksum of Pulsar's payload frames, in C."""
from __future__ import annotations

import google_crc32c


def crc32c(data: bytes | memoryview, initial: int = 0) -> int:
    """CRC32C of ``data``, continuing from ``initial`` (0 starts a new sum)."""
    if initial:
        return google_crc32c.extend(initial, bytes(data))
    return google_crc32c.value(bytes(data) if isinstance(data, memoryview) else data)
