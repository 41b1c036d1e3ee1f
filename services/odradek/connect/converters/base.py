"""What Kafka's converters share: the ``converter.type`` key (``key``, ``value`` or ``header``)
and, for a converter that is also a header converter (StringConverter, ByteArrayConverter,
JsonConverter, the number converters), header methods that convert a header value as a record
value. Pure; no state.
"""

from __future__ import annotations

from typing import Any

from odradek.connect.api import ConfigDef, ConfigType, Importance
from odradek.connect.config_def import one_of
from odradek.connect.data import Schema, SchemaAndValue

__all__ = ["CONVERTER_TYPE", "ValueAsHeaderConverter", "define_converter_type"]

CONVERTER_TYPE = "converter.type"


def define_converter_type(config: ConfigDef) -> ConfigDef:
    """``config`` with ``converter.type`` defined (optional, one of key/value/header)."""
    return config.define(
        CONVERTER_TYPE,
        ConfigType.STRING,
        None,
        importance=Importance.LOW,
        validator=one_of("key", "value", "header"),
        documentation="Whether this converter is for keys, values or headers.",
    )


class ValueAsHeaderConverter:
    """Mixin: a header value is converted as a record value (``from_connect``/``to_connect``
    of the class it is mixed into), as Kafka's converters that are header converters do."""

    def from_connect_header(
        self, topic: str, header_key: str, schema: Schema | None, value: Any
    ) -> bytes | None:
        return self.from_connect(topic, schema, value)  # type: ignore[attr-defined]

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> SchemaAndValue:
        return self.to_connect(topic, data)  # type: ignore[attr-defined]
