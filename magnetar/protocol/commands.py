"""Building and inspecting BaseCommand values by type.

In the wire format the BaseCommand sub-message for type T is the field whose
number equals T; :data:`FIELD_OF_TYPE` is derived from the descriptor so the
mapping can never drift from the .proto.
"""
from __future__ import annotations

from typing import Any

from . import magnetar_api_pb2 as pb

class Type:
    """BaseCommand.Type values as plain ints.

    Attribute access on protobuf's enum wrapper runs Python code; the hot path
    compares command types on every frame, so the values are copied here once.
    """

    Name = staticmethod(pb.BaseCommand.Type.Name)


for _value in pb.BaseCommand.Type.DESCRIPTOR.values:
    setattr(Type, _value.name, _value.number)

FIELD_OF_TYPE: dict[int, str] = {
    f.number: f.name for f in pb.BaseCommand.DESCRIPTOR.fields if f.number != 1
}


def command(type_: int, **fields: Any) -> pb.BaseCommand:
    """A BaseCommand of ``type_`` whose sub-message is initialised from ``fields``.

    ``command(Type.PING)`` and ``command(Type.FLOW, consumer_id=1, messagePermits=1000)``.
    Message-typed fields accept protobuf messages or dicts.
    """
    cmd = pb.BaseCommand(type=type_)
    sub = getattr(cmd, FIELD_OF_TYPE[type_])
    sub.SetInParent()
    for name, value in fields.items():
        if value is None:
            continue
        attr = getattr(sub, name)
        if hasattr(attr, "CopyFrom") and not isinstance(value, dict):
            attr.CopyFrom(value)
        elif hasattr(attr, "CopyFrom"):
            attr.CopyFrom(type(attr)(**value))
        elif hasattr(attr, "extend"):
            attr.extend(value)
        else:
            setattr(sub, name, value)
    return cmd


def body(cmd: pb.BaseCommand):
    """The sub-message of ``cmd`` (``cmd.send`` for a SEND, ...)."""
    return getattr(cmd, FIELD_OF_TYPE[cmd.type])


def type_name(cmd: pb.BaseCommand) -> str:
    try:
        return pb.BaseCommand.Type.Name(cmd.type)
    except ValueError:
        return f"UNKNOWN({cmd.type})"


def signed64(value: int) -> int:
    """A uint64 field read as the signed 64-bit number Pulsar means by it.

    Pulsar's ids (ledger, entry) and ack-set words are Java longs carried in
    uint64 fields: -1 ("before the first entry", "earliest") arrives as
    2^64-1.
    """
    return value - (1 << 64) if value >= 1 << 63 else value


def message_id(ledger_id: int, entry_id: int, partition: int = -1, batch_index: int = -1) -> pb.MessageIdData:
    mid = pb.MessageIdData(ledgerId=ledger_id, entryId=entry_id)
    if partition != -1:
        mid.partition = partition
    if batch_index != -1:
        mid.batch_index = batch_index
    return mid


def error(request_id: int, code: int, message: str) -> pb.BaseCommand:
    return command(Type.ERROR, request_id=request_id, error=code, message=message)


def success(request_id: int) -> pb.BaseCommand:
    return command(Type.SUCCESS, request_id=request_id)
