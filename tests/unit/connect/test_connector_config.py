"""The shared connector configuration: Kafka's keys and defaults, the transform chain and
converters it builds, sink topic rules, and the validate endpoint's ConfigInfos shape."""

from __future__ import annotations

import sys
import types

import pytest

from odradek.connect.api import (
    ConfigDef,
    ConfigException,
    ConfigType,
    ConnectRecord,
    Importance,
    SinkConnector,
    SourceConnector,
)
from odradek.connect.connector_config import ConnectorConfig, validate_connector_config
from odradek.connect.converters import JsonConverter, StringConverter
from odradek.connect.data import INT32, struct
from odradek.connect.plugins import CONNECTORS_GROUP, EntryPointSpec, Plugins, builtin_entry_points


class _Base:
    def config(self):
        return (
            ConfigDef()
            .define("file", ConfigType.STRING, importance=Importance.HIGH, group="File")
            .define("batch.size", ConfigType.INT, 2000, group="File")
            .define("password", ConfigType.PASSWORD, None, group="File")
        )

    def start(self, props):
        pass

    def task_class(self):
        return None

    def task_configs(self, max_tasks):
        return []

    def stop(self):
        pass


class FakeSourceConnector(_Base, SourceConnector):
    pass


class FakeSinkConnector(_Base, SinkConnector):
    pass


@pytest.fixture(scope="module")
def plugins():
    module = types.ModuleType("fake_cc_mod")
    module.FakeSourceConnector = FakeSourceConnector
    module.FakeSinkConnector = FakeSinkConnector
    sys.modules["fake_cc_mod"] = module
    yield Plugins(
        [
            EntryPointSpec(
                "org.example.FakeSourceConnector",
                "fake_cc_mod:FakeSourceConnector",
                CONNECTORS_GROUP,
            ),
            EntryPointSpec(
                "org.example.FakeSinkConnector", "fake_cc_mod:FakeSinkConnector", CONNECTORS_GROUP
            ),
            *builtin_entry_points(connectors=False),
        ],
        version="1",
    )
    del sys.modules["fake_cc_mod"]


def _sink(**extra):
    return {"name": "s", "connector.class": "FakeSink", "file": "/tmp/x", "topics": "a,b", **extra}


def test_defaults_are_kafkas(plugins):
    cfg = ConnectorConfig.parse(plugins, _sink())
    assert (
        cfg.kind == "sink"
        and cfg.tasks_max == 1
        and cfg.class_name == "org.example.FakeSinkConnector"
    )
    assert cfg.get("errors.tolerance") == "none" and not cfg.errors_tolerance_all
    assert cfg.get("errors.retry.timeout") == 0
    assert cfg.get("errors.retry.delay.max.ms") == 60000
    assert cfg.get("errors.deadletterqueue.topic.replication.factor") == 3
    assert cfg.topics == ["a", "b"] and cfg.dlq_topic is None
    src = ConnectorConfig.parse(
        plugins, {"name": "s", "connector.class": "FakeSourceConnector", "file": "f"}
    )
    assert src.kind == "source" and src.get("exactly.once.support") == "requested"
    assert src.get("transaction.boundary") == "poll"


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"connector.class": "FakeSink", "topics": "a", "file": "f"}, "name"),
        (_sink(**{"tasks.max": "0"}), "tasks.max"),
        (_sink(**{"errors.tolerance": "some"}), "errors.tolerance"),
        (_sink(topics=""), "topics"),
        (_sink(**{"topics.regex": "a.*"}), "topics"),
        (_sink(**{"errors.deadletterqueue.topic.name": "b"}), "errors.deadletterqueue.topic.name"),
        (_sink(**{"connector.class": "Nope"}), "connector.class"),
        (_sink(**{"plugin.path": "/x"}), "plugin.path"),
        (_sink(transforms="a"), "transforms.a.type"),
        (_sink(transforms="a", **{"transforms.a.type": "Nope"}), "transforms.a.type"),
        (_sink(transforms="a,a"), "transforms"),
        (
            _sink(
                transforms="r", **{"transforms.r.type": "RegexRouter", "transforms.r.regex": "x"}
            ),
            "transforms.r.replacement",
        ),
        (
            _sink(
                transforms="f",
                **{"transforms.f.type": "Filter", "transforms.f.predicate": "undefined"},
            ),
            "transforms.f.predicate",
        ),
        (_sink(**{"value.converter": "NoSuchConverter"}), "value.converter"),
        (
            _sink(**{"value.converter": "JsonConverter", "value.converter.schemas.enable": "x"}),
            "value.converter.schemas.enable",
        ),
        ({"name": "s", "connector.class": "FakeSink", "topics": "a"}, "file"),
    ],
)
def test_bad_configs_name_the_key(plugins, props, key):
    with pytest.raises(ConfigException) as info:
        ConnectorConfig.parse(plugins, props)
    assert info.value.name == key, str(info.value)


def test_transform_chain_with_predicates(plugins):
    cfg = ConnectorConfig.parse(
        plugins,
        _sink(
            transforms="dropTombstones,route,insert",
            predicates="isTombstone,isA",
            **{
                "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
                "transforms.dropTombstones.predicate": "isTombstone",
                "transforms.route.type": "RegexRouter",
                "transforms.route.regex": "(.*)",
                "transforms.route.replacement": "x-$1",
                "transforms.route.predicate": "isA",
                "transforms.route.negate": "true",
                "transforms.insert.type": "InsertField$Value",
                "transforms.insert.topic.field": "t",
                "predicates.isTombstone.type": "RecordIsTombstone",
                "predicates.isA.type": "TopicNameMatches",
                "predicates.isA.pattern": "a",
            },
        ),
    )
    chain = cfg.transformation_chain()
    assert len(chain) == 3
    assert chain.apply(ConnectRecord("a", 0, None, None, None, None)) is None
    out = chain.apply(ConnectRecord("a", 0, None, None, None, {"v": 1}))
    assert out.topic == "a" and out.value == {"v": 1, "t": "a"}
    out = chain.apply(ConnectRecord("b", 0, None, None, None, {"v": 1}))
    assert out.topic == "x-b" and out.value == {"v": 1, "t": "x-b"}
    chain.close()


def test_converters_with_prefixed_props_and_worker_fallback(plugins):
    cfg = ConnectorConfig.parse(
        plugins,
        _sink(**{"value.converter": "JsonConverter", "value.converter.schemas.enable": "false"}),
    )
    value = cfg.converter("value.converter")
    assert isinstance(value, JsonConverter) and not value.schemas_enable
    key = cfg.converter("key.converter", "org.apache.kafka.connect.storage.StringConverter", {})
    assert isinstance(key, StringConverter)
    assert cfg.converter("header.converter") is None
    with pytest.raises(ConfigException) as info:
        cfg.converter("key.converter", "JsonConverter", {"schemas.enable": "x"})
    assert info.value.name == "key.converter.schemas.enable"
    schema = struct(("id", INT32))
    assert value.to_connect("t", value.from_connect("t", schema, {"id": 1})).value == {"id": 1}


def test_client_overrides_pass_through(plugins):
    cfg = ConnectorConfig.parse(plugins, _sink(**{"consumer.override.max.poll.records": "10"}))
    assert cfg.client_overrides("consumer") == {"max.poll.records": "10"}


def _configs(result):
    return {c["definition"]["name"]: c for c in result["configs"]}


def test_validate_shape_for_a_good_config(plugins):
    result = validate_connector_config(
        plugins,
        _sink(
            password="secret",
            transforms="mask",
            **{
                "transforms.mask.type": "MaskField$Value",
                "transforms.mask.fields": "ssn",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
            },
        ),
    )
    assert result["name"] == "org.example.FakeSinkConnector"
    assert result["error_count"] == 0, [
        c["value"] for c in result["configs"] if c["value"]["errors"]
    ]
    assert set(result) == {"name", "error_count", "groups", "configs"}
    assert result["groups"][:2] == ["Common", "Transforms"]
    assert "Transforms: mask" in result["groups"] and "File" in result["groups"]
    configs = _configs(result)
    tasks_max = configs["tasks.max"]
    assert set(tasks_max["definition"]) == {
        "name",
        "type",
        "required",
        "default_value",
        "importance",
        "documentation",
        "group",
        "width",
        "display_name",
        "dependents",
        "order",
    }
    assert tasks_max["definition"]["default_value"] == "1"
    assert tasks_max["definition"]["type"] == "INT" and not tasks_max["definition"]["required"]
    assert tasks_max["value"] == {
        "name": "tasks.max",
        "value": "1",
        "recommended_values": [],
        "errors": [],
        "visible": True,
    }
    assert configs["name"]["definition"]["required"] is True
    assert configs["name"]["definition"]["default_value"] is None
    assert configs["topics"]["value"]["value"] == "a,b"
    assert configs["password"]["value"]["value"] == "[hidden]"
    assert configs["transforms.mask.fields"]["value"]["value"] == "ssn"
    assert configs["transforms.mask.type"]["definition"]["group"] == "Transforms: mask"
    assert configs["value.converter.schemas.enable"]["value"]["value"] == "false"
    assert "file" in configs and configs["batch.size"]["value"]["value"] == "2000"


def test_validate_reports_every_error(plugins):
    result = validate_connector_config(
        plugins,
        {
            "connector.class": "FakeSinkConnector",
            "tasks.max": "zero",
            "topics": "a",
            "topics.regex": "b",
            "transforms": "t",
            "transforms.t.type": "NoSuchTransform",
            "value.converter": "JsonConverter",
            "value.converter.schemas.enable": "perhaps",
            "unknown.key": "1",
        },
    )
    configs = _configs(result)
    with_errors = {name for name, c in configs.items() if c["value"]["errors"]}
    assert {
        "name",
        "tasks.max",
        "topics",
        "topics.regex",
        "transforms.t.type",
        "file",
        "value.converter.schemas.enable",
        "unknown.key",
    } <= with_errors
    assert result["error_count"] >= len(with_errors)
    assert "NoSuchTransform" in configs["transforms.t.type"]["value"]["errors"][0]


def test_validate_without_a_connector_class_is_a_config_exception(plugins):
    with pytest.raises(ConfigException) as info:
        validate_connector_config(plugins, {"name": "x"})
    assert info.value.name == "connector.class"
