"""Chunked messages (PIP-37) reassembled into whole entries for the decoders.

A producer with chunking enabled splits one large message, after
compression, into non-batched entries whose MessageMetadata carries
``uuid``, ``chunk_id`` (0-based), ``num_chunks_from_msg`` (> 1) and
``total_chunk_msg_size``; ``compression`` and ``uncompressed_size`` describe
the whole message. Chunks of other producers may interleave.

Contract of :class:`ChunkAssembler` (a pre-pass: the decoders, compiled and
pure-Python, only ever see whole messages):

- :meth:`ChunkAssembler.add` takes one chunk entry at its offset and returns
  an ordinary :class:`EntryInput` (chunk fields cleared, payload
  decompressed) when that chunk completes its message, else None. The row
  lies at the offset of the message's LAST chunk.
- A chunk out of order (a gap, or a new chunk 0 from the same producer and
  uuid) drops what was collected: the message is incomplete and yields no
  row, as the official consumer discards it.
- Chunks that arrive without their earlier chunks are kept as an *orphan*;
  :meth:`missing_before` says which earlier chunk ids the caller may fetch
  from before the scanned range and hand to :meth:`prepend`.

Only chunk entries pay this module's cost; :func:`is_chunk` is a field test
on the MessageMetadata the reader has already parsed.

Failure modes: ProtocolError from decompression of a corrupt whole message.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.protocol import pb

from .entry_columns import EntryInput, entry_payload

_CHUNK_FIELDS = ("uuid", "chunk_id", "num_chunks_from_msg", "total_chunk_msg_size")


def is_chunk(meta: pb.MessageMetadata) -> bool:
    """True for an entry that is one chunk of a chunked message."""
    return meta.num_chunks_from_msg > 1


def chunk_key(meta: pb.MessageMetadata) -> tuple[str, str]:
    """The message a chunk belongs to: (producer name, uuid)."""
    return meta.producer_name, meta.uuid


@dataclass
class _Partial:
    first_id: int  # the lowest chunk id held (0 unless an orphan)
    parts: list = field(default_factory=list)  # payloads of chunks first_id.. in order

    @property
    def next_id(self) -> int:
        return self.first_id + len(self.parts)


class ChunkAssembler:
    """Collects the chunks of the messages of one scan; see the module doc."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], _Partial] = {}

    def missing_before(self, meta: pb.MessageMetadata) -> int:
        """How many leading chunks (ids ``0..n-1``) the message of ``meta``
        lacks if ``meta`` is added now: 0 when nothing is missing."""
        if meta.chunk_id == 0:
            return 0
        partial = self._open.get(chunk_key(meta))
        if partial is None:
            return meta.chunk_id
        return partial.first_id if partial.next_id == meta.chunk_id else 0

    def prepend(self, key: tuple[str, str], parts: list) -> None:
        """Give the message ``key`` its leading chunks ``0..len(parts)-1``
        (read from before the scanned range); the caller adds the current
        chunk next."""
        partial = self._open.get(key)
        if partial is None:
            self._open[key] = _Partial(0, list(parts))
        elif partial.first_id == len(parts):
            self._open[key] = _Partial(0, list(parts) + partial.parts)

    def add(self, meta: pb.MessageMetadata, payload, offset: int) -> EntryInput | None:
        """Take chunk ``meta``/``payload`` (raw, still compressed) at
        ``offset``; the whole message as an EntryInput when it is complete."""
        key = chunk_key(meta)
        partial = self._open.get(key)
        if meta.chunk_id == 0 or partial is None:
            partial = self._open[key] = _Partial(meta.chunk_id)
        elif partial.next_id != meta.chunk_id:  # a gap or a restart: that message is incomplete
            partial = self._open[key] = _Partial(meta.chunk_id)
        partial.parts.append(bytes(payload))
        if meta.chunk_id != meta.num_chunks_from_msg - 1:
            return None
        del self._open[key]
        if partial.first_id != 0:
            return None  # its first chunks were never found: incomplete
        return whole_message(meta, b"".join(partial.parts), offset)


def whole_message(last: pb.MessageMetadata, payload: bytes, offset: int) -> EntryInput:
    """The message whose last chunk is ``last`` and whose joined (compressed)
    payload is ``payload``, as an ordinary entry at ``offset``."""
    meta = pb.MessageMetadata()
    meta.CopyFrom(last)
    for name in _CHUNK_FIELDS:
        meta.ClearField(name)
    return EntryInput(meta.SerializeToString(), entry_payload(meta, payload), offset)
