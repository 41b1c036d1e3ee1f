"""``org.apache.kafka.connect.transforms.ReplaceField$Key`` / ``$Value``: keep, drop and rename
fields.

Config keys are Kafka's: ``include`` (only these fields; empty: all), ``exclude`` (never these;
wins over include), ``renames`` (``old:new`` pairs); the older names ``whitelist`` and
``blacklist`` are accepted for ``include`` and ``exclude``, as Kafka still does. Tombstones pass
unchanged. Works on maps (schemaless) and on structs, whose schema is rebuilt (field order kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.connect.api import ConfigDef, ConfigType, ConnectRecord, Importance
from odradek.connect.config_def import invalid
from odradek.connect.data import Schema
from odradek.connect.transforms.base import RecordTransform, struct_like

EXCLUDE = "exclude"
INCLUDE = "include"
RENAMES = "renames"
BLACKLIST = "blacklist"  # Kafka's deprecated name for exclude
WHITELIST = "whitelist"  # Kafka's deprecated name for include


def _check_renames(name: str, value: Any) -> None:
    for item in value or ():
        parts = item.split(":")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise invalid(name, value, f"Invalid rename mapping: {item}")


class _ReplaceField(RecordTransform):
    PURPOSE = "field replacement"

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                EXCLUDE,
                ConfigType.LIST,
                "",
                importance=Importance.MEDIUM,
                documentation="Fields to exclude. This takes precedence over the fields to "
                "include.",
            )
            .define(
                INCLUDE,
                ConfigType.LIST,
                "",
                importance=Importance.MEDIUM,
                documentation="Fields to include. If specified, only these fields will be used.",
            )
            .define(
                RENAMES,
                ConfigType.LIST,
                "",
                importance=Importance.MEDIUM,
                validator=_check_renames,
                documentation="Field rename mappings, as comma-separated old:new pairs.",
            )
            .define(
                BLACKLIST,
                ConfigType.LIST,
                None,
                importance=Importance.LOW,
                documentation=f"Deprecated. Use {EXCLUDE} instead.",
            )
            .define(
                WHITELIST,
                ConfigType.LIST,
                None,
                importance=Importance.LOW,
                documentation=f"Deprecated. Use {INCLUDE} instead.",
            )
        )

    def configure(self, props: Mapping[str, str]) -> None:
        parsed = self.config().parse(props)
        exclude = parsed[EXCLUDE] if EXCLUDE in props else (parsed[BLACKLIST] or [])
        include = parsed[INCLUDE] if INCLUDE in props else (parsed[WHITELIST] or [])
        self.exclude = frozenset(exclude)
        self.include = frozenset(include)
        self.renames = dict(item.split(":") for item in parsed[RENAMES])

    def keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def renamed(self, name: str) -> str:
        return self.renames.get(name, name)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            updated = {
                self.renamed(k): v for k, v in self.require_map(value).items() if self.keep(k)
            }
            return self.new_record(record, None, updated)
        struct = self.require_struct(schema, value)
        new_schema = self.updated_schema(schema, self._build)
        updated = {
            self.renamed(f.name): struct.get(f.name) for f in schema.fields if self.keep(f.name)
        }
        return self.new_record(record, new_schema, updated)

    def _build(self, schema: Schema) -> Schema:
        return struct_like(
            schema, [(self.renamed(f.name), f.schema) for f in schema.fields if self.keep(f.name)]
        )


class ReplaceFieldKey(_ReplaceField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.ReplaceField$Key"
    WHAT = "key"


class ReplaceFieldValue(_ReplaceField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.ReplaceField$Value"
    WHAT = "value"
