"""Kafka's ``sasl.jaas.config`` syntax: one login module, its control flag and its options.

As Kafka's ``JaasConfig`` reads it (a ``StreamTokenizer``)::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        user_alice="alice-secret" user_bob=bob-secret;

- a login module name (a word: letters, digits, ``.``, ``_``, ``-``, ``$``), then a control
  flag (``required``, ``requisite``, ``sufficient``, ``optional``, any case), then options
  ``name=value`` where a value is a word or a double-quoted string (``\\"`` and ``\\\\``
  escape inside it), then ``;``;
- ``//`` and ``/* */`` comments are skipped;
- a property holds exactly one login module (Kafka: "JAAS config property contains N login
  modules, should be 1 module"); an option given twice is refused (Kafka keeps the last one
  silently, which hides typos in a password list).

``parse`` returns a ``JaasEntry`` or raises ``JaasSyntaxError`` (a ``ValueError``) whose message
never contains an option's value: values are passwords. Pure: any thread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["CONTROL_FLAGS", "JaasEntry", "JaasSyntaxError", "parse"]

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<line_comment>//[^\n]*)
    | (?P<block_comment>/\*.*?\*/)
    | (?P<quoted>"(?:[^"\\]|\\.)*")
    | (?P<word>[A-Za-z0-9_.$-]+)
    | (?P<equals>=)
    | (?P<semicolon>;)
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


class JaasSyntaxError(ValueError):
    """A ``sasl.jaas.config`` value that Kafka's parser would refuse too."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    control_flag: str  # lower case, one of CONTROL_FLAGS
    options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:  # options hold passwords: never printed
        return f"JaasEntry({self.login_module} {self.control_flag}, options={sorted(self.options)})"


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise JaasSyntaxError(
                f"unexpected character {text[position]!r} at position {position} (a value with "
                f"other characters must be double-quoted)"
            )
        kind = match.lastgroup
        assert kind is not None
        position = match.end()
        if kind == "quoted":
            tokens.append(("value", _ESCAPE.sub(r"\1", match.group()[1:-1])))
        elif kind in ("word", "equals", "semicolon"):
            tokens.append((kind, match.group()))
    return tokens


def parse(text: str) -> JaasEntry:
    """The one login module of a ``sasl.jaas.config`` value; see the module."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "word":
            raise JaasSyntaxError("expected a login module name")
        module = tokens[i][1]
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "word":
            raise JaasSyntaxError(f"login module {module}: expected a control flag after it")
        flag = tokens[i + 1][1].lower()
        if flag not in CONTROL_FLAGS:
            raise JaasSyntaxError(
                f"login module {module}: invalid control flag {tokens[i + 1][1]!r} (one of "
                f"{', '.join(CONTROL_FLAGS)})"
            )
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(tokens):
                raise JaasSyntaxError(f"login module {module}: missing ';' at the end")
            kind, value = tokens[i]
            if kind == "semicolon":
                i += 1
                break
            if kind != "word":
                raise JaasSyntaxError(f"login module {module}: expected an option name")
            name = value
            if i + 2 >= len(tokens) or tokens[i + 1][0] != "equals":
                raise JaasSyntaxError(f"login module {module}: option {name} needs '=' and a value")
            if tokens[i + 2][0] not in ("word", "value"):
                raise JaasSyntaxError(f"login module {module}: option {name} has no value")
            if name in options:
                raise JaasSyntaxError(f"login module {module}: option {name} is given twice")
            options[name] = tokens[i + 2][1]
            i += 3
        entries.append(JaasEntry(module, flag, MappingProxyType(options)))
    if len(entries) != 1:
        raise JaasSyntaxError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]
