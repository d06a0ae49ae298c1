"""Batch payload codec: many messages in one entry.

An uncompressed batch payload is a run of
``[u32 size][SingleMessageMetadata][payload_size bytes]``; the outer
MessageMetadata says ``num_messages_in_batch``. The broker never calls this
on the publish path (batches pass through as bytes); clients and tools do.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from . import magnetar_api_pb2 as pb
from .commands import signed64
from .errors import ProtocolError

_U32 = struct.Struct(">I")


@dataclass(slots=True)
class SingleMessage:
    """One message of a batch: its per-message metadata and payload."""

    metadata: pb.SingleMessageMetadata
    payload: bytes = b""


def encode_batch(messages: list[SingleMessage]) -> bytes:
    """Serialize messages into an (uncompressed) batch payload."""
    parts: list[bytes] = []
    for msg in messages:
        msg.metadata.payload_size = len(msg.payload)
        meta = msg.metadata.SerializeToString()
        parts.append(_U32.pack(len(meta)))
        parts.append(meta)
        parts.append(msg.payload)
    return b"".join(parts)


def decode_batch(data: bytes | memoryview, count: int) -> list[SingleMessage]:
    """Parse ``count`` messages out of an uncompressed batch payload.

    Raises ProtocolError if the bytes do not hold ``count`` well-formed messages.
    """
    view = memoryview(data)
    out: list[SingleMessage] = []
    pos = 0
    for i in range(count):
        if pos + 4 > len(view):
            raise ProtocolError(f"batch truncated before message {i}")
        (meta_size,) = _U32.unpack_from(view, pos)
        pos += 4
        if pos + meta_size > len(view):
            raise ProtocolError(f"batch message {i} metadata overruns the payload")
        meta = pb.SingleMessageMetadata()
        try:
            meta.ParseFromString(bytes(view[pos : pos + meta_size]))
        except Exception as exc:
            raise ProtocolError(f"batch message {i}: bad metadata: {exc}") from None
        pos += meta_size
        size = meta.payload_size
        if size < 0 or pos + size > len(view):
            raise ProtocolError(f"batch message {i} payload overruns the batch")
        out.append(SingleMessage(meta, bytes(view[pos : pos + size])))
        pos += size
    return out


@dataclass(slots=True)
class AckSet:
    """Pulsar's batch-index bitset: bit i set = message i not yet acknowledged.

    Carried as a list of int64 words (little-endian bit order within a word).
    """

    size: int
    words: list[int] = field(default_factory=list)

    @classmethod
    def all_pending(cls, size: int) -> "AckSet":
        words = [0] * ((size + 63) // 64)
        for i in range(size):
            words[i // 64] |= 1 << (i % 64)
        return cls(size, [signed64(w) for w in words])

    def is_pending(self, index: int) -> bool:
        word = index // 64
        return word < len(self.words) and bool((self.words[word] & (1 << (index % 64))))
