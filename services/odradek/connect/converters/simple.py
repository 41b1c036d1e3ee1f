"""The string, byte-array and simple header converters (Kafka's names and config keys)."""

from __future__ import annotations

import codecs
import datetime
import decimal
import json
from collections.abc import Mapping
from typing import Any

from odradek.connect.api import ConfigDef, ConfigType, Importance
from odradek.connect.converters.base import ValueAsHeaderConverter, define_converter_type
from odradek.connect.converters.errors import ConverterError
from odradek.connect.data import (
    BOOLEAN,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    OPTIONAL_BYTES,
    OPTIONAL_STRING,
    STRING,
    Schema,
    SchemaAndValue,
    Type,
)

ENCODING = "converter.encoding"


def string_form(value: Any) -> str:
    """A value's string form as Kafka prints it (``true``, not ``True``; JSON for lists/maps)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time | decimal.Decimal):
        return value.isoformat() if not isinstance(value, decimal.Decimal) else str(value)
    return str(value)


class StringConverter(ValueAsHeaderConverter):
    """``org.apache.kafka.connect.storage.StringConverter``: the value's string form, encoded
    with ``converter.encoding`` (UTF-8); reads back an optional string."""

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def config(self) -> ConfigDef:
        return define_converter_type(
            ConfigDef().define(
                ENCODING,
                ConfigType.STRING,
                "UTF8",
                importance=Importance.HIGH,
                documentation="The name of the Java/Python character set to encode strings with.",
            )
        )

    def configure(self, props: Mapping[str, str], is_key: bool = False) -> None:
        parsed = self.config().parse(props)
        encoding = parsed[ENCODING]
        try:
            codecs.lookup(encoding)
        except LookupError:
            from odradek.connect.config_def import invalid

            raise invalid(ENCODING, encoding, "unknown character set") from None
        self.encoding = encoding

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        try:
            return string_form(value).encode(self.encoding)
        except UnicodeEncodeError as exc:
            raise ConverterError(
                f"topic {topic}: cannot encode the value in {self.encoding}: {exc}"
            ) from None

    def to_connect(self, topic: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(OPTIONAL_STRING, None)
        try:
            return SchemaAndValue(OPTIONAL_STRING, bytes(data).decode(self.encoding))
        except UnicodeDecodeError as exc:
            raise ConverterError(
                f"topic {topic}: the data is not valid {self.encoding}: {exc}"
            ) from None

    def close(self) -> None:
        pass


class ByteArrayConverter(ValueAsHeaderConverter):
    """``org.apache.kafka.connect.converters.ByteArrayConverter``: bytes pass through."""

    def config(self) -> ConfigDef:
        return define_converter_type(ConfigDef())

    def configure(self, props: Mapping[str, str], is_key: bool = False) -> None:
        self.config().parse(props)

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not Type.BYTES:
            raise ConverterError(
                f"Invalid schema type for ByteArrayConverter: {schema.type.value.upper()}"
            )
        if value is None:
            return None
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ConverterError(
                f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}"
            )
        return bytes(value)

    def to_connect(self, topic: str, data: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES, None if data is None else bytes(data))

    def close(self) -> None:
        pass


class SimpleHeaderConverter:
    """``org.apache.kafka.connect.storage.SimpleHeaderConverter``: header values as their string
    form (lists and maps as JSON); reading infers the type back: ``true``/``false`` booleans,
    integers (the smallest int type that holds them), decimals as doubles, JSON arrays and
    objects, otherwise a string."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, props: Mapping[str, str], is_key: bool = False) -> None:
        pass

    def from_connect_header(
        self, topic: str, header_key: str, schema: Schema | None, value: Any
    ) -> bytes | None:
        if value is None:
            return None
        return string_form(value).encode("utf-8")

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            return SchemaAndValue(OPTIONAL_BYTES, bytes(data))
        return infer(text)

    def close(self) -> None:
        pass


def infer(text: str) -> SchemaAndValue:
    """A header's string form back to a typed value (Kafka's ``Values.parseString``, simplified)."""
    stripped = text.strip()
    low = stripped.lower()
    if low in ("true", "false"):
        return SchemaAndValue(BOOLEAN, low == "true")
    if stripped and (stripped[0] in "-0123456789"):
        try:
            number = int(stripped, 10)
        except ValueError:
            pass
        else:
            for schema, bits in ((INT8, 8), (INT16, 16), (INT32, 32), (INT64, 64)):
                if -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
                    return SchemaAndValue(schema, number)
            return SchemaAndValue(STRING, text)
        try:
            return SchemaAndValue(FLOAT64, float(stripped))
        except ValueError:
            pass
    if stripped[:1] in ("[", "{"):
        try:
            return SchemaAndValue(None, json.loads(stripped))
        except ValueError:
            pass
    return SchemaAndValue(STRING, text)
