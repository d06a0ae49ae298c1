"""Reading the producer's MessageMetadata out of a stored entry, only when needed.

The hot path never parses what producers send (see ARCHITECTURE.md). A few
features need one field of it: Key_Shared dispatch needs the message key,
delayed delivery needs ``deliver_at_time``, compaction needs keys and
null-value flags. They call here, and only for the subscriptions or jobs
that need it.

Failure mode: an entry whose metadata cannot be parsed (it was checksummed
by the producer, so this means a client bug) is treated as having no key and
no delivery time; it is dispatched like any other entry rather than stuck.
"""
from __future__ import annotations

import base64
import binascii

from magnetar.protocol import ProtocolError, pb
from magnetar.protocol.frames import PayloadBlock

#: Pulsar's sticky key for messages that carry neither an ordering key nor a partition key.
NONE_KEY = b"NONE_KEY"
#: The varint tag of MessageMetadata.deliver_at_time (field 19, varint): 0x98 0x01.
#: If these two bytes do not occur in the metadata the field cannot be present,
#: which spares a protobuf parse for almost every entry of a Shared subscription.
_DELIVER_AT_TAG = b"\x98\x01"


def metadata_bytes(data: bytes | memoryview) -> memoryview:
    """The serialized MessageMetadata of a stored entry (raises ProtocolError if malformed)."""
    return PayloadBlock(memoryview(data)).metadata_bytes


def producer_metadata(data: bytes | memoryview) -> pb.MessageMetadata | None:
    """The producer's MessageMetadata of a stored entry, or None if it cannot be parsed."""
    try:
        raw = metadata_bytes(data)
        meta = pb.MessageMetadata()
        meta.ParseFromString(bytes(raw))
        return meta
    except (ProtocolError, Exception):  # protobuf's DecodeError is not ours to import
        return None


def deliver_at(data: bytes | memoryview) -> int | None:
    """The entry's ``deliver_at_time`` (ms since the epoch), or None if it has none."""
    try:
        raw = bytes(metadata_bytes(data))  # `in` on a memoryview tests items, not substrings
    except ProtocolError:
        return None
    if _DELIVER_AT_TAG not in raw:
        return None
    meta = pb.MessageMetadata()
    try:
        meta.ParseFromString(raw)
    except Exception:  # unparseable: deliver now rather than never
        return None
    return meta.deliver_at_time if meta.HasField("deliver_at_time") else None


def sticky_key_of(meta: pb.MessageMetadata | pb.SingleMessageMetadata | None) -> bytes:
    """The key Key_Shared routes by: the ordering key, else the partition key, else NONE_KEY.

    A partition key flagged ``partition_key_b64_encoded`` is routed by its
    decoded bytes, as Pulsar does.
    """
    if meta is None:
        return NONE_KEY
    if meta.HasField("ordering_key"):
        return meta.ordering_key
    if meta.HasField("partition_key"):
        if meta.partition_key_b64_encoded:
            try:
                return base64.b64decode(meta.partition_key)
            except (binascii.Error, ValueError):
                pass
        return meta.partition_key.encode()
    return NONE_KEY


def sticky_key(data: bytes | memoryview) -> bytes:
    """The sticky key of a stored entry (a batch's key is its outer metadata's:
    with key-based batching every message of the batch shares it)."""
    return sticky_key_of(producer_metadata(data))
