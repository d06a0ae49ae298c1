"""What a write accepts, and how Arrow rows become message fields.

Columns (others are ignored, so a DataFrame read from Magnetar can be
written back after a transformation):

===========  =====================================  ===================================
value        binary, string or struct (required)    the payload (strings as UTF-8; a struct
                                                    is encoded with the topic's schema)
key          binary or string, nullable             partition key; binary must be UTF-8
topic        string, nullable                       destination when no ``topic`` option
properties   map<string,string>, nullable           message properties
event_time   timestamp or long (ms), nullable       the message's event time
===========  =====================================  ===================================

Pulsar keys are strings, hence the UTF-8 rule for binary keys (a read
returns the key as its UTF-8 bytes, so read -> write round-trips).
:func:`check_write_schema` runs on the driver and fails before any task;
:func:`.row_batches.prepare` runs in the tasks and raises SinkError for a bad row.
"""
from __future__ import annotations

from pyspark.sql.types import (BinaryType, DataType, LongType, MapType, StringType, StructType, TimestampNTZType,
                               TimestampType)

from .errors import OptionError

_ALLOWED: dict[str, tuple[type[DataType], ...]] = {
    "value": (BinaryType, StringType, StructType),
    "key": (BinaryType, StringType),
    "topic": (StringType,),
    "properties": (MapType,),
    "event_time": (TimestampType, TimestampNTZType, LongType),
}


def check_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Raise OptionError unless ``schema`` can be written."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError(f"a write needs a 'value' column (binary or string); columns are {sorted(fields)}")
    for name, types in _ALLOWED.items():
        dtype = fields.get(name)
        if dtype is None:
            continue
        if not isinstance(dtype, types):
            wanted = " or ".join(t.typeName() if hasattr(t, "typeName") else t.__name__ for t in types)
            raise OptionError(f"column {name!r} must be {wanted}, got {dtype.simpleString()}")
        if name == "properties" and not (isinstance(dtype.keyType, StringType)
                                          and isinstance(dtype.valueType, StringType)):
            raise OptionError(f"column 'properties' must be map<string,string>, got {dtype.simpleString()}")
    if isinstance(fields["value"], StructType) and topic_option is None:
        raise OptionError("a struct 'value' is written with its topic's schema: give the 'topic' option")
    if topic_option is None and "topic" not in fields:
        raise OptionError("a write needs the 'topic' option or a 'topic' column")
