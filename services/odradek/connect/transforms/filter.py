"""``org.apache.kafka.connect.transforms.Filter``: drops every record it is applied to; used with
a predicate (``transforms.<alias>.predicate``) to drop only the records that match it."""

from __future__ import annotations

from collections.abc import Mapping

from odradek.connect.api import ConfigDef, ConnectRecord


class Filter:
    KAFKA_NAME = "org.apache.kafka.connect.transforms.Filter"

    def config(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, props: Mapping[str, str]) -> None:
        pass

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return None

    def close(self) -> None:
        pass
