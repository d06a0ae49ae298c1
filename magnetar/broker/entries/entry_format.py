"""The bytes of a stored entry.

An entry is what the producer sent, untouched, behind the broker's own
metadata block::

    [0x0e02][bem_size u32][BrokerEntryMetadata]   publish time, offset index, message count
    [0x0e01][crc32c][meta_size][MessageMetadata][payload]   the SEND's block, verbatim

That is exactly the tail of a MESSAGE frame, so dispatch writes a MESSAGE
command followed by the stored bytes with no parse and no copy. For a client
that did not announce ``supports_broker_entry_metadata`` the broker skips the
first block (:func:`strip_broker_entry_metadata`).

``index`` follows Pulsar: the topic offset of the entry's *last* message. The
first message's offset is ``index - num_messages + 1``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from magnetar.protocol import pb
from magnetar.protocol.compiled import hot as _hot
from magnetar.protocol.receipts import broker_entry_metadata_prefix
from magnetar.protocol.frames import MAGIC_BROKER_ENTRY_METADATA

_HEADER = struct.Struct(">HI")


def build_entry_python(block: bytes | memoryview, publish_time_ms: int, first_offset: int,
                       num_messages: int) -> bytes:
    """An entry: the broker's BrokerEntryMetadata (publish time, the index of
    its last message, its message count), then the client's block."""
    # The prefix is encoded by hand (the same bytes protobuf writes, checked
    # by protocol's unit tests): this runs once per stored entry.
    return broker_entry_metadata_prefix(publish_time_ms, first_offset + num_messages - 1, num_messages) + block


#: The compiled twin (``protocol/_hot.c``: the same bytes in one allocation) when built.
build_entry = _hot.build_entry if _hot is not None else build_entry_python


@dataclass(frozen=True, slots=True)
class EntryInfo:
    """What the broker needs to know about a stored entry, read from its first block."""

    publish_time: int
    last_offset: int
    num_messages: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.num_messages + 1


def entry_info(data: bytes | memoryview) -> EntryInfo:
    magic, size = _HEADER.unpack_from(data, 0)
    if magic != MAGIC_BROKER_ENTRY_METADATA:
        raise ValueError("stored entry has no broker entry metadata")
    bem = pb.BrokerEntryMetadata()
    bem.ParseFromString(memoryview(data)[6 : 6 + size])  # upb parses a view without a copy
    return EntryInfo(bem.broker_timestamp, bem.index, bem.magnetar_num_messages or 1)


def strip_broker_entry_metadata(data: bytes | memoryview) -> memoryview:
    """The entry without its broker block (for clients that cannot read it)."""
    _, size = _HEADER.unpack_from(data, 0)
    return memoryview(data)[6 + size :]


def producer_block(data: bytes | memoryview) -> memoryview:
    """The SEND block as the producer sent it."""
    return strip_broker_entry_metadata(data)
