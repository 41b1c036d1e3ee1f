"""Predicates for conditional transforms, with Kafka's names
(``org.apache.kafka.connect.transforms.predicates.*``) and config keys.

- ``TopicNameMatches``: ``pattern`` (a regex, Java syntax) matches the whole topic name.
- ``HasHeaderKey``: the record has at least one header called ``name``.
- ``RecordIsTombstone``: the record's value is null.

Configured with ``predicates.<alias>.*`` without the prefix; ``test(record)`` is called from the
task's thread. ``transforms.<alias>.negate`` inverts a predicate (see ``transforms.chain``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from odradek.connect.api import ConfigDef, ConfigType, ConnectRecord, Importance
from odradek.connect.config_def import non_empty_string
from odradek.connect.transforms.routers import java_regex

PATTERN = "pattern"
NAME = "name"


@runtime_checkable
class Predicate(Protocol):
    def config(self) -> ConfigDef: ...

    def configure(self, props: Mapping[str, str]) -> None: ...

    def test(self, record: ConnectRecord) -> bool: ...

    def close(self) -> None: ...


class TopicNameMatches:
    KAFKA_NAME = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            PATTERN,
            ConfigType.STRING,
            importance=Importance.MEDIUM,
            validator=lambda name, value: (non_empty_string(name, value), java_regex(value, name)),
            documentation="A Java regular expression for matching against the name of a "
            "record's topic.",
        )

    def configure(self, props: Mapping[str, str]) -> None:
        self.pattern = java_regex(self.config().parse(props)[PATTERN], PATTERN)

    def test(self, record: ConnectRecord) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None

    def close(self) -> None:
        pass


class HasHeaderKey:
    KAFKA_NAME = "org.apache.kafka.connect.transforms.predicates.HasHeaderKey"

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            NAME,
            ConfigType.STRING,
            importance=Importance.MEDIUM,
            validator=non_empty_string,
            documentation="The header name.",
        )

    def configure(self, props: Mapping[str, str]) -> None:
        self.name = self.config().parse(props)[NAME]

    def test(self, record: ConnectRecord) -> bool:
        return any(key == self.name for key, _ in record.headers)

    def close(self) -> None:
        pass


class RecordIsTombstone:
    KAFKA_NAME = "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"

    def config(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, props: Mapping[str, str]) -> None:
        pass

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None

    def close(self) -> None:
        pass


def builtin_predicates() -> dict[str, type]:
    return {c.KAFKA_NAME: c for c in (TopicNameMatches, HasHeaderKey, RecordIsTombstone)}
