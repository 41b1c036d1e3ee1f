"""Configuration keys as Kafka's ``ConfigDef`` declares them: name, type, default, bounds, doc.

A ``ConfigKey`` is one row of a table (topic, broker, controller). It parses a value the way
Kafka's ``ConfigDef`` does: strings are trimmed, booleans are ``true``/``false`` in any case,
integers decimal and range-checked against Java's INT or LONG, lists split on commas. Bounds
(``minimum``, ``maximum``, ``choices``) are checked after parsing, and every failure is an
``InvalidConfigError`` worded as Kafka words it: ``Invalid value -5 for configuration
segment.bytes: Value must be at least 14``.

A row's ``default`` is either a value, ``None`` (the key is nullable: unset means "not given", as
Kafka's ``null`` defaults, e.g. ``log.retention.ms``), or ``REQUIRED`` (Kafka's
``NO_DEFAULT_VALUE``). A row may carry ``convert``, a function that both validates and turns the
value into a richer type (listeners into ``Endpoint`` tuples); it must accept its own output, so
parsing is idempotent, and that output must print back with ``str()``.

Everything here is immutable and does no I/O: any thread may call it.
"""

from __future__ import annotations

import difflib
import enum
import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from odradek.common.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from odradek.errors import InvalidConfigError

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "REQUIRED",
    "ConfigKey",
    "ConfigType",
    "Value",
    "invalid_value",
    "missing_required",
    "optional_string",
    "string_list",
    "unknown_name",
]

INT_MIN, INT_MAX = INT32_MIN, INT32_MAX
LONG_MIN, LONG_MAX = INT64_MIN, INT64_MAX
LONG_DIGITS_MAX = len(str(LONG_MAX))  # 19: a longer integer is out of any range
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class ConfigType(IntEnum):
    """A key's type; the values are DescribeConfigs' ``config_type`` on the wire (v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7
    PASSWORD = 9  # a STRING never shown: DescribeConfigs answers null, is_sensitive


class _Required(enum.Enum):
    REQUIRED = "required"

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required.REQUIRED
"""A row's default when the key has none and must be set (Kafka's ``NO_DEFAULT_VALUE``)."""

Value = bool | int | float | str | tuple[str, ...]


def invalid_value(name: object, value: object, message: str) -> InvalidConfigError:
    """Kafka's ``ConfigException`` wording for a value that fails to parse or validate."""
    return InvalidConfigError(f"Invalid value {_shown(value)} for configuration {name}: {message}")


SHOWN_CHARS_MAX = 64  # a value quoted in an error message is cut to this many characters


def _shown(value: object) -> str:
    """``value`` as an error message quotes it: cut short, and never ``str()`` of an integer
    too long to print (Python refuses more than 4300 digits with a ValueError)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<an integer of {value.bit_length()} bits>"
    text = str(value)
    if len(text) > SHOWN_CHARS_MAX:
        return f"{text[:SHOWN_CHARS_MAX]}... ({len(text)} characters)"
    return text


def optional_string(name: str, raw: object) -> str | None:
    """A STRING value for a ``convert``: trimmed, None when empty (the key left blank)."""
    if not isinstance(raw, str):
        raise invalid_value(name, raw, "Expected a value of type STRING")
    return raw.strip() or None


def string_list(name: str, raw: object) -> tuple[str, ...]:
    """A LIST value for a ``convert``: a comma-separated string or a list of strings, each entry
    trimmed and the empty ones dropped (Kafka's ``parseCsvList``)."""
    parts = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(parts, list | tuple) or not all(isinstance(p, str) for p in parts):
        raise invalid_value(name, raw, "Expected a value of type LIST")
    return tuple(p.strip() for p in parts if p.strip())


def missing_required(name: str) -> InvalidConfigError:
    """Kafka's wording for a key without a default that was not set."""
    return InvalidConfigError(
        f'Missing required configuration "{name}" which has no default value.'
    )


def unknown_name(kind: str, name: str, known: Collection[str]) -> InvalidConfigError:
    """``Unknown topic config name: segmnt.bytes``, with a guess when one name is close."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return InvalidConfigError(f"Unknown {kind} config name: {name}{hint}")


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One key; ``minimum``/``maximum`` bound numbers, ``choices`` strings and list elements."""

    name: str
    type: ConfigType
    default: Value | None | _Required
    doc: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    convert: Callable[[str, object], Any] | None = None

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def nullable(self) -> bool:
        return self.default is None

    def parse(self, raw: object) -> Any:
        """Turn a string (or an already typed value) into a valid value, or raise."""
        if raw is None and self.nullable:
            return None
        if self.convert is not None:
            return self.convert(self.name, raw)
        value = self._convert(raw)
        if self.minimum is not None and value < self.minimum:
            raise invalid_value(self.name, value, f"Value must be at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise invalid_value(self.name, value, f"Value must be no more than {self.maximum}")
        for element in value if self.type is ConfigType.LIST else (value,):
            if self.choices and element not in self.choices:
                message = f"String must be one of: {', '.join(self.choices)}"
                raise invalid_value(self.name, element, message)
        return value

    def to_string(self, value: Any) -> str:
        """The value as Kafka prints it (DescribeConfigs, ZooKeeper, properties files)."""
        if value is None:
            return ""
        if self.type is ConfigType.BOOLEAN:
            return "true" if value else "false"
        return ",".join(map(str, value)) if self.type is ConfigType.LIST else str(value)

    def _convert(self, raw: object) -> Value:
        t = self.type
        if isinstance(raw, str):
            text = raw.strip()
            if t is ConfigType.BOOLEAN and text.lower() in ("true", "false"):
                return text.lower() == "true"
            if t in (ConfigType.INT, ConfigType.LONG) and _INTEGER.fullmatch(text):
                if len(text.lstrip("+-0")) > LONG_DIGITS_MAX:  # int() refuses > 4300 digits
                    raise invalid_value(self.name, raw, f"Not a number of type {t.name}")
                return self._integer(raw, int(text))
            if t is ConfigType.DOUBLE and _DECIMAL.fullmatch(text):
                return float(text)
            if t is ConfigType.LIST:
                return tuple(part.strip() for part in text.split(",")) if text else ()
            if t in (ConfigType.STRING, ConfigType.PASSWORD):
                return text
            if t is ConfigType.BOOLEAN:
                raise invalid_value(self.name, raw, "Expected value to be either true or false")
            raise invalid_value(self.name, raw, f"Not a number of type {t.name}")
        if isinstance(raw, bool):
            if t is ConfigType.BOOLEAN:
                return raw
        elif isinstance(raw, int) and t in (ConfigType.INT, ConfigType.LONG):
            return self._integer(raw, raw)
        elif isinstance(raw, int | float) and t is ConfigType.DOUBLE:
            if not math.isfinite(raw):
                raise invalid_value(self.name, raw, "Not a number of type DOUBLE")
            return float(raw)
        elif (
            isinstance(raw, list | tuple)
            and t is ConfigType.LIST
            and all(isinstance(part, str) for part in raw)
        ):
            return tuple(part.strip() for part in raw)
        raise invalid_value(self.name, raw, f"Expected a value of type {t.name}")

    def _integer(self, raw: object, value: int) -> int:
        low, high = (INT_MIN, INT_MAX) if self.type is ConfigType.INT else (LONG_MIN, LONG_MAX)
        if not low <= value <= high:
            raise invalid_value(self.name, raw, f"Not a number of type {self.type.name}")
        return value
