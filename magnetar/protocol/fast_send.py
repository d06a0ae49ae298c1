"""A SEND command read without protobuf, for the broker's per-entry path.

A broker receives one SEND per entry; unbatched producers make every message
an entry. Parsing the BaseCommand with protobuf, checking its required
fields and reading five attributes through the generated wrappers costs more
than everything else done with the command. The BaseCommand of a SEND is
small and flat (``type`` = SEND, then ``send`` = CommandSend with varint
fields only), so this module reads exactly that shape by hand.

Contract: :func:`parse_send` returns a :class:`SendCommandView` whose
attributes hold what protobuf would decode (same values, same defaults,
``HasField`` for the optional fields), or **None** whenever the bytes are
anything else: another command, a field it does not read (``message_id``,
unknown fields), a wire type or varint protobuf might judge differently, a
missing required field, a truncated buffer. The caller then parses with
protobuf, which decides (and raises its errors) as before. So the fast path
never accepts what protobuf would refuse, nor reads a value differently; the
unit tests check both against protobuf's encoder and decoder.

:class:`SendCommandView` stands in for the ``pb.BaseCommand`` of a SEND in a
:class:`~magnetar.protocol.frames.Frame`: ``.type`` and ``.send``, and the
``.send`` object has the :class:`pb.CommandSend` field names. It is read-only
by convention and is not a protobuf message (no ``SerializeToString``).
"""
from __future__ import annotations

import collections

from . import compiled as _compiled
from .commands import Type

_SEND = Type.SEND

# Field tags (field number << 3 | wire type 0) of CommandSend's varint fields,
# and the two-byte tags of Magnetar's additions 1000 and 1001.
_PRODUCER_ID, _SEQUENCE_ID, _NUM_MESSAGES = 0x08, 0x10, 0x18
_TXN_LEAST, _TXN_MOST, _HIGHEST, _IS_CHUNK, _MARKER = 0x20, 0x28, 0x30, 0x38, 0x40
_EXPECTED_OFFSET = 1000 << 3   # 0xc0 0x3e on the wire
_OFFSET_EPOCH = 1001 << 3      # 0xc8 0x3e

_INT32_SIGN = 1 << 31
_UINT32 = 1 << 32
_UINT64 = 1 << 64

#: The ``BaseCommand`` header of a SEND: type (field 1) = 6, then field 6
#: (``send``, length-delimited) whose length follows.
_HEADER = bytes([0x08, _SEND, (6 << 3) | 2])

_OPTIONAL = frozenset({"num_messages", "txnid_least_bits", "txnid_most_bits", "highest_sequence_id",
                       "is_chunk", "marker", "expected_offset", "offset_epoch"})


_FIELDS = ("producer_id", "sequence_id", "num_messages", "txnid_least_bits", "txnid_most_bits",
           "highest_sequence_id", "is_chunk", "marker", "expected_offset", "offset_epoch")
#: Presence bit of each optional field in ``SendCommandView.present``.
_BIT = {name: 1 << i for i, name in enumerate(_FIELDS)}
_B_NUM, _B_TXL, _B_TXM, _B_HIGH = _BIT["num_messages"], _BIT["txnid_least_bits"], _BIT["txnid_most_bits"], \
    _BIT["highest_sequence_id"]
_OPTIONAL_BIT = {name: bit for name, bit in _BIT.items() if name in _OPTIONAL}
_B_CHUNK, _B_MARKER, _B_EXP, _B_EPOCH = _BIT["is_chunk"], _BIT["marker"], _BIT["expected_offset"], \
    _BIT["offset_epoch"]
#: ``view.present & EXPECTED_OFFSET_BIT``: the send is conditional (``HasField("expected_offset")``).
EXPECTED_OFFSET_BIT = _B_EXP


class SendCommandView(collections.namedtuple("_SendFields", (*_FIELDS, "present"))):
    """The fields of a CommandSend, decoded by :func:`parse_send`.

    It is also its own BaseCommand (``view.type == Type.SEND`` and
    ``view.send is view``), so a Frame carries one object per SEND. A tuple
    underneath: built in one C call, read through C accessors.
    """

    __slots__ = ()

    type = _SEND

    @property
    def send(self) -> "SendCommandView":
        return self

    def HasField(self, name: str) -> bool:  # noqa: N802  (protobuf's name)
        """Whether the optional field ``name`` was on the wire (protobuf's meaning)."""
        bit = _OPTIONAL_BIT.get(name)
        if bit is None:
            if name in ("producer_id", "sequence_id"):
                return True
            raise ValueError(f'CommandSend has no optional field "{name}"')
        return self.present & bit != 0

    def __repr__(self) -> str:
        return (f"SendCommandView(producer_id={self.producer_id}, sequence_id={self.sequence_id}, "
                f"num_messages={self.num_messages}, highest_sequence_id={self.highest_sequence_id})")


_new = tuple.__new__


def parse_send_python(buf, start: int, end: int) -> SendCommandView | None:
    """Decode the BaseCommand in ``buf[start:end]`` if it is a plain SEND; else None.

    ``buf`` is bytes (or a memoryview of bytes). See the module docstring
    for what "plain" means; None is never an error, only "ask protobuf".
    """
    if end - start < 4 or buf[start] != 0x08 or buf[start + 1] != _SEND or buf[start + 2] != 0x32:
        return None
    size = buf[start + 3]
    if size >= 0x80 or start + 4 + size != end:
        return None  # a long CommandSend, or BaseCommand fields after it: protobuf's job
    pos = start + 4
    pid = seq = None
    num, txl, txm, high, chunk, marker, expected, epoch, present = 1, 0, 0, 0, False, False, 0, 0, 0
    try:
        while pos < end:
            tag = buf[pos]
            if tag >= 0x80:
                if (tag != 0xC0 and tag != 0xC8) or buf[pos + 1] != 0x3E:
                    return None
                tag = _EXPECTED_OFFSET if tag == 0xC0 else _OFFSET_EPOCH
                pos += 1
            value = buf[pos + 1]
            pos += 2
            if value >= 0x80:  # the varint inlined (a call costs more than the loop), 2-3 bytes unrolled
                b = buf[pos]
                pos += 1
                value = (value & 0x7F) | ((b & 0x7F) << 7)
                shift = 14
                if b >= 0x80:
                    b = buf[pos]
                    pos += 1
                    value |= (b & 0x7F) << 14
                    shift = 21
                while b >= 0x80:
                    if shift > 63:
                        return None  # over 10 bytes: protobuf's call
                    b = buf[pos]
                    pos += 1
                    value |= (b & 0x7F) << shift
                    shift += 7
                if value >= _UINT64:
                    return None
            if tag == _SEQUENCE_ID:
                seq = value
            elif tag == _PRODUCER_ID:
                pid = value
            elif tag == _HIGHEST:
                high = value
                present |= _B_HIGH
            elif tag == _NUM_MESSAGES:
                # int32 on the wire as a (possibly 10-byte) two's-complement varint.
                value &= _UINT32 - 1
                num = value - _UINT32 if value & _INT32_SIGN else value
                present |= _B_NUM
            elif tag == _EXPECTED_OFFSET:
                expected = value
                present |= _B_EXP
            elif tag == _OFFSET_EPOCH:
                epoch = value
                present |= _B_EPOCH
            elif tag == _TXN_LEAST:
                txl = value
                present |= _B_TXL
            elif tag == _TXN_MOST:
                txm = value
                present |= _B_TXM
            elif tag == _IS_CHUNK:
                chunk = value != 0
                present |= _B_CHUNK
            elif tag == _MARKER:
                marker = value != 0
                present |= _B_MARKER
            else:
                return None
    except IndexError:
        return None  # truncated or over-long varint: let protobuf judge
    if pos != end or pid is None or seq is None:
        return None  # the last varint ran into the payload, or a required field is missing
    return _new(SendCommandView, (pid, seq, num, txl, txm, high, chunk, marker, expected, epoch, present))


#: What the broker calls: the compiled twin (``_hot.c``, same contract, same
#: results) when this install has it, else the function above.
parse_send = parse_send_python
if _compiled.hot is not None:
    _compiled.hot.register_send_view(SendCommandView)
    parse_send = _compiled.hot.parse_send
