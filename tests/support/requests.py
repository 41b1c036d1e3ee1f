"""``fill``: a kio request of any API and version from the fields a test cares about.

Fields the test does not give and the schema gives no default are set to a zero of their type
("" for strings, 0 for numbers, False, an empty array, None where nullable), so a test names
only what it means. Nested entries are built with ``fill`` too (``entry_type`` finds their class).
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

from odradek.protocol import schemas

__all__ = ["entry_type", "fill", "request"]


def _zero(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        return None
    if origin is tuple:
        return ()
    base = getattr(annotation, "__supertype__", annotation)  # NewType
    while hasattr(base, "__supertype__"):
        base = base.__supertype__
    if isinstance(base, type):
        if issubclass(base, bool):
            return False
        if issubclass(base, int):
            return 0
        if issubclass(base, str):
            return ""
        if issubclass(base, bytes):
            return b""
        if issubclass(base, datetime.timedelta):
            return datetime.timedelta(0)
        if issubclass(base, uuid.UUID):
            return uuid.UUID(int=0)
    raise TypeError(f"no zero for {annotation!r}")


def fill(cls: type[Any], **given: Any) -> Any:
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in given:
            values[f.name] = given[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = _zero(hints[f.name])
    unknown = set(given) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)}")
    return cls(**values)


def entry_type(cls: type[Any], *path: str) -> type[Any]:
    """The class of the entries of ``cls.path[0].path[1]...`` (arrays, nullable or not)."""
    for name in path:
        annotation = typing.get_type_hints(cls)[name]
        if typing.get_origin(annotation) in (types.UnionType, typing.Union):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        cls = typing.get_args(annotation)[0]
    return cls


def request(api_key: int, version: int, **given: Any) -> Any:
    return fill(schemas.request_schema(api_key, version), **given)
