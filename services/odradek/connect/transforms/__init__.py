"""Single message transforms (SMTs) with Kafka's class names and config keys.

A transform is configured once with its prefix-stripped properties (``transforms.<alias>.*``
without the prefix) and then applied to every record of one task, from that task's thread:
``apply(record)`` returns the changed record, the same record, or ``None`` to drop it. A transform
never mutates the record it is given (records are frozen; values are copied before a change).
Data that a transform cannot handle raises ``DataError`` naming the transform and what it found;
the runtime routes it through ``errors.tolerance``.

``Key``/``Value`` variants (Kafka's ``InsertField$Key``/``$Value``) are two classes here
(``InsertFieldKey``/``InsertFieldValue``); ``KAFKA_NAME`` holds the name Kafka gives them, which
is also their entry point name.

Modules: ``insert_field``, ``replace_field``, ``mask_field``, ``routers`` (TimestampRouter,
RegexRouter), ``filter``, and ``chain`` (a connector's transforms with their predicates).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from odradek.connect.api import ConfigDef, ConnectRecord


@runtime_checkable
class Transform(Protocol):
    def config(self) -> ConfigDef: ...

    def configure(self, props: Mapping[str, str]) -> None: ...

    def apply(self, record: ConnectRecord) -> ConnectRecord | None: ...

    def close(self) -> None: ...


def builtin_transforms() -> dict[str, type]:
    """Kafka's name -> class, for the built-in transforms (the entry points list the same)."""
    from odradek.connect.transforms.filter import Filter
    from odradek.connect.transforms.insert_field import InsertFieldKey, InsertFieldValue
    from odradek.connect.transforms.mask_field import MaskFieldKey, MaskFieldValue
    from odradek.connect.transforms.replace_field import ReplaceFieldKey, ReplaceFieldValue
    from odradek.connect.transforms.routers import RegexRouter, TimestampRouter

    classes = (
        InsertFieldKey,
        InsertFieldValue,
        ReplaceFieldKey,
        ReplaceFieldValue,
        MaskFieldKey,
        MaskFieldValue,
        TimestampRouter,
        RegexRouter,
        Filter,
    )
    return {c.KAFKA_NAME: c for c in classes}
