"""The entry framing every backend stores: ``[u32 length][u32 crc32c(data)][data]``.

Big-endian, one record per entry, entries never empty (a zero-filled tail,
as some filesystems show after a crash, never parses as an entry). The file
backend writes these records into segment files, the object backend into
its objects' sections; a ledger's ``size`` counts ``HEADER_SIZE`` per entry
whatever the backend (:mod:`.backend`). No I/O here.
"""
from __future__ import annotations

import struct
from typing import Any

import crc32c as _crc32c_module

from magnetar.protocol.compiled import hot as _hot

HEADER = struct.Struct(">II")
HEADER_SIZE = HEADER.size
MAX_ENTRY_SIZE = 0xFFFF_FFFF

#: CRC32C of bytes (the checksum in each record's header).
crc = _crc32c_module.crc32c


def frame(data: bytes) -> bytes:
    """The record of one entry."""
    return HEADER.pack(len(data), crc(data)) + data


def frames(datas: list[bytes]) -> bytes:
    """The records of ``datas``, one after the other."""
    if len(datas) == 1:  # a ledger's share of an object commit, at many topics: one entry
        data = datas[0]
        return HEADER.pack(len(data), crc(data)) + data
    parts: list[Any] = [None] * (2 * len(datas))
    parts[::2] = map(HEADER.pack, map(len, datas), map(crc, datas))
    parts[1::2] = datas
    return b"".join(parts)


def parse_frames(buf: bytes, count: int) -> list[bytes]:
    """The first ``count`` entries of ``buf`` (records as :func:`frames`
    writes them), as bytes; raises ValueError on a short or bad record.
    Compiled (``magnetar/protocol/_hot.c``) when built: one call, no Python
    step per entry; :func:`parse_frames_python` is its twin."""
    if _hot is not None:
        return _hot.parse_frames(buf, count)
    return parse_frames_python(buf, count)


def parse_frames_python(buf: bytes, count: int) -> list[bytes]:
    """The pure-Python twin of the compiled ``parse_frames``."""
    out = []
    off = 0
    unpack = HEADER.unpack_from
    for _ in range(count):
        if off + HEADER_SIZE > len(buf):
            raise ValueError(f"short section at offset {off}")
        n, checksum = unpack(buf, off)
        off += HEADER_SIZE
        data = bytes(buf[off:off + n])
        if len(data) != n or crc(data) != checksum:
            raise ValueError(f"bad record at offset {off - HEADER_SIZE}")
        out.append(data)
        off += n
    return out
