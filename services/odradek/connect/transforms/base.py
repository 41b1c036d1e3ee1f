"""What the field transforms share: the Key/Value split, struct schema edits, a schema cache."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from odradek.connect.api import ConfigDef, ConnectRecord
from odradek.connect.data import DataError, Field, Schema, Type

SCHEMA_CACHE_MAX = 16
"""Updated schemas kept per transform (a task sees few distinct schemas)."""


class RecordTransform:
    """A transform of a record's key or value; subclasses set ``KAFKA_NAME`` and ``WHAT``
    (``key``/``value``) and implement ``config``, ``configure`` and ``apply``."""

    KAFKA_NAME = ""
    WHAT = "value"
    PURPOSE = "transform"

    def __init__(self) -> None:
        self._schemas: OrderedDict[Schema, Schema] = OrderedDict()
        self._last: tuple[Schema, Schema] | None = None

    def config(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, props: Mapping[str, str]) -> None:
        self.config().parse(props)

    def close(self) -> None:
        self._schemas.clear()
        self._last = None

    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema if self.WHAT == "key" else record.value_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.key if self.WHAT == "key" else record.value

    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        if self.WHAT == "key":
            return record.with_(key_schema=schema, key=value)
        return record.with_(value_schema=schema, value=value)

    def require_map(self, value: Any) -> dict:
        if not isinstance(value, Mapping):
            raise DataError(
                f"{self.KAFKA_NAME}: Only Map objects supported in absence of schema for "
                f"[{self.PURPOSE}], found: {type(value).__name__}"
            )
        return dict(value)

    def require_struct(self, schema: Schema, value: Any) -> dict:
        if schema.type is not Type.STRUCT or not isinstance(value, Mapping):
            raise DataError(
                f"{self.KAFKA_NAME}: Only Struct objects supported for [{self.PURPOSE}], found: "
                f"{schema.type.value} {type(value).__name__}"
            )
        return dict(value)

    def updated_schema(self, schema: Schema, build: Callable[[Schema], Schema]) -> Schema:
        last = self._last
        if (
            last is not None and last[0] is schema
        ):  # schemas are immutable: same object, same result
            return last[1]
        try:
            cached = self._schemas.get(schema)
        except TypeError:  # a default value that is a list or map: not hashable, not cached
            return build(schema)
        if cached is None:
            cached = build(schema)
            self._schemas[schema] = cached
            if len(self._schemas) > SCHEMA_CACHE_MAX:
                self._schemas.popitem(last=False)
        self._last = (schema, cached)
        return cached


def struct_like(schema: Schema, fields: list[tuple[str, Schema]]) -> Schema:
    """A STRUCT with ``schema``'s name, version, doc, parameters and optionality, and ``fields``."""
    return Schema(
        Type.STRUCT,
        optional=schema.optional,
        name=schema.name,
        version=schema.version,
        doc=schema.doc,
        parameters=schema.parameters,
        fields=tuple(Field(n, i, s) for i, (n, s) in enumerate(fields)),
    )
