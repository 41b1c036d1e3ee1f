"""``org.apache.kafka.connect.transforms.InsertField$Key`` / ``$Value``: add the record's topic,
partition, offset (sink records only), timestamp or a static value as fields.

Config keys are Kafka's: ``topic.field``, ``partition.field``, ``offset.field``,
``timestamp.field``, ``static.field``, ``static.value``. A field name ending in ``!`` is required
(the inserted field's schema is not optional), ``?`` or no suffix optional. Tombstones (a null key
or value) pass unchanged. Schemaless: the value must be a map; the timestamp is inserted as ms.
With a schema: the value must be a struct; the schema gains the fields (Timestamp logical type
for the timestamp).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from odradek.connect.api import ConfigDef, ConfigType, ConnectRecord, Importance, SinkRecord
from odradek.connect.data import (
    INT32,
    INT64,
    OPTIONAL_INT64,
    STRING,
    TIMESTAMP_SCHEMA,
    DataError,
    Schema,
    optional,
)
from odradek.connect.transforms.base import RecordTransform, struct_like

TOPIC_FIELD = "topic.field"
PARTITION_FIELD = "partition.field"
OFFSET_FIELD = "offset.field"
TIMESTAMP_FIELD = "timestamp.field"
STATIC_FIELD = "static.field"
STATIC_VALUE = "static.value"

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_SUFFIX_DOC = (
    " Suffix with ! to make this a required field, or ? to keep it optional (the default)."
)


def _spec(text: str | None) -> tuple[str, bool] | None:
    """A field name and whether it is required (``name!``) or optional (``name?``, ``name``)."""
    if not text:
        return None
    if text.endswith("!"):
        return text[:-1], False
    if text.endswith("?"):
        return text[:-1], True
    return text, True


class _InsertField(RecordTransform):
    PURPOSE = "field insertion"

    def config(self) -> ConfigDef:
        d = ConfigDef()
        for key, doc in (
            (TOPIC_FIELD, "Field name for Kafka topic."),
            (PARTITION_FIELD, "Field name for Kafka partition."),
            (OFFSET_FIELD, "Field name for Kafka offset - only applicable to sink connectors."),
            (TIMESTAMP_FIELD, "Field name for record timestamp."),
            (STATIC_FIELD, "Field name for static data field."),
        ):
            d.define(
                key,
                ConfigType.STRING,
                None,
                importance=Importance.MEDIUM,
                documentation=doc + _SUFFIX_DOC,
            )
        d.define(
            STATIC_VALUE,
            ConfigType.STRING,
            None,
            importance=Importance.MEDIUM,
            documentation="Static field value, if field name configured.",
        )
        return d

    def configure(self, props: Mapping[str, str]) -> None:
        parsed = self.config().parse(props)
        self.topic = _spec(parsed[TOPIC_FIELD])
        self.partition = _spec(parsed[PARTITION_FIELD])
        self.offset = _spec(parsed[OFFSET_FIELD])
        self.timestamp = _spec(parsed[TIMESTAMP_FIELD])
        self.static = _spec(parsed[STATIC_FIELD])
        self.static_value = parsed[STATIC_VALUE]

    def _inserts(self, record: ConnectRecord, with_schema: bool) -> list[tuple[Any, Schema, Any]]:
        """(spec, schema, value) of every field to insert, in Kafka's order."""
        out: list[tuple[Any, Schema, Any]] = []
        if self.topic:
            out.append((self.topic, STRING, record.topic))
        if self.partition:
            out.append((self.partition, INT32, record.partition))
        if self.offset:
            if not isinstance(record, SinkRecord):
                raise DataError(
                    f"{self.KAFKA_NAME}: Only SinkRecord supported for [{self.PURPOSE}] of "
                    f"{OFFSET_FIELD}, found: {type(record).__name__}"
                )
            out.append((self.offset, INT64, record.kafka_offset))
        if self.timestamp:
            ts = record.timestamp
            if with_schema and ts is not None:
                ts = _EPOCH + datetime.timedelta(milliseconds=ts)
            out.append((self.timestamp, TIMESTAMP_SCHEMA if with_schema else OPTIONAL_INT64, ts))
        if self.static:
            out.append((self.static, STRING, self.static_value))
        return out

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        inserts = self._inserts(record, schema is not None)
        if schema is None:
            updated = self.require_map(value)
            for (name, _), _, v in inserts:
                if v is not None:
                    updated[name] = v
            return self.new_record(record, None, updated)
        updated = self.require_struct(schema, value)
        new_schema = self.updated_schema(schema, lambda s: self._build(s, inserts))
        for (name, _), _, v in inserts:
            updated[name] = v
        return self.new_record(record, new_schema, updated)

    def _build(self, schema: Schema, inserts: list) -> Schema:
        fields = [(f.name, f.schema) for f in schema.fields]
        for (name, is_optional), field_schema, _ in inserts:
            fields.append((name, optional(field_schema) if is_optional else field_schema))
        return struct_like(schema, fields)


class InsertFieldKey(_InsertField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.InsertField$Key"
    WHAT = "key"


class InsertFieldValue(_InsertField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.InsertField$Value"
    WHAT = "value"
