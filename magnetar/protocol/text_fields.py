"""Finding string fields that did not decode as text.

A client may send bytes that are not UTF-8 in a ``string`` field (a topic, a
producer or subscription name). The decoder then hands the field over as
``bytes``; code downstream expects ``str`` and would fail with a TypeError far
from the cause. :func:`first_undecodable` names the first such field, so the
broker can refuse the command with a clear error instead. Pure function, no
I/O.
"""
from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

_STRING = FieldDescriptor.TYPE_STRING
_MESSAGE = FieldDescriptor.TYPE_MESSAGE


def first_undecodable(msg: Message, prefix: str = "") -> str | None:
    """The dotted name of the first string field of ``msg`` (recursively) that
    holds bytes instead of text, or None when every one decoded."""
    for field, value in msg.ListFields():
        repeated = field.is_repeated
        values = value if repeated else (value,)
        if field.type == _STRING:
            if any(isinstance(v, bytes) for v in values):
                return prefix + field.name
        elif field.type == _MESSAGE:
            for v in values:
                found = first_undecodable(v, f"{prefix}{field.name}.")
                if found is not None:
                    return found
    return None
