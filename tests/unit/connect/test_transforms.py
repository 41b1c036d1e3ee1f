"""Every built-in SMT with and without schemas, the routers' Java syntaxes, predicates, negate."""

from __future__ import annotations

import datetime

import pytest

from odradek.connect.api import ConfigException, ConnectRecord, SinkRecord, SourceRecord
from odradek.connect.data import (
    INT32,
    INT64,
    OPTIONAL_STRING,
    STRING,
    TIMESTAMP,
    DataError,
    decimal_schema,
    struct,
    validate,
)
from odradek.connect.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from odradek.connect.transforms import builtin_transforms
from odradek.connect.transforms.chain import TransformationChain, TransformationStage
from odradek.connect.transforms.filter import Filter
from odradek.connect.transforms.insert_field import InsertFieldKey, InsertFieldValue
from odradek.connect.transforms.mask_field import MaskFieldValue
from odradek.connect.transforms.replace_field import ReplaceFieldValue
from odradek.connect.transforms.routers import RegexRouter, TimestampRouter

SCHEMA = struct(("id", INT32), ("name", STRING), ("email", OPTIONAL_STRING), name="person")
VALUE = {"id": 7, "name": "ann", "email": "a@x"}
TS = 1_700_000_000_123  # 2023-11-14T22:13:20.123Z


def _sink(schema=SCHEMA, value=VALUE, **kw) -> SinkRecord:
    return SinkRecord("orders", 2, None, None, schema, value, timestamp=TS, kafka_offset=42, **kw)


def _make(cls, **props):
    t = cls()
    t.configure(props)
    return t


def test_builtin_names_are_kafkas():
    names = set(builtin_transforms())
    assert "org.apache.kafka.connect.transforms.InsertField$Value" in names
    assert "org.apache.kafka.connect.transforms.Filter" in names
    assert len(names) == 9


def test_insert_field_with_schema_updates_the_schema():
    t = _make(
        InsertFieldValue,
        **{
            "topic.field": "t!",
            "partition.field": "p",
            "offset.field": "o",
            "timestamp.field": "ts",
            "static.field": "origin",
            "static.value": "db1",
        },
    )
    out = t.apply(_sink())
    names = [f.name for f in out.value_schema.fields]
    assert names == ["id", "name", "email", "t", "p", "o", "ts", "origin"]
    assert out.value_schema.name == "person"
    assert not out.value_schema.field("t").schema.optional
    assert out.value_schema.field("p").schema.optional
    assert out.value_schema.field("ts").schema.name == TIMESTAMP
    assert out.value["t"] == "orders" and out.value["p"] == 2 and out.value["o"] == 42
    assert out.value["ts"] == datetime.datetime(
        2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.UTC
    )
    assert out.value["origin"] == "db1"
    validate(out.value_schema, out.value)
    assert t.apply(_sink()).value_schema is out.value_schema  # cached


def test_insert_field_schemaless_key_and_tombstones():
    t = _make(InsertFieldKey, **{"topic.field": "t", "timestamp.field": "ts"})
    rec = SourceRecord("orders", None, None, {"k": 1}, None, None, timestamp=TS)
    out = t.apply(rec)
    assert out.key == {"k": 1, "t": "orders", "ts": TS}
    assert rec.key == {"k": 1}  # not mutated
    assert t.apply(rec.with_(key=None)).key is None
    with pytest.raises(DataError, match="Only Map objects"):
        t.apply(rec.with_(key="text"))
    with pytest.raises(DataError, match="SinkRecord"):
        _make(InsertFieldValue, **{"offset.field": "o"}).apply(rec.with_(value={}))


def test_replace_field_include_exclude_renames_and_old_names():
    t = _make(ReplaceFieldValue, exclude="email", renames="id:person_id,name:full_name")
    out = t.apply(_sink())
    assert [f.name for f in out.value_schema.fields] == ["person_id", "full_name"]
    assert out.value == {"person_id": 7, "full_name": "ann"}
    validate(out.value_schema, out.value)
    t2 = _make(ReplaceFieldValue, whitelist="id,email")
    assert t2.apply(_sink(None, dict(VALUE))).value == {"id": 7, "email": "a@x"}
    t3 = _make(ReplaceFieldValue, blacklist="id")
    assert t3.apply(_sink(None, dict(VALUE))).value == {"name": "ann", "email": "a@x"}
    with pytest.raises(ConfigException) as info:
        _make(ReplaceFieldValue, renames="a-b")
    assert info.value.name == "renames"


def test_mask_field_with_and_without_replacement():
    schema = struct(("id", INT32), ("name", STRING), ("n", INT64), ("price", decimal_schema(2)))
    value = {"id": 7, "name": "ann", "n": 5, "price": None}
    out = _make(MaskFieldValue, fields="id,name,price").apply(_sink(schema, value))
    assert out.value == {"id": 0, "name": "", "n": 5, "price": None}
    assert out.value_schema is schema
    out = _make(MaskFieldValue, fields="name,n", replacement="123").apply(_sink(schema, value))
    assert out.value["name"] == "123" and out.value["n"] == 123
    with pytest.raises(DataError, match="Unable to convert"):
        _make(MaskFieldValue, fields="n", replacement="xx").apply(_sink(schema, value))
    schemaless = _make(MaskFieldValue, fields="a,b,c").apply(
        _sink(None, {"a": 1.5, "b": True, "c": [1], "d": "keep"})
    )
    assert schemaless.value == {"a": 0.0, "b": False, "c": [], "d": "keep"}
    with pytest.raises(ConfigException) as info:
        _make(MaskFieldValue)
    assert info.value.name == "fields"


def test_timestamp_router_translates_java_patterns():
    rec = _sink()
    assert _make(TimestampRouter).apply(rec).topic == "orders-20231114"
    t = _make(
        TimestampRouter,
        **{
            "topic.format": "${topic}_${timestamp}",
            "timestamp.format": "yyyy-MM-dd'T'HH:mm:ss.SSS",
        },
    )
    assert t.apply(rec).topic == "orders_2023-11-14T22:13:20.123"
    assert (
        _make(TimestampRouter, **{"timestamp.format": "yy/MMM"}).apply(rec).topic == "orders-23/Nov"
    )
    with pytest.raises(ConfigException) as info:
        _make(TimestampRouter, **{"timestamp.format": "yyyy-ww"})
    assert info.value.name == "timestamp.format"
    with pytest.raises(DataError, match="Timestamp missing"):
        t.apply(rec.with_(timestamp=None))


def test_regex_router_uses_java_groups_and_whole_matches():
    t = _make(RegexRouter, regex="(.*)-(\\d+)", replacement="$1_v$2")
    assert t.apply(_sink().with_(topic="orders-12")).topic == "orders_v12"
    assert t.apply(_sink().with_(topic="orders")).topic == "orders"  # no match: unchanged
    prefix = _make(RegexRouter, regex="orders", replacement="x")
    assert (
        prefix.apply(_sink().with_(topic="orders-1")).topic == "orders-1"
    )  # matches(), not find()
    named = _make(RegexRouter, regex="(?<base>[a-z]+)\\.raw", replacement="${base}\\$clean")
    assert named.apply(_sink().with_(topic="events.raw")).topic == "events$clean"
    with pytest.raises(ConfigException) as info:
        _make(RegexRouter, regex="(", replacement="x")
    assert info.value.name == "regex"
    with pytest.raises(ConfigException) as info:
        _make(RegexRouter, regex="a")
    assert info.value.name == "replacement"


def test_predicates_and_negate_in_a_chain():
    tomb = _sink().with_(value=None)
    with_header = _sink(headers=(("trace", "1"),))
    assert _make(RecordIsTombstone).test(tomb)
    assert _make(HasHeaderKey, name="trace").test(with_header)
    assert not _make(HasHeaderKey, name="trace").test(_sink())
    matches = _make(TopicNameMatches, pattern="ord.*")
    assert matches.test(_sink()) and not matches.test(_sink().with_(topic="xorders"))
    drop_tombstones = TransformationChain(
        [TransformationStage("drop", Filter(), _make(RecordIsTombstone))]
    )
    assert drop_tombstones.apply(tomb) is None
    assert drop_tombstones.apply(_sink()) is not None
    keep_only_orders = TransformationChain(
        [TransformationStage("keep", Filter(), matches, negate=True)]
    )
    assert keep_only_orders.apply(_sink()) is not None
    assert keep_only_orders.apply(_sink().with_(topic="other")) is None
    with pytest.raises(ConfigException) as info:
        _make(TopicNameMatches, pattern="(")
    assert info.value.name == "pattern"
    keep_only_orders.close()


def test_chain_runs_in_order():
    chain = TransformationChain(
        [
            TransformationStage("route", _make(RegexRouter, regex="(.*)", replacement="x-$1")),
            TransformationStage("insert", _make(InsertFieldValue, **{"topic.field": "t"})),
        ]
    )
    out = chain.apply(ConnectRecord("a", None, None, None, None, {"v": 1}))
    assert out.topic == "x-a" and out.value == {"v": 1, "t": "x-a"}


def test_schemas_with_unhashable_defaults_are_transformed_uncached():
    from odradek.connect.data import Schema, Type

    tags = Schema(Type.ARRAY, optional=True, default=["x"], value_schema=STRING)
    schema = struct(("id", INT32), ("tags", tags))
    out = _make(ReplaceFieldValue, exclude="tags").apply(_sink(schema, {"id": 1, "tags": None}))
    assert out.value == {"id": 1} and [f.name for f in out.value_schema.fields] == ["id"]
