"""Kafka's ConfigDef parsing rules: string properties to typed values, and per-key validation.

``parse`` is what a connector, transform or converter calls on ``configure``: it raises
``ConfigException`` on the first key that is missing or bad, naming it. ``validate`` is what the
validate endpoint uses: every key is reported, each with its errors, recommended values and
visibility, as Kafka's ``ConfigDef.validate`` does.

Parsing rules (Kafka's ``ConfigDef.parseType``): values are trimmed; BOOLEAN is ``true``/``false``
in any case; INT/SHORT/LONG are decimal integers within 32/16/64 bits; DOUBLE a float; LIST a
comma-separated list with whitespace around commas dropped (an empty string is the empty list);
CLASS a class name (kept as a string: plugins resolve it); PASSWORD a string, reported as
``[hidden]`` by ``validate``. Defaults given as strings are parsed with the same rules.

Validators are callables ``validator(name, value)`` raising ``ConfigException``; the ones below
carry a ``describe()`` for documentation. A recommender is either a callable
``recommender(parsed_config) -> values`` or an object with ``valid_values(name, parsed_config)``
and optionally ``visible(name, parsed_config)`` (Kafka's Recommender).

Pure: no I/O, no threads; safe to call from any thread.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from odradek.connect.api import (
    NO_DEFAULT,
    ConfigDef,
    ConfigException,
    ConfigKey,
    ConfigType,
    ConfigValue,
)

HIDDEN = "[hidden]"
"""How a PASSWORD value is shown anywhere but to the plugin itself (Kafka's Password.toString)."""

_COMMA = re.compile(r"\s*,\s*")
_INT_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}
_INT_WORDS = {
    ConfigType.SHORT: "a 16-bit integer",
    ConfigType.INT: "a 32-bit integer",
    ConfigType.LONG: "a 64-bit integer",
}


def invalid(name: str, value: Any, reason: str) -> ConfigException:
    """Kafka's ``ConfigException(name, value, message)``: names the key, the value and why."""
    shown = "null" if value is None else value
    return ConfigException(name, f"Invalid value {shown} for configuration {name}: {reason}")


def missing(name: str) -> ConfigException:
    return ConfigException(
        name, f'Missing required configuration "{name}" which has no default value.'
    )


def parse_value(name: str, type_: ConfigType, value: Any) -> Any:
    """One value of ``type_`` from a string (or an already typed value, as Kafka accepts)."""
    if value is None:
        return None
    if isinstance(value, str):
        trimmed = value.strip()
        if type_ is ConfigType.BOOLEAN:
            low = trimmed.lower()
            if low == "true":
                return True
            if low == "false":
                return False
            raise invalid(name, value, "Expected value to be either true or false")
        if type_ in (ConfigType.STRING, ConfigType.PASSWORD, ConfigType.CLASS):
            if type_ is ConfigType.CLASS and not trimmed:
                raise invalid(name, value, "Expected a class name, but it was empty")
            return trimmed
        if type_ in _INT_BITS:
            try:
                number = int(trimmed, 10)
            except ValueError:
                raise invalid(name, value, f"Not a number of type {type_.value}") from None
            return _in_bits(name, type_, number, value)
        if type_ is ConfigType.DOUBLE:
            try:
                result = float(trimmed)
            except ValueError:
                raise invalid(name, value, "Not a number of type DOUBLE") from None
            if math.isnan(result) and trimmed.lower() != "nan":
                raise invalid(name, value, "Not a number of type DOUBLE")
            return result
        if type_ is ConfigType.LIST:
            return [] if not trimmed else _COMMA.split(trimmed)
        raise ValueError(f"unknown config type {type_}")
    # Already typed (defaults written as Python values, or programmatic configs).
    if type_ is ConfigType.BOOLEAN and isinstance(value, bool):
        return value
    if type_ in _INT_BITS and isinstance(value, int) and not isinstance(value, bool):
        return _in_bits(name, type_, value, value)
    if (
        type_ is ConfigType.DOUBLE
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    ):
        return float(value)
    if type_ is ConfigType.LIST and isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    if type_ is ConfigType.CLASS and isinstance(value, type):
        return f"{value.__module__}:{value.__qualname__}"
    raise invalid(
        name,
        value,
        f"Expected value to be {_describe_type(type_)}, but it was a {type(value).__name__}",
    )


def _in_bits(name: str, type_: ConfigType, number: int, raw: Any) -> int:
    bits = _INT_BITS[type_]
    if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        raise invalid(
            name, raw, f"Expected value to be {_INT_WORDS[type_]}, but it was out of range"
        )
    return number


def _describe_type(type_: ConfigType) -> str:
    return {
        ConfigType.BOOLEAN: "either true or false",
        ConfigType.DOUBLE: "a double",
        ConfigType.LIST: "a comma-separated list",
        ConfigType.CLASS: "a class name",
    }.get(type_, _INT_WORDS.get(type_, "a string"))


def to_string(value: Any, type_: ConfigType) -> str | None:
    """Kafka's ``ConfigDef.convertToString``: how the validate endpoint shows a parsed value."""
    if value is None:
        return None
    if type_ is ConfigType.PASSWORD:
        return HIDDEN
    if isinstance(value, bool):
        return "true" if value else "false"
    if type_ is ConfigType.LIST and isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, type):
        return f"{value.__module__}:{value.__qualname__}"
    return str(value)


def default_of(key: ConfigKey) -> Any:
    """The parsed default of ``key`` (``NO_DEFAULT`` for a required key)."""
    if key.default is NO_DEFAULT:
        return NO_DEFAULT
    return parse_value(key.name, key.type, key.default)


def _parse_key(key: ConfigKey, props: Mapping[str, Any]) -> Any:
    if key.name in props:
        value = parse_value(key.name, key.type, props[key.name])
    elif key.default is NO_DEFAULT:
        raise missing(key.name)
    else:
        value = default_of(key)
    if key.validator is not None:
        try:
            key.validator(key.name, value)
        except ConfigException as exc:
            if key.type is ConfigType.PASSWORD and value:
                # Kafka's Password prints as [hidden]; a message must not carry the secret.
                raise ConfigException(exc.name, exc.message.replace(value, HIDDEN)) from None
            raise
    return value


def parse(config_def: ConfigDef, props: Mapping[str, Any]) -> dict[str, Any]:
    """Typed values of every key of ``config_def`` (defaults filled in). Keys of ``props`` that
    ``config_def`` does not define are ignored here (the caller decides whether they are allowed).
    Raises ``ConfigException`` naming the first missing or bad key."""
    return {key.name: _parse_key(key, props) for key in config_def.keys.values()}


def validate(config_def: ConfigDef, props: Mapping[str, Any]) -> list[ConfigValue]:
    """Every key of ``config_def`` with its value and errors (Kafka's ``ConfigDef.validate``)."""
    parsed: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for key in config_def.keys.values():
        try:
            parsed[key.name] = _parse_key(key, props)
        except ConfigException as exc:
            errors[key.name] = [exc.message]
            parsed[key.name] = None
    results = []
    for key in config_def.keys.values():
        recommended: tuple[Any, ...] = ()
        visible = True
        key_errors = list(errors.get(key.name, ()))
        if key.recommender is not None:
            try:
                recommended, visible = _recommend(key, parsed)
            except ConfigException as exc:
                key_errors.append(exc.message)
            except Exception as exc:  # a plugin's recommender must not break validation
                key_errors.append(f"recommender failed: {exc}")
        value = parsed[key.name]
        if key.type is ConfigType.PASSWORD and value is not None:
            value = HIDDEN
        results.append(ConfigValue(key.name, value, tuple(recommended), tuple(key_errors), visible))
    return results


def _recommend(key: ConfigKey, parsed: Mapping[str, Any]) -> tuple[tuple[Any, ...], bool]:
    recommender = key.recommender
    if hasattr(recommender, "valid_values"):
        values = tuple(recommender.valid_values(key.name, parsed) or ())
        visible_fn = getattr(recommender, "visible", None)
        visible = bool(visible_fn(key.name, parsed)) if visible_fn is not None else True
        return values, visible
    return tuple(recommender(parsed) or ()), True


def error_count(values: list[ConfigValue]) -> int:
    """How many error messages ``values`` carry: Kafka's ConfigInfos ``error_count`` counts
    messages, not keys."""
    return sum(len(v.errors) for v in values)


# ------------------------------------------------------------------ validators

Validator = Callable[[str, Any], None]


class _Validator:
    def __init__(self, check: Callable[[str, Any], None], description: str):
        self._check = check
        self.description = description

    def __call__(self, name: str, value: Any) -> None:
        self._check(name, value)

    def describe(self) -> str:
        return self.description

    def __repr__(self) -> str:
        return self.description


def in_range(low: float | None = None, high: float | None = None) -> _Validator:
    """Kafka's ``Range.between``/``atLeast``: a number within [low, high] (None: unbounded)."""

    def check(name: str, value: Any) -> None:
        if value is None:
            raise invalid(name, value, "Value must be non-null")
        if low is not None and value < low:
            raise invalid(name, value, f"Value must be at least {low}")
        if high is not None and value > high:
            raise invalid(name, value, f"Value must be no more than {high}")

    if low is not None and high is not None:
        text = f"[{low},...,{high}]"
    elif low is not None:
        text = f"[{low},...]"
    else:
        text = f"[...,{high}]"
    return _Validator(check, text)


def one_of(*values: str, case_insensitive: bool = False) -> _Validator:
    """Kafka's ``ValidString.in`` / ``CaseInsensitiveValidString.in``. A list value must have
    every element among ``values`` (Kafka's ``ValidList``). None passes (an optional key)."""
    allowed = {v.lower() for v in values} if case_insensitive else set(values)

    def ok(item: Any) -> bool:
        text = str(item)
        return (text.lower() if case_insensitive else text) in allowed

    def check(name: str, value: Any) -> None:
        if value is None:
            return
        items = value if isinstance(value, list) else [value]
        for item in items:
            if not ok(item):
                raise invalid(name, value, f"String must be one of: {', '.join(values)}")

    return _Validator(check, "[" + ", ".join(values) + "]")


def _non_empty(name: str, value: Any) -> None:
    if value is None or not str(value).strip():
        raise invalid(name, value, "String must be non-empty")


non_empty_string = _Validator(_non_empty, "non-empty string")
"""Kafka's ``NonEmptyString``."""


def regex(name: str, value: Any) -> None:
    """The value (or every element of a list) compiles as a regular expression."""
    if value is None:
        return
    for item in value if isinstance(value, list) else [value]:
        try:
            re.compile(item)
        except re.error as exc:
            raise invalid(name, value, f"not a valid regular expression: {exc}") from None


def non_null(name: str, value: Any) -> None:
    if value is None:
        raise invalid(name, value, "Value must be non-null")


def all_of(*validators: Validator) -> _Validator:
    def check(name: str, value: Any) -> None:
        for v in validators:
            v(name, value)

    return _Validator(check, ", ".join(repr(v) for v in validators))
