"""Small readers of a custom resource's fields, each naming the field it reads, and the CRD facts
(bounds, defaults, enums) the spec modules check against.

Every reader raises ``SpecError(field, message)``, where ``field`` is the path a user would look
at (``spec.brokers.config[min.insync.replicas]``). Bounds, defaults and enums are looked up in
the CRDs' schemas (model/crds.py) with :func:`crd_range`, :func:`crd_default`, :func:`crd_enum`
and :func:`crd_fact`: the schema is the one place they are stated, so what the API server refuses
or fills in and what the operator refuses or assumes cannot drift apart
(tests/unit/operator/model/test_model_spec_schema.py walks the schemas to keep it so).

The readers are shared by the spec modules of this package and by model/connect.py,
model/connect_security.py and model/users.py. Immutable, no I/O: any thread may call them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from odradek_operator.model import crds

__all__ = [
    "SpecError",
    "crd_default",
    "crd_enum",
    "crd_fact",
    "crd_range",
]


class SpecError(ValueError):
    """A custom resource's spec the operator refuses; ``field`` names where, ``message`` why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def crd_fact(kind: str, path: str, fact: str) -> Any:
    """One keyword (``default``, ``maximum``, ``maxItems``...) of the field ``path`` of ``kind``'s
    schema, e.g. ``spec.brokers.storage.volumes[].id`` (``[]``: a list's items; see
    :func:`crds.spec_field`). KeyError if the schema does not state it."""
    return crds.spec_field(kind, path)[fact]


def crd_range(kind: str, path: str) -> tuple[int, int]:
    """The ``minimum`` and ``maximum`` of an integer field."""
    return crd_fact(kind, path, "minimum"), crd_fact(kind, path, "maximum")


def crd_default(kind: str, path: str) -> Any:
    """The ``default`` the API server writes when the field is absent."""
    return crd_fact(kind, path, "default")


def crd_enum(kind: str, path: str) -> tuple[Any, ...]:
    """The values the field may take, in the schema's order."""
    return tuple(crd_fact(kind, path, "enum"))


_QUANTITY = re.compile(
    r"\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?"
)
_ABSENT = object()  # a default meaning "required"


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(where, f"expected an object, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    kinds = {
        type(None): "null",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }
    return kinds.get(type(value), type(value).__name__)


def _only(section: Mapping[str, Any], where: str, known: tuple[str, ...]) -> None:
    for key in section:
        if key not in known:
            raise SpecError(f"{where}.{key}", f"unknown field (known: {', '.join(known)})")


def _int(
    section: Mapping[str, Any], key: str, where: str, default: object, low: int, high: int
) -> int:
    value = section.get(key, default)
    path = f"{where}.{key}"
    if value is _ABSENT:
        raise SpecError(path, "required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(path, f"expected an integer, got {_kind(value)}")
    if not low <= value <= high:
        raise SpecError(path, f"{value} is out of range: must be from {low} to {high}")
    return value


def _str(section: Mapping[str, Any], key: str, where: str, default: str | None) -> str | None:
    value = section.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where}.{key}", f"expected a non-empty string, got {value!r}")
    return value.strip()


def _bool(section: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(f"{where}.{key}", f"expected true or false, got {value!r}")
    return value


def _quantity(section: Mapping[str, Any], key: str, where: str, default: str) -> str:
    value = section.get(key, default)
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not _QUANTITY.fullmatch(text):
        raise SpecError(f"{where}.{key}", f"{value!r} is not a quantity such as 10Gi")
    return text


def _as_property(value: object, where: str) -> str:
    """A YAML value as the text a properties file (or ``--override``) would carry."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value.bit_length() > 64:
        # No config key holds it; and str() of an integer of more than 4300 digits raises.
        raise SpecError(where, f"an integer of {value.bit_length()} bits is out of range")
    if isinstance(value, int | float | str):
        return str(value)
    raise SpecError(where, f"expected a string, number or boolean, got {_kind(value)}")


def _close(key: str, known: Mapping[str, object]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    return f" (did you mean {close[0]}?)" if close else ""
