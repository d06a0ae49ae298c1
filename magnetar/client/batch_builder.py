"""Turning application messages into entries: metadata, batch payload, compression.

An *entry* is what one SEND carries: a MessageMetadata and a payload. A lone
message is an entry of its own (no ``num_messages_in_batch``: its presence
alone makes consumers parse the payload as a batch). A batch packs N messages
as ``[u32 size][SingleMessageMetadata][payload]`` runs behind one outer
metadata with ``num_messages_in_batch=N``, the first message's sequence id
and ``highest_sequence_id`` of the last; compression covers the whole run.

The builder keeps the application's payload objects as they are and joins
everything once, when the batch is sealed.

An idempotent producer passes ``pid_fields`` = (pid, generation, first
sequence) when it seals an entry; they go into the outer metadata
(``magnetar_pid`` / ``magnetar_generation`` / ``magnetar_sequence``).
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any, Mapping

from magnetar.protocol import compression, pb

_U32 = struct.Struct(">I")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _properties(target, properties: Mapping[str, str] | None) -> None:
    if properties:
        target.extend(pb.KeyValue(key=str(k), value=str(v)) for k, v in properties.items())


def _ordering_key(key: bytes | str | None) -> bytes | None:
    return key.encode() if isinstance(key, str) else key


def _stamp(meta: pb.MessageMetadata, pid_fields: tuple[int, int, int] | None) -> None:
    if pid_fields is not None:
        meta.magnetar_pid, meta.magnetar_generation, meta.magnetar_sequence = pid_fields


@dataclass(slots=True)
class SealedEntry:
    """A sealed entry, ready for a SEND.

    ``completions`` holds one opaque item per message (the producer's
    futures), in batch-index order.
    """

    metadata: bytes
    payload: bytes
    sequence_id: int
    highest_sequence_id: int
    num_messages: int
    is_batch: bool
    completions: list[Any]


def single_entry(
    producer_name: str, sequence_id: int, content: bytes, *, properties: Mapping[str, str] | None = None,
    partition_key: str | None = None, ordering_key: bytes | str | None = None,
    event_timestamp: int | None = None, compression_type: int = compression.NONE,
    completion: Any = None, publish_time: int | None = None,
    pid_fields: tuple[int, int, int] | None = None,
) -> SealedEntry:
    """An entry holding one non-batched message."""
    meta = pb.MessageMetadata(
        producer_name=producer_name, sequence_id=sequence_id,
        publish_time=now_ms() if publish_time is None else publish_time,
    )
    _stamp(meta, pid_fields)
    _properties(meta.properties, properties)
    if partition_key is not None:
        meta.partition_key = partition_key
    if ordering_key is not None:
        meta.ordering_key = _ordering_key(ordering_key)
    if event_timestamp:
        meta.event_time = event_timestamp
    payload = bytes(content)
    if compression_type != compression.NONE:
        meta.compression = compression_type
        meta.uncompressed_size = len(payload)
        payload = compression.compress(compression_type, payload)
    return SealedEntry(meta.SerializeToString(), payload, sequence_id, sequence_id, 1, False, [completion])


class BatchBuilder:
    """Collects messages for one batch entry.

    ``add`` appends a message; ``is_full`` says the batch reached
    ``max_messages`` or ``max_bytes`` (it is never refused: the message that
    crosses the byte limit is the batch's last); ``seal`` returns the entry
    and empties the builder. Sealing an empty builder is an error.
    """

    def __init__(self, max_messages: int = 1000, max_bytes: int = 128 * 1024) -> None:
        if max_messages < 1:
            raise ValueError("max_messages must be >= 1")
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._parts: list[bytes] = []
        self._completions: list[Any] = []
        self._size = 0
        self._first_sequence_id = -1
        self._highest_sequence_id = -1

    def __len__(self) -> int:
        return len(self._completions)

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def is_full(self) -> bool:
        return len(self._completions) >= self.max_messages or self._size >= self.max_bytes

    def add(
        self, sequence_id: int, content: bytes, *, properties: Mapping[str, str] | None = None,
        partition_key: str | None = None, ordering_key: bytes | str | None = None,
        event_timestamp: int | None = None, completion: Any = None,
    ) -> None:
        meta = pb.SingleMessageMetadata(payload_size=len(content), sequence_id=sequence_id)
        _properties(meta.properties, properties)
        if partition_key is not None:
            meta.partition_key = partition_key
        if ordering_key is not None:
            meta.ordering_key = _ordering_key(ordering_key)
        if event_timestamp:
            meta.event_time = event_timestamp
        header = meta.SerializeToString()
        self._parts.append(_U32.pack(len(header)) + header)
        self._parts.append(content)
        self._size += 4 + len(header) + len(content)
        if not self._completions:
            self._first_sequence_id = sequence_id
        self._highest_sequence_id = max(self._highest_sequence_id, sequence_id)
        self._completions.append(completion)

    def seal(self, producer_name: str, compression_type: int = compression.NONE,
             publish_time: int | None = None, pid_fields: tuple[int, int, int] | None = None) -> SealedEntry:
        n = len(self._completions)
        if n == 0:
            raise ValueError("cannot seal an empty batch")
        payload = b"".join(self._parts)
        meta = pb.MessageMetadata(
            producer_name=producer_name, sequence_id=self._first_sequence_id,
            publish_time=now_ms() if publish_time is None else publish_time,
            num_messages_in_batch=n, highest_sequence_id=self._highest_sequence_id,
        )
        _stamp(meta, pid_fields)
        if compression_type != compression.NONE:
            meta.compression = compression_type
            meta.uncompressed_size = len(payload)
            payload = compression.compress(compression_type, payload)
        entry = SealedEntry(meta.SerializeToString(), payload, self._first_sequence_id,
                      self._highest_sequence_id, n, True, self._completions)
        self._parts = []
        self._completions = []
        self._size = 0
        self._first_sequence_id = self._highest_sequence_id = -1
        return entry
