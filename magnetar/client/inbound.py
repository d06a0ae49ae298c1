"""Decoding a MESSAGE frame into :class:`Message` values.

A frame holds one stored entry: optional broker entry metadata, the
producer's metadata, then a payload that may be compressed and may be a
batch. Members the broker masked out with ``ack_set`` (a bit set = deliver)
are left out.

The offset of a message is derived from the broker entry metadata's
``index``, which (Pulsar's meaning) is the offset of the entry's *last*
message: ``index - num_messages + 1 + batch_index``.
"""
from __future__ import annotations

from magnetar.protocol import ProtocolError, pb
from magnetar.protocol.batch import decode_batch
from magnetar.protocol.compression import decompress
from magnetar.protocol.frames import PayloadBlock

from .errors import ChecksumError, InvalidMessage
from .message import Message
from .message_id import MessageId


def _masked_out(ack_set: list[int], index: int) -> bool:
    word = index // 64
    if word >= len(ack_set):
        return True
    return not (ack_set[word] >> (index % 64)) & 1


def decode_entry(topic: str, cmd: pb.CommandMessage, block: PayloadBlock | None,
                 partition: int = -1) -> tuple[list[Message], int]:
    """The deliverable messages of one MESSAGE frame, and how many messages
    the entry holds in all (the flow permits it used).

    Raises ChecksumError when the checksum does not match, InvalidMessage
    when the entry cannot be decoded. Either way the entry still used flow
    permits: ``exc.num_messages`` says how many (1 when unknown).
    """
    count = 1
    try:
        if block is None:
            raise ProtocolError("MESSAGE without a payload")
        if not block.verify_checksum():
            meta = block.metadata
            bad = ChecksumError(f"checksum mismatch on {cmd.message_id.ledgerId}:{cmd.message_id.entryId}")
            bad.num_messages = meta.num_messages_in_batch
            raise bad
        meta = block.metadata
        bem = block.broker_entry_metadata
        payload = block.payload
        if meta.compression != pb.NONE:
            payload = decompress(meta.compression, payload, meta.uncompressed_size)
        is_batch = meta.HasField("num_messages_in_batch")
        count = meta.num_messages_in_batch if is_batch else 1
        last_index = bem.index if bem is not None and bem.HasField("index") else None
        first_offset = None if last_index is None else last_index - count + 1
        ledger = cmd.message_id.ledgerId
        entry = cmd.message_id.entryId
        redeliveries = cmd.redelivery_count
        if not is_batch:
            mid = MessageId(ledger, entry, -1, partition, offset=first_offset)
            return [Message(topic, mid, meta, None, bytes(payload), redeliveries, first_offset)], 1
        ack_set = list(cmd.ack_set)
        out: list[Message] = []
        for i, single in enumerate(decode_batch(payload, count)):
            if ack_set and _masked_out(ack_set, i):
                continue
            offset = None if first_offset is None else first_offset + i
            mid = MessageId(ledger, entry, i, partition, count, offset)
            out.append(Message(topic, mid, meta, single.metadata, single.payload, redeliveries, offset))
        return out, count
    except ProtocolError as exc:
        bad = InvalidMessage(str(exc))
        bad.num_messages = count
        raise bad from None
