"""What the shipped connectors share about configuration: their version, and the cross-key
checks reported by the validate endpoint next to the per-key ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from odradek.connect.api import ConfigException, ConfigValue


def version() -> str:
    """The installed odradek's version: what the shipped connectors report."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("odradek")
    except PackageNotFoundError:
        return "unknown"


def validate_with(
    values: list[ConfigValue], props: Mapping[str, str], parse: Callable[[Mapping[str, str]], Any]
) -> list[ConfigValue]:
    """``values`` (per-key validation) plus the error of ``parse``'s cross-key checks, on the
    key it names, when every key is fine on its own."""
    if any(v.errors for v in values):
        return values
    try:
        parse(props)
    except ConfigException as e:
        return [
            replace(v, errors=(*v.errors, e.message)) if v.name == e.name else v for v in values
        ]
    return values
