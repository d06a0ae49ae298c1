"""Protocol-buffer varints by hand, for the few hot messages built or read per entry.

protobuf's generated classes cost a few microseconds to build, fill and
serialise a small message; a broker answering one SEND_RECEIPT per entry
pays that on every entry. These helpers write and read the varint encoding
directly (little-endian base-128, 7 bits per byte, high bit = more).

Contract: :func:`encode` takes an int in ``0 .. 2**64 - 1`` (callers pass
negative int32/int64 values as their two's-complement uint64, as protobuf
does); :func:`decode` returns ``(value, next position)`` or raises
``IndexError`` when the buffer ends inside the varint and ``ValueError`` on a
varint longer than 10 bytes or above 2**64 - 1 (protobuf rejects those too).
"""
from __future__ import annotations

UINT64_MAX = (1 << 64) - 1

#: The encodings of 0..16383 (one and two bytes): most ids, counts and
#: entry ids of a ledger are small, and a table look-up beats the loop.
_TABLE: list[bytes] = [bytes([v]) for v in range(128)] + [
    bytes([(v & 0x7F) | 0x80, v >> 7]) for v in range(128, 1 << 14)
]
#: 14 low bits of a larger number: two bytes, both with the "more" bit.
_MORE: list[bytes] = [bytes([(v & 0x7F) | 0x80, (v >> 7) | 0x80]) for v in range(1 << 14)]
_M14 = (1 << 14) - 1


def encode(value: int) -> bytes:
    """The varint bytes of ``value`` (``0 <= value <= 2**64 - 1``).

    Numbers below 2**42 (sequence ids, offsets, millisecond timestamps) are
    put together from 14-bit table entries, without a loop."""
    if value < 16384:
        if value < 0:
            raise ValueError(f"varint of a negative number {value}; pass its two's complement")
        return _TABLE[value]
    if value < 1 << 28:
        return _MORE[value & _M14] + _TABLE[value >> 14]
    if value < 1 << 42:
        return _MORE[value & _M14] + _MORE[(value >> 14) & _M14] + _TABLE[value >> 28]
    if value > UINT64_MAX:
        raise ValueError(f"varint of {value} does not fit 64 bits")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode(buf, pos: int) -> tuple[int, int]:
    """Read one varint of ``buf`` (bytes or memoryview) at ``pos``."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    end = pos + 10
    pos += 1
    while True:
        if pos >= end:
            raise ValueError("varint longer than 10 bytes")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > UINT64_MAX:
                raise ValueError("varint above 2**64 - 1")
            return value, pos
        shift += 7
