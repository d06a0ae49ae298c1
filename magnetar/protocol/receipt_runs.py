"""SEND_RECEIPTs read in runs, without protobuf, for a client with many
entries in flight.

A producer that does not batch gets one SEND_RECEIPT per message. Decoding
each with protobuf into a Frame, then routing it, costs a client more than
the broker spends storing the entry, so a load generator measuring the
broker would measure itself. A receipt's frame is small and flat, and all a
producer needs from a run of them is *whose* receipts they are and *which*
sequence ids they cover.

Contract: :func:`receipt_runs` reads the frames lying whole in
``data[start:]``, one after the other, while each is a **plain receipt**,
and returns ``(runs, pos)``: ``runs`` a list of ``(producer_id,
first_sequence_id, last_sequence_id, count)`` tuples, one per stretch of
receipts of one producer with consecutive sequence ids (``count`` = last -
first + 1), in stream order; ``pos`` the position after the last frame read.
It stops, without consuming it, at the first frame that is incomplete,
whose size is outside ``4..max_frame_size``, or that is not a plain receipt;
the caller's general decoder takes it from there (and raises what it
raises).

A plain receipt is a frame with no payload whose command is exactly
``BaseCommand{type = SEND_RECEIPT, send_receipt = {producer_id,
sequence_id, [message_id{ledgerId, entryId}], [highest_sequence_id],
[offset]}}`` with one-byte lengths and varints protobuf reads the same way
(at most 10 bytes, at most 2**64 - 1), fields in any order. Anything else
(a SEND_ERROR, a receipt with other fields, an odd encoding) is "not plain":
never an error here, only "ask protobuf". So what is read here is what
protobuf would read; the unit tests check that against protobuf's encoder
and decoder, and the compiled twin (``_hot.receipt_runs``) against this one.
"""
from __future__ import annotations

import struct

from .compiled import hot as _hot

_U32 = struct.Struct(">I")
_SEND_RECEIPT = 7
_UINT64_MAX = (1 << 64) - 1

# CommandSendReceipt's tags (field number << 3 | wire type).
_PRODUCER_ID, _SEQUENCE_ID, _MESSAGE_ID, _HIGHEST = 0x08, 0x10, 0x1A, 0x20
_OFFSET = (0xC0, 0x3E)  # field 1000, varint: two bytes on the wire


def _varint(data, pos: int, end: int) -> tuple[int, int] | None:
    """The varint at ``data[pos]`` (before ``end``) and the position after
    it; None if it is truncated, over 10 bytes or above 2**64 - 1."""
    value = shift = 0
    while pos < end:
        c = data[pos]
        pos += 1
        if shift == 63 and c > 1:
            return None
        value |= (c & 0x7F) << shift
        if c < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            return None
    return None


def _message_id_is_plain(data, pos: int, end: int) -> bool:
    """Whether ``data[pos:end]`` is a MessageIdData of exactly ledgerId and entryId."""
    seen = 0
    while pos < end:
        tag = data[pos]
        if tag not in (0x08, 0x10):
            return False
        got = _varint(data, pos + 1, end)
        if got is None:
            return False
        seen |= 1 if tag == 0x08 else 2
        pos = got[1]
    return seen == 3


def plain_receipt(data, start: int, end: int) -> tuple[int, int] | None:
    """``(producer_id, sequence_id)`` of the frame ``data[start:end]`` (its
    size fields included) if it is a plain receipt, else None."""
    if end - start < 12 or _U32.unpack_from(data, start + 4)[0] + start + 8 != end:
        return None  # a payload after the command, or sizes that disagree
    p = start + 8
    if data[p] != 0x08 or data[p + 1] != _SEND_RECEIPT or data[p + 2] != (7 << 3) | 2:
        return None
    size = data[p + 3]
    if size >= 0x80 or p + 4 + size != end:
        return None
    pos = p + 4
    pid = seq = None
    while pos < end:
        tag = data[pos]
        if tag == _MESSAGE_ID:
            if pos + 1 >= end:
                return None
            n = data[pos + 1]
            if n >= 0x80 or pos + 2 + n > end or not _message_id_is_plain(data, pos + 2, pos + 2 + n):
                return None
            pos += 2 + n
            continue
        if tag == _OFFSET[0]:
            if pos + 1 >= end or data[pos + 1] != _OFFSET[1]:
                return None
            pos += 1
        elif tag != _PRODUCER_ID and tag != _SEQUENCE_ID and tag != _HIGHEST:
            return None
        got = _varint(data, pos + 1, end)
        if got is None:
            return None
        value, pos = got
        if tag == _PRODUCER_ID:
            pid = value
        elif tag == _SEQUENCE_ID:
            seq = value
    if pid is None or seq is None:
        return None
    return pid, seq


def receipt_runs_python(data, start: int, max_frame_size: int) -> tuple[list[tuple[int, int, int, int]], int]:
    """:func:`receipt_runs` in Python."""
    runs: list[tuple[int, int, int, int]] = []
    pos, size = start, len(data)
    while 0 <= pos and size - pos >= 4:
        (total,) = _U32.unpack_from(data, pos)
        end = pos + 4 + total
        if not 4 <= total <= max_frame_size or end > size:
            break
        got = plain_receipt(data, pos, end)
        if got is None:
            break
        pid, seq = got
        if runs and runs[-1][0] == pid and runs[-1][2] + 1 == seq:
            _, first, _, count = runs[-1]
            runs[-1] = (pid, first, seq, count + 1)
        else:
            runs.append((pid, seq, seq, 1))
        pos = end
    return runs, pos


#: ``receipt_runs(data, start, max_frame_size) -> (runs, pos)``: see the module docstring.
receipt_runs = receipt_runs_python if _hot is None else _hot.receipt_runs
