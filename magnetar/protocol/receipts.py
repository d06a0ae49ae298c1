"""SEND_RECEIPT frames built from a per-producer template.

The broker answers every stored entry with a SEND_RECEIPT. Building it with
protobuf (a BaseCommand, a CommandSendReceipt, a MessageIdData, then
serialising) costs a few microseconds; here the frame is concatenated from
pre-encoded pieces: the constant field tags, the producer id's bytes (encoded
once per producer) and the varints of the five numbers that change.

Contract: :meth:`ReceiptTemplate.frame` returns exactly the bytes
``encode_command`` produces for the BaseCommand::

    BaseCommand(type=SEND_RECEIPT, send_receipt=CommandSendReceipt(
        producer_id=P, sequence_id=S, highest_sequence_id=H, offset=O,
        message_id=MessageIdData(ledgerId=L, entryId=E)))

(fields in field-number order, as protobuf writes them; the unit tests
compare byte for byte). Every number must be in ``0 .. 2**64 - 1``
(ValueError otherwise; ledger and entry ids of "unknown" are passed as
2**64 - 1, as on the wire).
"""
from __future__ import annotations

import functools
import struct
from typing import Callable

from .commands import Type
from .compiled import hot as _hot
from .varint import encode as _varint

_U32U32 = struct.Struct(">II")

# BaseCommand: type (field 1, varint) = SEND_RECEIPT; send_receipt is field 7 (length-delimited).
_HEAD = bytes([0x08, Type.SEND_RECEIPT, (7 << 3) | 2])
_SEQUENCE_ID = b"\x10"             # CommandSendReceipt.sequence_id (2, varint)
_MESSAGE_ID = b"\x1a"              # .message_id (3, length-delimited)
_LEDGER_ID = b"\x08"               # MessageIdData.ledgerId (1)
_ENTRY_ID = b"\x10"                # MessageIdData.entryId (2)
_HIGHEST = b"\x20"                 # .highest_sequence_id (4)
_OFFSET = _varint(1000 << 3)       # .offset (1000, varint): b"\xc0\x3e"


class ReceiptTemplate:
    """Receipts of one producer: its id's encoding is kept, the rest is patched in.

    Also kept: the encoding of the last ledger id (a ledger holds many
    entries in a row). Not thread-safe; one per producer on the loop.
    """

    __slots__ = ("producer_id", "_prefix", "_ledger_id", "_ledger_part")

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id
        # CommandSendReceipt.producer_id (1), then the sequence_id tag.
        self._prefix = b"\x08" + _varint(producer_id) + _SEQUENCE_ID
        self._ledger_id = -1
        self._ledger_part = b""

    def frame(self, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int,
              offset: int) -> bytes:
        """The whole SEND_RECEIPT frame (size fields included)."""
        if _hot is not None:  # the compiled twin (_hot.c): same bytes
            return _hot.receipt_frame(self.producer_id, sequence_id, highest_sequence_id, ledger_id, entry_id,
                                      offset)
        return self.frame_python(sequence_id, highest_sequence_id, ledger_id, entry_id, offset)

    def frame_python(self, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int,
                     offset: int) -> bytes:
        """:meth:`frame` in Python."""
        if ledger_id != self._ledger_id:
            self._ledger_part = _LEDGER_ID + _varint(ledger_id) + _ENTRY_ID
            self._ledger_id = ledger_id
        seq = _varint(sequence_id)
        mid = self._ledger_part + _varint(entry_id)
        body = b"".join((self._prefix, seq, _MESSAGE_ID, _SMALL[len(mid)], mid, _HIGHEST,
                         seq if highest_sequence_id == sequence_id else _varint(highest_sequence_id),
                         _OFFSET, _varint(offset)))
        # At most ~70 bytes: the sizes are one byte each (a table look-up).
        size = len(body)
        return b"".join((_U32U32.pack(size + 8, size + 4), _HEAD, _SMALL[size], body))


def receipt_encoder(producer_id: int) -> Callable[[int, int, int, int, int], bytes]:
    """``encode(sequence_id, highest_sequence_id, ledger_id, entry_id, offset)``
    -> the SEND_RECEIPT frame of one producer: the compiled twin with the id
    bound in (no Python frame per receipt) when built, else a template's
    :meth:`ReceiptTemplate.frame`. Same bytes, same ValueError either way."""
    if _hot is not None:
        return functools.partial(_hot.receipt_frame, producer_id)
    return ReceiptTemplate(producer_id).frame


#: One-byte varints (and lengths) of 0..127.
_SMALL = [bytes((v,)) for v in range(128)]


# BrokerEntryMetadata: broker_timestamp (1), index (2), magnetar_num_messages (1000), all varints.
_BEM_HEADER = struct.Struct(">HI")
_TIMESTAMP = b"\x08"
_INDEX = b"\x10"
_NUM_MESSAGES = _varint(1000 << 3)
_MAGIC_BEM = 0x0E02


def broker_entry_metadata_prefix(publish_time_ms: int, index: int, num_messages: int) -> bytes:
    """``[0x0e02][size u32][BrokerEntryMetadata]`` as protobuf would write it.

    The BrokerEntryMetadata has ``broker_timestamp``, ``index`` and
    ``magnetar_num_messages`` set (in that field order; byte for byte
    protobuf's encoding, checked by the unit tests). Numbers must fit their
    fields (uint64, uint32 for the count): ValueError otherwise.
    """
    if num_messages >= 1 << 32:
        raise ValueError(f"{num_messages} messages do not fit uint32")
    bem = b"".join((_TIMESTAMP, _varint(publish_time_ms), _INDEX, _varint(index), _NUM_MESSAGES,
                    _varint(num_messages)))
    return _BEM_HEADER.pack(_MAGIC_BEM, len(bem)) + bem
