"""SEND frames of unbatched messages, many per call, for the raw generator.

With batching off the official client sends every message as its own entry:
a SEND command (``producer_id``, ``sequence_id``) followed by a checksummed
block of MessageMetadata (``producer_name``, ``sequence_id``,
``publish_time``) and the body, with no batch framing. :class:`PlainEncoder`
writes exactly that, for ``count`` consecutive sequence ids at once, as one
bytes object (one socket write for all of them): the generator must cost
less per entry than the broker it measures, or the run measures the
generator.

What varies per frame is encoded by hand (varints from
:mod:`magnetar.protocol.varint`); the producer name's field and the body are
encoded once. The CRC32C runs in C over the metadata, then continues over
the constant body. ``stamp=True`` writes ``stamp_us`` into the first 8 bytes
of every body of the call (:mod:`.payload`'s format).

Failure modes: ``frames`` raises ValueError for a count below 1 or a
sequence id outside 0..2**64-1.
"""
from __future__ import annotations

import struct

from magnetar.protocol.checksum import crc32c
from magnetar.protocol.commands import Type
from magnetar.protocol.frames import MAGIC_CRC32C
from magnetar.protocol.varint import encode as varint

from .payload import STAMP, STAMP_SIZE, filler

_HEAD = struct.Struct(">II")
_U32 = struct.Struct(">I")
_CRC_HEADER = struct.Struct(">HI")
_SEND_HEAD = bytes([0x08, Type.SEND, (6 << 3) | 2])  # BaseCommand.type = SEND; field 6 = send


class PlainEncoder:
    """Unbatched SEND frames of one producer; see the module docstring."""

    #: One message per entry (the raw driver's window counts entries by this).
    max_messages = 1

    def __init__(self, producer_id: int, producer_name: str, size: int, stamp: bool = False) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.producer_id = producer_id
        self.size = size
        self.stamp = stamp and size >= STAMP_SIZE
        self.body = filler(size)
        name = producer_name.encode()
        self._pid = b"\x08" + varint(producer_id) + b"\x10"        # CommandSend.producer_id, sequence_id tag
        self._name = b"\x0a" + varint(len(name)) + name + b"\x10"  # MessageMetadata.producer_name, sequence_id tag

    def frames(self, first_sequence_id: int, count: int, publish_time_ms: int, stamp_us: int | None = None) -> bytes:
        """``count`` whole SEND frames, sequence ids ``first_sequence_id`` on, as one bytes object."""
        if count < 1:
            raise ValueError(f"count must be >= 1, not {count}")
        body = self.body
        if self.stamp and stamp_us is not None:
            body = STAMP.pack(stamp_us) + body[STAMP_SIZE:]
        time_part = b"\x18" + varint(publish_time_ms)                # MessageMetadata.publish_time
        pid, name, size = self._pid, self._name, len(body)
        out = []
        for seq in range(first_sequence_id, first_sequence_id + count):
            s = varint(seq)
            send = pid + s
            cmd = _SEND_HEAD + bytes((len(send),)) + send
            meta = name + s + time_part
            covered = _U32.pack(len(meta)) + meta
            crc = crc32c(body, crc32c(covered))
            out += (_HEAD.pack(len(cmd) + 10 + len(covered) + size, len(cmd)), cmd,
                    _CRC_HEADER.pack(MAGIC_CRC32C, crc), covered, body)
        return b"".join(out)
