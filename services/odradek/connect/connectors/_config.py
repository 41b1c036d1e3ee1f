"""Validators shared by the shipped connectors' ConfigDefs (``validator(name, value)``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.connect.api import ConfigException

Validator = Callable[[str, Any], None]


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value not in allowed:
            raise ConfigException(name, f"{value!r} is not one of {', '.join(allowed)}")

    return check


def at_least(low: int) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < low:
            raise ConfigException(name, f"{value} is below the minimum {low}")

    return check


def non_empty(name: str, value: Any) -> None:
    if not value:
        raise ConfigException(name, "must not be empty")


def version() -> str:
    """The installed odradek's version: what the shipped connectors report."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("odradek")
    except PackageNotFoundError:
        return "unknown"
