"""``org.apache.kafka.connect.transforms.MaskField$Key`` / ``$Value``: replace fields' values
with a "zero" of their type, or with ``replacement``.

Config keys are Kafka's: ``fields`` (required, non-empty list), ``replacement`` (optional). Without
a replacement: numbers become 0, booleans false, strings "", bytes b"", decimals 0, dates and times
the epoch, lists and maps empty. With a replacement: strings take it as is, numbers parse it for
their type (an unparsable or out-of-range replacement is a ``DataError``), other types cannot take
one. Null field values stay null; tombstones pass unchanged. The schema does not change.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping
from typing import Any

from odradek.connect.api import ConfigDef, ConfigType, ConnectRecord, Importance
from odradek.connect.config_def import invalid, non_empty_string
from odradek.connect.data import (
    DATE,
    DECIMAL,
    INT_BOUNDS,
    TIME,
    TIMESTAMP,
    DataError,
    Schema,
    Type,
)
from odradek.connect.transforms.base import RecordTransform

FIELDS = "fields"
REPLACEMENT = "replacement"

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise invalid(name, value, "Empty list")


def _zero_for_schema(schema: Schema) -> Any:
    if schema.name == TIMESTAMP:
        return _EPOCH
    if schema.name == DATE:
        return _EPOCH.date()
    if schema.name == TIME:
        return datetime.time(0)
    if schema.name == DECIMAL:
        return decimal.Decimal(0)
    return {
        Type.BOOLEAN: False,
        Type.STRING: "",
        Type.BYTES: b"",
        Type.FLOAT32: 0.0,
        Type.FLOAT64: 0.0,
        Type.ARRAY: [],
        Type.MAP: {},
    }.get(schema.type, 0 if schema.type in INT_BOUNDS else None)


def _zero_for_value(value: Any) -> Any:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    if isinstance(value, str):
        return ""
    if isinstance(value, (bytes, bytearray)):
        return b""
    if isinstance(value, decimal.Decimal):
        return decimal.Decimal(0)
    if isinstance(value, datetime.datetime):
        return _EPOCH
    if isinstance(value, datetime.date):
        return _EPOCH.date()
    if isinstance(value, datetime.time):
        return datetime.time(0)
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {}
    raise DataError(f"Cannot mask value of type {type(value).__name__}")


class _MaskField(RecordTransform):
    PURPOSE = "mask fields"

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                FIELDS,
                ConfigType.LIST,
                importance=Importance.HIGH,
                validator=_non_empty_list,
                documentation="Names of fields to mask.",
            )
            .define(
                REPLACEMENT,
                ConfigType.STRING,
                None,
                importance=Importance.LOW,
                validator=lambda n, v: v is None or non_empty_string(n, v),
                documentation="Custom value replacement, that will be applied to all 'fields' "
                "values (numeric or non-empty string values only).",
            )
        )

    def configure(self, props: Mapping[str, str]) -> None:
        parsed = self.config().parse(props)
        self.fields = frozenset(parsed[FIELDS])
        self.replacement: str | None = parsed[REPLACEMENT]

    def _replace(self, kind: str, where: str) -> Any:
        text = self.replacement
        try:
            if kind in ("int8", "int16", "int32", "int64", "int"):
                number = int(text, 10)
                if kind in INT_BOUNDS_BY_NAME:
                    low, high = INT_BOUNDS_BY_NAME[kind]
                    if not low <= number <= high:
                        raise ValueError(f"out of range for {kind}")
                return number
            if kind in ("float", "double"):
                return float(text)
            if kind == "decimal":
                return decimal.Decimal(text)
        except (ValueError, decimal.InvalidOperation) as exc:
            raise DataError(
                f"{self.KAFKA_NAME}: Unable to convert {text} ({kind}) to number for field "
                f"{where}: {exc}"
            ) from None
        if kind == "string":
            return text
        raise DataError(
            f"{self.KAFKA_NAME}: Cannot mask value of type {kind} of field {where} with custom "
            "replacement."
        )

    def _masked_schemaless(self, value: Any, where: str) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            return _zero_for_value(value)
        if isinstance(value, bool):
            kind = "boolean"
        elif isinstance(value, int):
            kind = "int"
        elif isinstance(value, float):
            kind = "double"
        elif isinstance(value, decimal.Decimal):
            kind = "decimal"
        elif isinstance(value, str):
            kind = "string"
        else:
            kind = type(value).__name__
        return self._replace(kind, where)

    def _masked(self, schema: Schema, value: Any, where: str) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            return _zero_for_schema(schema)
        if schema.name == DECIMAL:
            kind = "decimal"
        elif schema.name in (TIMESTAMP, DATE, TIME):
            kind = schema.name.rsplit(".", 1)[-1]
        else:
            kind = schema.type.value
        return self._replace(kind, where)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            updated = self.require_map(value)
            for name in self.fields:
                if name in updated:
                    updated[name] = self._masked_schemaless(updated[name], name)
            return self.new_record(record, None, updated)
        updated = self.require_struct(schema, value)
        for f in schema.fields:
            if f.name in self.fields:
                updated[f.name] = self._masked(f.schema, updated.get(f.name), f.name)
        return self.new_record(record, schema, updated)


INT_BOUNDS_BY_NAME = {t.value: bounds for t, bounds in INT_BOUNDS.items()}


class MaskFieldKey(_MaskField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.MaskField$Key"
    WHAT = "key"


class MaskFieldValue(_MaskField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.MaskField$Value"
    WHAT = "value"
