"""Avro record definitions (the form of JSON and Avro topic schemas) as
Spark types, for the ``value`` struct column.

=========================================  ==================================
Avro                                       Spark
=========================================  ==================================
boolean, int, long, float, double          boolean, int, long, float, double
string, enum, string/uuid                  string
bytes, fixed                               binary
int/date                                   date
long/timestamp-millis, timestamp-micros    timestamp
record                                     struct
array                                      array
map                                        map<string, ...>
["null", T] (either order)                 T
=========================================  ==================================

Every field is nullable in Spark (a value written with an older version may
lack a field; a JSON value may omit one). Other unions, ``null`` alone,
decimals, recursive records and references to named types defined
elsewhere in the record are refused with an OptionError naming the
field, pointing at ``valueFormat=binary``.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DateType, DoubleType, FloatType,
                               IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType)

from .errors import OptionError

_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "string": StringType(), "bytes": BinaryType(),
}
_LOGICAL: dict[tuple[str, str], DataType] = {
    ("int", "date"): DateType(), ("long", "timestamp-millis"): TimestampType(),
    ("long", "timestamp-micros"): TimestampType(), ("string", "uuid"): StringType(),
}


def record_type(definition: dict) -> StructType:
    """The Spark struct of an Avro record definition. Raises OptionError."""
    return _record(definition, "value", {})


def _record(definition: dict, path: str, named: dict[str, Any]) -> StructType:
    name = definition.get("name")
    if name:
        if name in named:
            raise OptionError(f"{path}: record {name!r} is recursive, which Spark columns cannot hold; "
                              "read with valueFormat=binary")
        named = {**named, name: definition}
    fields = []
    for f in definition.get("fields", []):
        fname = f.get("name")
        if not isinstance(fname, str):
            raise OptionError(f"{path}: a field without a name")
        fields.append(StructField(fname, _type(f.get("type"), f"{path}.{fname}", named), True))
    return StructType(fields)


def _type(avro: Any, path: str, named: dict[str, Any]) -> DataType:
    if isinstance(avro, list):
        rest = [t for t in avro if t != "null"]
        if len(rest) == 1 and len(avro) == 2:
            return _type(rest[0], path, named)
        raise OptionError(f"{path}: the union {avro} is not supported (only a type or null); "
                          "read with valueFormat=binary")
    if isinstance(avro, str):
        if avro in _PRIMITIVES:
            return _PRIMITIVES[avro]
        if avro in named:  # only the enclosing records are known here: a reference to one is recursion
            raise OptionError(f"{path}: record {avro!r} is recursive, which Spark columns cannot hold; "
                              "read with valueFormat=binary")
        raise OptionError(f"{path}: Avro type {avro!r} is not supported; read with valueFormat=binary")
    if not isinstance(avro, dict):
        raise OptionError(f"{path}: cannot read Avro type {avro!r}")
    kind = avro.get("type")
    logical = avro.get("logicalType")
    if logical and (kind, logical) in _LOGICAL:
        return _LOGICAL[(kind, logical)]
    if logical == "decimal":
        raise OptionError(f"{path}: Avro decimals are not supported; read with valueFormat=binary")
    if kind == "record":
        return _record(avro, path, named)
    if kind == "enum":
        return StringType()
    if kind == "fixed":
        return BinaryType()
    if kind == "array":
        return ArrayType(_type(avro.get("items"), f"{path}[]", named), True)
    if kind == "map":
        return MapType(StringType(), _type(avro.get("values"), f"{path}{{}}", named), True)
    return _type(kind, path, named)
