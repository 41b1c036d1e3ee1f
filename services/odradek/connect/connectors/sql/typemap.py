"""SQL column types <-> Connect schemas, and values across that boundary.

Source side (a column to a field): integers by width (SMALLINT int16, INTEGER int32, BIGINT
int64), BOOLEAN, REAL/DOUBLE float64, NUMERIC(p, s) the Decimal logical type with scale ``s``
(NUMERIC without a scale: float64), DATE/TIME/TIMESTAMP the Date/Time/Timestamp logical types
(naive timestamps are UTC), text types string, binary types bytes, anything else (UUID, JSON,
...) its string form. A nullable column is an optional field.

Query mode has no reflected columns: a field's type comes from the first non-null value seen in
that column (all fields optional; a column only ever null is an optional string until a value
arrives).

Sink side (a field to a column, for auto-create): int8/int16 SMALLINT, int32 INTEGER, int64
BIGINT, float REAL, double DOUBLE PRECISION, boolean BOOLEAN, string TEXT, bytes BLOB/BYTEA,
Decimal NUMERIC(38, scale), Date/Time/Timestamp DATE/TIME/TIMESTAMP (UTC); arrays, maps and
structs have no column type and are refused.
"""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from typing import Any

import sqlalchemy as sa

from odradek.connect import data
from odradek.connect.data import Schema, Type

UTC = datetime.UTC
_WIDE = decimal.Context(prec=1000)
"""Room for any NUMERIC's digits (the default context rounds beyond 28)."""


def column_schema(column_type: sa.types.TypeEngine, nullable: bool) -> Schema:
    schema = _column_schema(column_type)
    return data.optional(schema) if nullable else schema


def _column_schema(t: sa.types.TypeEngine) -> Schema:
    if isinstance(t, sa.Boolean):
        return data.BOOLEAN
    if isinstance(t, sa.SmallInteger):
        return data.INT16
    if isinstance(t, sa.BigInteger):
        return data.INT64
    if isinstance(t, sa.Integer):
        return data.INT32
    if isinstance(t, sa.Float):
        return data.FLOAT64
    if isinstance(t, sa.Numeric):
        return data.decimal_schema(t.scale) if t.scale is not None else data.FLOAT64
    if isinstance(t, sa.DateTime):
        return data.TIMESTAMP_SCHEMA
    if isinstance(t, sa.Date):
        return data.DATE_SCHEMA
    if isinstance(t, sa.Time):
        return data.TIME_SCHEMA
    if isinstance(t, sa.LargeBinary | sa.BINARY | sa.VARBINARY):
        return data.BYTES
    return data.STRING


def value_schema(value: Any) -> Schema:
    """An optional field's schema from a Python value (query mode)."""
    if isinstance(value, bool):
        s = data.BOOLEAN
    elif isinstance(value, int):
        s = data.INT64
    elif isinstance(value, float):
        s = data.FLOAT64
    elif isinstance(value, decimal.Decimal):
        exponent = value.as_tuple().exponent
        s = data.decimal_schema(-exponent if isinstance(exponent, int) and exponent < 0 else 0)
    elif isinstance(value, datetime.datetime):
        s = data.TIMESTAMP_SCHEMA
    elif isinstance(value, datetime.date):
        s = data.DATE_SCHEMA
    elif isinstance(value, datetime.time):
        s = data.TIME_SCHEMA
    elif isinstance(value, bytes | bytearray | memoryview):
        s = data.BYTES
    else:
        s = data.STRING
    return data.optional(s)


def to_connect(schema: Schema, value: Any) -> Any:
    """A value read from the database, as ``schema``'s Connect value."""
    if value is None:
        return None
    name = schema.name
    if name == data.TIMESTAMP:
        if not isinstance(value, datetime.datetime):
            value = datetime.datetime.fromisoformat(str(value))
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if name == data.DATE:
        return value.date() if isinstance(value, datetime.datetime) else value
    if name == data.TIME:
        return value.replace(tzinfo=None) if isinstance(value, datetime.time) else value
    if name == data.DECIMAL:
        scale = int(schema.params.get(data.DECIMAL_SCALE, "0"))
        return decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-scale), context=_WIDE)
    t = schema.type
    if t in data.INT_BOUNDS:
        return int(value)
    if t in (Type.FLOAT32, Type.FLOAT64):
        return float(value)
    if t is Type.BOOLEAN:
        return bool(value)
    if t is Type.BYTES:
        return bytes(value)
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value if isinstance(value, str) else str(value)


class UnsupportedSchema(ValueError):
    """A field whose schema has no column type."""


def column_type(schema: Schema) -> sa.types.TypeEngine:
    name = schema.name
    if name == data.DECIMAL:
        return sa.Numeric(38, int(schema.params.get(data.DECIMAL_SCALE, "0")))
    if name == data.TIMESTAMP:
        return sa.DateTime()
    if name == data.DATE:
        return sa.Date()
    if name == data.TIME:
        return sa.Time()
    t = schema.type
    if t in (Type.INT8, Type.INT16):
        return sa.SmallInteger()
    if t is Type.INT32:
        return sa.Integer()
    if t is Type.INT64:
        return sa.BigInteger()
    if t is Type.FLOAT32:
        return sa.REAL()
    if t is Type.FLOAT64:
        return sa.Double()
    if t is Type.BOOLEAN:
        return sa.Boolean()
    if t is Type.STRING:
        return sa.Text()
    if t is Type.BYTES:
        return sa.LargeBinary()
    raise UnsupportedSchema(f"a {t.value} field has no SQL column type")


def to_sql(value: Any) -> Any:
    """A Connect value as the database driver takes it (timestamps as naive UTC)."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value
