"""Converters: Connect data (schema and value) to record bytes and back, with Kafka's classes.

- ``org.apache.kafka.connect.storage.StringConverter``: the value's string form, UTF-8.
- ``org.apache.kafka.connect.converters.ByteArrayConverter``: bytes as they are.
- ``org.apache.kafka.connect.json.JsonConverter``: JSON, with the
  ``{"schema": ..., "payload": ...}`` envelope when ``schemas.enable`` is true (the default),
  as Kafka writes it.
- ``org.apache.kafka.connect.converters.{Short,Integer,Long,Float,Double}Converter``: one
  big-endian number, as Kafka's serializers write it.
- ``org.apache.kafka.connect.storage.SimpleHeaderConverter``: header values in string form.

A converter is configured once with its prefix-stripped properties
(``value.converter.schemas.enable`` reaches it as ``schemas.enable``) and whether it converts
keys; afterwards it is used from one task thread (converters keep only bounded caches, no other
state). Bad input raises ``ConverterError`` (a ``DataError``) whose message says what is wrong;
the runtime routes it through ``errors.tolerance``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from odradek.connect.api import ConfigDef
from odradek.connect.converters.errors import ConverterError
from odradek.connect.converters.json_converter import JsonConverter
from odradek.connect.converters.numbers import NUMBER_CONVERTERS
from odradek.connect.converters.simple import (
    ByteArrayConverter,
    SimpleHeaderConverter,
    StringConverter,
)
from odradek.connect.data import Schema, SchemaAndValue


@runtime_checkable
class Converter(Protocol):
    def config(self) -> ConfigDef: ...

    def configure(self, props: Mapping[str, str], is_key: bool) -> None: ...

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None: ...

    def to_connect(self, topic: str, data: bytes | None) -> SchemaAndValue: ...


@runtime_checkable
class HeaderConverter(Protocol):
    def config(self) -> ConfigDef: ...

    def configure(self, props: Mapping[str, str]) -> None: ...

    def from_connect_header(
        self, topic: str, header_key: str, schema: Schema | None, value: Any
    ) -> bytes | None: ...

    def to_connect_header(
        self, topic: str, header_key: str, data: bytes | None
    ) -> SchemaAndValue: ...


BUILTIN_CONVERTERS: dict[str, type] = {
    "org.apache.kafka.connect.storage.StringConverter": StringConverter,
    "org.apache.kafka.connect.converters.ByteArrayConverter": ByteArrayConverter,
    "org.apache.kafka.connect.json.JsonConverter": JsonConverter,
    **{c.KAFKA_NAME: c for c in NUMBER_CONVERTERS},
}
BUILTIN_HEADER_CONVERTERS: dict[str, type] = {
    "org.apache.kafka.connect.storage.SimpleHeaderConverter": SimpleHeaderConverter,
    "org.apache.kafka.connect.storage.StringConverter": StringConverter,
    "org.apache.kafka.connect.json.JsonConverter": JsonConverter,
}

__all__ = [
    "BUILTIN_CONVERTERS",
    "BUILTIN_HEADER_CONVERTERS",
    "ByteArrayConverter",
    "Converter",
    "ConverterError",
    "HeaderConverter",
    "JsonConverter",
    "SimpleHeaderConverter",
    "StringConverter",
]
