"""Kafka's number converters (``org.apache.kafka.connect.converters.IntegerConverter`` ...):
one fixed-size big-endian number per record, as Kafka's serializers write them (ints two's
complement; floats IEEE 754). Reading gives the optional schema of that type."""

from __future__ import annotations

import struct as _struct
from collections.abc import Mapping
from typing import Any

from odradek.connect.api import ConfigDef
from odradek.connect.converters.base import ValueAsHeaderConverter
from odradek.connect.converters.errors import ConverterError
from odradek.connect.data import INT_BOUNDS, Schema, SchemaAndValue, Type


class _NumberConverter(ValueAsHeaderConverter):
    TYPE = Type.INT32
    FORMAT = ">i"
    KAFKA_NAME = ""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, props: Mapping[str, str], is_key: bool = False) -> None:
        pass

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not self.TYPE:
            raise ConverterError(
                f"{self.KAFKA_NAME}: Invalid schema type {schema.type.value} (expected "
                f"{self.TYPE.value})"
            )
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConverterError(
                f"Failed to serialize to {self.TYPE.value.upper()} (was {type(value).__name__})"
            )
        if self.TYPE in INT_BOUNDS:
            low, high = INT_BOUNDS[self.TYPE]
            if not isinstance(value, int) or not low <= value <= high:
                raise ConverterError(f"{value!r} is not an {self.TYPE.value}")
        return _struct.pack(self.FORMAT, value)

    def to_connect(self, topic: str, data: bytes | None) -> SchemaAndValue:
        schema = Schema(self.TYPE, optional=True)
        if data is None:
            return SchemaAndValue(schema, None)
        size = _struct.calcsize(self.FORMAT)
        if len(data) != size:
            raise ConverterError(
                f"topic {topic}: Size of data received by {self.KAFKA_NAME} is not {size}"
            )
        return SchemaAndValue(schema, _struct.unpack(self.FORMAT, bytes(data))[0])

    def close(self) -> None:
        pass


class ShortConverter(_NumberConverter):
    KAFKA_NAME = "org.apache.kafka.connect.converters.ShortConverter"
    TYPE, FORMAT = Type.INT16, ">h"


class IntegerConverter(_NumberConverter):
    KAFKA_NAME = "org.apache.kafka.connect.converters.IntegerConverter"
    TYPE, FORMAT = Type.INT32, ">i"


class LongConverter(_NumberConverter):
    KAFKA_NAME = "org.apache.kafka.connect.converters.LongConverter"
    TYPE, FORMAT = Type.INT64, ">q"


class FloatConverter(_NumberConverter):
    KAFKA_NAME = "org.apache.kafka.connect.converters.FloatConverter"
    TYPE, FORMAT = Type.FLOAT32, ">f"


class DoubleConverter(_NumberConverter):
    KAFKA_NAME = "org.apache.kafka.connect.converters.DoubleConverter"
    TYPE, FORMAT = Type.FLOAT64, ">d"


NUMBER_CONVERTERS = (
    ShortConverter,
    IntegerConverter,
    LongConverter,
    FloatConverter,
    DoubleConverter,
)
