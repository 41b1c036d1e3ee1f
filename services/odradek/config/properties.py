"""Server configuration files (Java ``.properties``) and the config classes read from them.

File format, as ``java.util.Properties.load`` reads it (Kafka reads ``server.properties`` so):

- one ``key=value`` per line; the separator is the first unescaped ``=``, ``:`` or whitespace,
  and the whitespace around it is dropped (``key = value``, ``key: value``, ``key value``);
- a line whose first non-blank character is ``#`` or ``!`` is a comment; a ``#`` later in a line
  is part of the value, as in Java; blank lines are skipped;
- a line ending in an odd number of backslashes continues on the next line, whose leading
  whitespace is dropped; ``\\t \\n \\r \\f \\uXXXX`` are escapes and a backslash before any other
  character stands for that character (``\\=``, ``\\:``, ``\\ ``, ``\\\\``);
- a key given twice keeps its last value, as in Java.

One difference: the file is read as UTF-8 (Java reads ISO-8859-1), which is the same for the
ASCII that configuration files hold. Values are trimmed by the key's parser, as Kafka's
``ConfigDef`` does. A file larger than ``PROPERTIES_FILE_MAX_BYTES`` is refused.

``PropertiesConfig`` is the mixin behind ``BrokerConfig`` and ``ControllerConfig``: a frozen
dataclass with one field per row of its ``KEYS`` table, validated when built. ``load`` reads a
file and applies overrides (``--override key=value``) on top; unknown keys are refused with the
file and line that hold them. Only ``load`` does I/O; everything else is pure and thread-safe.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, NamedTuple, Self

from odradek.config.keys import ConfigKey, missing_required, unknown_name
from odradek.errors import InvalidConfigError

__all__ = [
    "PROPERTIES_FILE_MAX_BYTES",
    "PropertiesConfig",
    "Property",
    "parse_overrides",
    "parse_properties",
]

PROPERTIES_FILE_MAX_BYTES = 1 << 20
_NEWLINE = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class Property(NamedTuple):
    """One entry of a properties file, with the line it starts on (1-based)."""

    key: str
    value: str
    line: int


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
        elif i == len(text):
            break  # a lone backslash at the very end of the file: Java drops it
        elif text[i] == "u":
            digits = text[i + 1 : i + 5]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise InvalidConfigError(f"{where}: malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            i += 5
        else:
            out.append(_ESCAPES.get(text[i], text[i]))
            i += 1
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Key and value of one logical line, both still escaped."""
    i = 0
    while i < len(line) and line[i] not in "=:" + _BLANK:
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANK)
    return key, rest


def parse_properties(text: str, source: str = "<properties>") -> list[Property]:
    """Every entry of a properties file, in order; ``source`` names the file in errors."""
    lines = _NEWLINE.split(text)
    entries: list[Property] = []
    i = 0
    while i < len(lines):
        start, logical = i + 1, lines[i].lstrip(_BLANK)
        i += 1
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical) and i < len(lines):
            logical = logical[:-1] + lines[i].lstrip(_BLANK)
            i += 1
        key, value = _split(logical)
        where = f"{source}:{start}"
        entries.append(Property(_unescape(key, where), _unescape(value, where), start))
    return entries


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """``--override key=value`` arguments into a mapping (later ones win)."""
    overrides: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidConfigError(f"Invalid override {item!r}: expected key=value")
        overrides[key.strip()] = value
    return overrides


def _read(path: str | os.PathLike[str]) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(PROPERTIES_FILE_MAX_BYTES + 1)
    except OSError as e:
        raise InvalidConfigError(f"{os.fspath(path)}: cannot read: {e.strerror}") from e
    if len(data) > PROPERTIES_FILE_MAX_BYTES:
        raise InvalidConfigError(
            f"{os.fspath(path)}: larger than {PROPERTIES_FILE_MAX_BYTES} bytes; "
            "is this a configuration file?"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidConfigError(f"{os.fspath(path)}: not UTF-8 text ({e.reason})") from e


class PropertiesConfig:
    """Mixin for a frozen dataclass whose fields follow ``KEYS``, one per row, in order.

    Subclasses set ``KEYS`` and ``KIND`` ("broker", "controller") and may add cross-key checks in
    ``_check``. A row with a ``REQUIRED`` default is a field without a default.
    """

    __slots__ = ()
    KEYS: ClassVar[Mapping[str, ConfigKey]]
    KIND: ClassVar[str]
    # Fields after the KEYS' ones, for keys matched by a pattern rather than named by a row
    # (the broker's ``listener.name.<l>.<key>``): ``_split_patterned`` parses them.
    PATTERNED_FIELDS: ClassVar[tuple[str, ...]] = ()
    # The last field, if a subclass names one: the keys of ``KEYS`` that the properties named
    # (file or override), whatever their values, set by ``from_properties``. Kafka tells a key
    # named at its default value (STATIC_BROKER_CONFIG) from one left out (DEFAULT_CONFIG).
    NAMED_KEYS_FIELD: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        for key in self.KEYS.values():
            object.__setattr__(self, key.attr, key.parse(getattr(self, key.attr)))
        self._check()

    def _check(self) -> None:
        """Rules that involve several keys; raise ``InvalidConfigError``."""

    @classmethod
    def _split_patterned(
        cls, props: Mapping[str, object]
    ) -> tuple[Mapping[str, object], dict[str, Any]]:
        """``props`` without the patterned keys, and the ``PATTERNED_FIELDS`` values they give;
        raises ``InvalidConfigError`` for one that is refused."""
        return props, {}

    def _patterned_properties(self) -> dict[str, str]:
        """The ``PATTERNED_FIELDS`` as properties again."""
        return {}

    @classmethod
    def check_fields(cls) -> None:
        """Called once at import: the dataclass's fields must follow ``KEYS``."""
        fields = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        named = [] if cls.NAMED_KEYS_FIELD is None else [cls.NAMED_KEYS_FIELD]
        if fields != [k.attr for k in cls.KEYS.values()] + list(cls.PATTERNED_FIELDS) + named:
            raise RuntimeError(f"{cls.__name__}'s attributes must follow its KEYS, in order")

    @classmethod
    def from_properties(
        cls, props: Mapping[str, object], origins: Mapping[str, str] | None = None
    ) -> Self:
        """A validated config from ``props``; ``origins`` (key -> "file:line") prefix errors.

        The first problem is reported: unknown names, then values in table order, then missing
        required keys, then rules between keys.
        """
        origins = origins or {}
        props, patterned = cls._split_patterned(props)
        for name in props:
            if name not in cls.KEYS:
                error = unknown_name(cls.KIND, name, cls.KEYS)
                raise InvalidConfigError(_where(origins.get(name), str(error))) from None
        values: dict[str, Any] = {}
        for key in cls.KEYS.values():
            if key.name in props:
                try:
                    values[key.attr] = key.parse(props[key.name])
                except InvalidConfigError as e:
                    raise InvalidConfigError(_where(origins.get(key.name), str(e))) from e
            elif key.required:
                raise missing_required(key.name)
        if cls.NAMED_KEYS_FIELD is not None:
            values[cls.NAMED_KEYS_FIELD] = frozenset(props)
        return cls(**values, **patterned)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> Self:
        """Read a properties file (if any), apply ``overrides`` on top, validate."""
        props: dict[str, object] = {}
        origins: dict[str, str] = {}
        if path is not None:
            source = os.fspath(path)
            for entry in parse_properties(_read(path), source):
                props[entry.key] = entry.value
                origins[entry.key] = f"{source}:{entry.line}"
        for name, value in (overrides or {}).items():
            props[name] = value
            origins[name] = "override"
        return cls.from_properties(props, origins)

    def to_properties(self) -> dict[str, str]:
        """Every key that is set, as Kafka prints it; ``from_properties`` reads it back."""
        return {
            **{
                k.name: k.to_string(value)
                for k in self.KEYS.values()
                if (value := getattr(self, k.attr)) is not None or not k.nullable
            },
            **self._patterned_properties(),
        }


def _where(origin: str | None, message: str) -> str:
    return message if origin is None else f"{origin}: {message}"
