"""SEND frames of batched entries, encoded without per-message Python work.

:class:`BatchEncoder` turns (first sequence id, message count) into the
bytes of one SEND frame carrying one batched entry, in the format the
official client uses with batching on and compression NONE:

- SEND command: ``producer_id``, ``sequence_id`` (first message),
  ``highest_sequence_id`` (last message), ``num_messages``;
- MessageMetadata: ``producer_name``, ``sequence_id``, ``publish_time``,
  ``num_messages_in_batch``, ``highest_sequence_id``;
- payload: per message ``[u32 size][SingleMessageMetadata][body]``, the
  single metadata holding ``payload_size`` and the message's own
  ``sequence_id`` (what pulsar-client 3.x / C++ 4.x writes);
- CRC32C over metadata size, metadata and payload.

(The C++ client leaves ``highest_sequence_id`` unset; Java sets it. It is
set here so the broker sees each entry's sequence range.)

How the per-message cost is avoided: for each varint length L of the
sequence ids, a template holds ``max_messages`` complete records whose only
variable bytes are the L sequence-id bytes (and, for end-to-end runs, the
8-byte stamp in front of each body). A frame overwrites those bytes with
strided slice assignments: one C-level call per byte column, whatever the
message count. The column of low 7-bit groups is a slice of a precomputed
cycle; higher groups take few distinct values over one batch, so they are a
precomputed "carry" column mapped through a 256-byte ``bytes.translate``
table built from those few values. Then the CRC runs over the template in
place and one ``join`` copies header and records into the frame.

Failure modes: a batch whose sequence ids straddle a varint length change
(e.g. 16,383 -> 16,384), or a ``max_messages`` above
:data:`FAST_MAX_MESSAGES`, is encoded message by message with
:func:`magnetar.protocol.batch.encode_batch` instead: same bytes, slower.
``frame`` raises ValueError for a count outside 1..``max_messages``.
"""
from __future__ import annotations

import struct

from magnetar.protocol import pb
from magnetar.protocol.batch import SingleMessage, encode_batch
from magnetar.protocol.checksum import crc32c
from magnetar.protocol.commands import Type
from magnetar.protocol.frames import MAGIC_CRC32C

from .payload import STAMP, STAMP_SIZE, filler

#: The carry column holds ``(phase + i) >> 7`` in one byte: 255 at most.
FAST_MAX_MESSAGES = 255 * 128 - 127

_U32 = struct.Struct(">I")
_HEAD = struct.Struct(">II")
_CRC_HEADER = struct.Struct(">HI")
_SINGLE_PAYLOAD_SIZE_TAG = 0x18  # SingleMessageMetadata.payload_size, field 3, varint
_SINGLE_SEQUENCE_ID_TAG = 0x40  # SingleMessageMetadata.sequence_id, field 8, varint


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_len(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def messages_per_batch(size: int, max_messages: int, max_bytes: int, max_pending: int | None = None) -> int:
    """Messages in a full batch, as the official client fills one.

    Like the C++ client, the byte limit counts message bodies only and a
    batch always takes at least one message. A producer never has more than
    ``max_pending`` messages outstanding, so no batch is larger either.
    """
    n = max_messages
    if max_bytes > 0:
        n = min(n, max(1, max_bytes // size))
    if max_pending:
        n = min(n, max_pending)
    return max(1, n)


class BatchEncoder:
    """SEND frames of one producer's batched entries; see the module docstring.

    ``stamp=True`` writes a send time into the first 8 bytes of every body
    (:mod:`.payload`'s format), all bodies of a frame getting the same one;
    otherwise bodies are :func:`.payload.filler`. Not thread-safe: a frame
    is built in the encoder's own buffers.
    """

    def __init__(self, producer_id: int, producer_name: str, size: int, max_messages: int,
                 stamp: bool = False) -> None:
        if size < 1 or max_messages < 1:
            raise ValueError("size and max_messages must be >= 1")
        self.producer_id = producer_id
        self.producer_name = producer_name
        self.size = size
        self.max_messages = max_messages
        self.stamp = stamp and size >= STAMP_SIZE
        self.body = filler(size)
        self._size_varint = varint(size)
        self._seq_off = 4 + 1 + len(self._size_varint) + 1  # in a record: u32, tag, size, tag
        self._templates: dict[int, bytearray] = {}
        self._fast = max_messages <= FAST_MAX_MESSAGES
        span = max_messages + 128
        self._low = bytes(i & 0x7F for i in range(span))
        self._low_cont = bytes((i & 0x7F) | 0x80 for i in range(span))
        self._carry = bytes(i >> 7 for i in range(span)) if self._fast else b""
        self._meta = pb.MessageMetadata(producer_name=producer_name)
        self._cmd = pb.BaseCommand(type=Type.SEND)
        self._cmd.send.producer_id = producer_id

    def record_len(self, sequence_len: int) -> int:
        """Bytes of one message record whose sequence id is ``sequence_len`` varint bytes."""
        return self._seq_off + sequence_len + self.size

    def _template(self, sequence_len: int) -> bytearray:
        buf = self._templates.get(sequence_len)
        if buf is None:
            meta_len = 1 + len(self._size_varint) + 1 + sequence_len
            record = (_U32.pack(meta_len) + bytes((_SINGLE_PAYLOAD_SIZE_TAG,)) + self._size_varint
                      + bytes((_SINGLE_SEQUENCE_ID_TAG,)) + bytes(sequence_len) + self.body)
            buf = self._templates[sequence_len] = bytearray(record * self.max_messages)
        return buf

    def payload(self, first_sequence_id: int, count: int, stamp_us: int | None = None) -> memoryview | bytes:
        """The batch payload for ``count`` messages from ``first_sequence_id``.

        A view of the encoder's buffer (valid until the next call) on the fast
        path, fresh bytes on the slow one.
        """
        last = first_sequence_id + count - 1
        length = varint_len(first_sequence_id)
        if not self._fast or varint_len(last) != length:
            return self._slow_payload(first_sequence_id, count, stamp_us)
        buf = self._template(length)
        rec = self.record_len(length)
        end = count * rec
        off = self._seq_off
        phase = first_sequence_id & 0x7F
        buf[off:end:rec] = (self._low_cont if length > 1 else self._low)[phase:phase + count]
        if length > 1:
            high = first_sequence_id >> 7
            carries = self._carry[phase:phase + count]
            top = (phase + count - 1) >> 7
            for j in range(1, length):
                cont = 0x80 if j < length - 1 else 0
                shift = 7 * (j - 1)
                table = bytes((((high + k) >> shift) & 0x7F) | cont for k in range(top + 1))
                buf[off + j:end:rec] = carries.translate(table.ljust(256, b"\0"))
        if self.stamp and stamp_us is not None:
            body = off + length
            for i, byte in enumerate(STAMP.pack(stamp_us)):
                buf[body + i:end:rec] = bytes((byte,)) * count
        return memoryview(buf)[:end]

    def _slow_payload(self, first_sequence_id: int, count: int, stamp_us: int | None) -> bytes:
        body = self.body
        if self.stamp and stamp_us is not None:
            body = STAMP.pack(stamp_us) + body[STAMP_SIZE:]
        return encode_batch([SingleMessage(pb.SingleMessageMetadata(sequence_id=first_sequence_id + i), body)
                             for i in range(count)])

    def frame(self, first_sequence_id: int, count: int, publish_time_ms: int, stamp_us: int | None = None) -> bytes:
        """One whole SEND frame (bytes ready to write) carrying ``count`` messages."""
        if not 1 <= count <= self.max_messages:
            raise ValueError(f"a batch holds 1..{self.max_messages} messages, not {count}")
        last = first_sequence_id + count - 1
        payload = self.payload(first_sequence_id, count, stamp_us)
        meta = self._meta
        meta.sequence_id = first_sequence_id
        meta.publish_time = publish_time_ms
        meta.num_messages_in_batch = count
        meta.highest_sequence_id = last
        meta_bytes = meta.SerializeToString()
        send = self._cmd.send
        send.sequence_id = first_sequence_id
        send.highest_sequence_id = last
        send.num_messages = count
        cmd = self._cmd.SerializeToString()
        covered_head = _U32.pack(len(meta_bytes)) + meta_bytes
        crc = crc32c(payload, crc32c(covered_head))
        total = 4 + len(cmd) + 6 + len(covered_head) + len(payload)
        head = _HEAD.pack(total, len(cmd)) + cmd + _CRC_HEADER.pack(MAGIC_CRC32C, crc) + covered_head
        return b"".join((head, payload))
