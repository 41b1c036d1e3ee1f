"""The data model of Connect records: schemas and the Python values they describe.

Kafka Connect's ``Schema``/``Struct``, kept as plain Python: a value is ``None``, ``bool``,
``int``, ``float``, ``str``, ``bytes``, ``list``, ``dict`` (a map, or a struct's fields by name),
or, for the logical types, ``datetime.datetime`` (Timestamp, UTC), ``datetime.date`` (Date),
``datetime.time`` (Time) and ``decimal.Decimal`` (Decimal). A record's schema is optional:
schemaless data (``schemas.enable=false``) is the value alone.

Names and JSON spellings are Kafka's (``int8`` ... ``struct``; logical types
``org.apache.kafka.connect.data.Timestamp`` ...), so the JSON converter's schema envelope reads
and writes what Kafka's JsonConverter does.

Schemas are immutable and hashable; ``validate`` checks a value against a schema and raises
``DataError`` naming the field path.
"""

from __future__ import annotations

import datetime
import decimal
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class DataError(ValueError):
    """A value that does not match its schema, or a schema that is not well formed."""


class Type(StrEnum):
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float"
    FLOAT64 = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self not in (Type.ARRAY, Type.MAP, Type.STRUCT)


TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
DECIMAL = "org.apache.kafka.connect.data.Decimal"
DECIMAL_SCALE = "scale"

INT_BOUNDS = {
    Type.INT8: (-(2**7), 2**7 - 1),
    Type.INT16: (-(2**15), 2**15 - 1),
    Type.INT32: (-(2**31), 2**31 - 1),
    Type.INT64: (-(2**63), 2**63 - 1),
}


@dataclass(frozen=True)
class Field:
    name: str
    index: int
    schema: Schema


@dataclass(frozen=True)
class Schema:
    """Kafka Connect's Schema. ``fields`` for STRUCT, ``key_schema``/``value_schema`` for MAP
    (``value_schema`` alone for ARRAY). ``parameters`` is a tuple of pairs to stay hashable."""

    type: Type
    optional: bool = False
    default: Any = None
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: tuple[tuple[str, str], ...] = ()
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    @property
    def params(self) -> dict[str, str]:
        return dict(self.parameters)


def struct(*fields: tuple[str, Schema], name: str | None = None, optional: bool = False) -> Schema:
    """A STRUCT schema from (name, schema) pairs, in order."""
    return Schema(
        Type.STRUCT,
        optional=optional,
        name=name,
        fields=tuple(Field(n, i, s) for i, (n, s) in enumerate(fields)),
    )


def optional(schema: Schema) -> Schema:
    return Schema(**{**schema.__dict__, "optional": True})


INT8 = Schema(Type.INT8)
INT16 = Schema(Type.INT16)
INT32 = Schema(Type.INT32)
INT64 = Schema(Type.INT64)
FLOAT32 = Schema(Type.FLOAT32)
FLOAT64 = Schema(Type.FLOAT64)
BOOLEAN = Schema(Type.BOOLEAN)
STRING = Schema(Type.STRING)
BYTES = Schema(Type.BYTES)
OPTIONAL_STRING = Schema(Type.STRING, optional=True)
OPTIONAL_INT64 = Schema(Type.INT64, optional=True)
OPTIONAL_BYTES = Schema(Type.BYTES, optional=True)
TIMESTAMP_SCHEMA = Schema(Type.INT64, name=TIMESTAMP, version=1)
DATE_SCHEMA = Schema(Type.INT32, name=DATE, version=1)
TIME_SCHEMA = Schema(Type.INT32, name=TIME, version=1)


def decimal_schema(scale: int, optional: bool = False) -> Schema:
    return Schema(
        Type.BYTES,
        optional=optional,
        name=DECIMAL,
        version=1,
        parameters=((DECIMAL_SCALE, str(scale)),),
    )


_LOGICAL_PYTHON = {
    TIMESTAMP: datetime.datetime,
    DATE: datetime.date,
    TIME: datetime.time,
    DECIMAL: decimal.Decimal,
}


def validate(schema: Schema, value: Any, path: str = "") -> None:
    """Raise ``DataError`` (naming the field path) unless ``value`` fits ``schema``."""
    where = path or "value"
    if value is None:
        if schema.optional or schema.default is not None:
            return
        raise DataError(f"{where}: null for a required {schema.type.value} field")
    logical = _LOGICAL_PYTHON.get(schema.name or "")
    if logical is not None:
        if not isinstance(value, logical):
            raise DataError(f"{where}: {type(value).__name__} for a {schema.name} field")
        return
    t = schema.type
    if t in INT_BOUNDS:
        low, high = INT_BOUNDS[t]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise DataError(f"{where}: {value!r} is not an {t.value}")
    elif t in (Type.FLOAT32, Type.FLOAT64):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DataError(f"{where}: {value!r} is not a {t.value}")
    elif t is Type.BOOLEAN:
        if not isinstance(value, bool):
            raise DataError(f"{where}: {value!r} is not a boolean")
    elif t is Type.STRING:
        if not isinstance(value, str):
            raise DataError(f"{where}: {type(value).__name__} is not a string")
    elif t is Type.BYTES:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataError(f"{where}: {type(value).__name__} is not bytes")
    elif t is Type.ARRAY:
        if not isinstance(value, list):
            raise DataError(f"{where}: {type(value).__name__} is not an array")
        for i, item in enumerate(value):
            validate(schema.value_schema, item, f"{where}[{i}]")
    elif t is Type.MAP:
        if not isinstance(value, dict):
            raise DataError(f"{where}: {type(value).__name__} is not a map")
        for k, v in value.items():
            validate(schema.key_schema, k, f"{where}.<key>")
            validate(schema.value_schema, v, f"{where}[{k!r}]")
    elif t is Type.STRUCT:
        if not isinstance(value, dict):
            raise DataError(f"{where}: {type(value).__name__} is not a struct")
        unknown = set(value) - {f.name for f in schema.fields}
        if unknown:
            raise DataError(f"{where}: fields not in the schema: {sorted(unknown)}")
        for f in schema.fields:
            validate(f.schema, value.get(f.name), f"{path}.{f.name}" if path else f.name)


@dataclass(frozen=True)
class SchemaAndValue:
    schema: Schema | None
    value: Any = field(default=None)
