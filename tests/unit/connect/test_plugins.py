"""Plugins resolve Kafka's full names, simple names, pruned names and Python paths; listing skips
a plugin that fails to import; an unknown class is a ConfigException naming the key."""

from __future__ import annotations

import sys
import types

import pytest

from odradek.connect.api import ConfigDef, ConfigException, SinkConnector, SourceConnector
from odradek.connect.converters import JsonConverter, StringConverter
from odradek.connect.plugins import (
    CONNECTORS_GROUP,
    EntryPointSpec,
    Plugins,
    PluginType,
    builtin_entry_points,
)
from odradek.connect.transforms.insert_field import InsertFieldValue


class _Source(SourceConnector):
    def version(self):
        return "1.2.3"

    def config(self):
        return ConfigDef()

    def start(self, props):
        pass

    def task_class(self):
        return None

    def task_configs(self, max_tasks):
        return []

    def stop(self):
        pass


class _Sink(SinkConnector):
    config = _Source.config
    start = _Source.start
    task_class = _Source.task_class
    task_configs = _Source.task_configs
    stop = _Source.stop


@pytest.fixture(scope="module")
def plugins():
    module = types.ModuleType("fake_plugins_mod")
    module.FileStreamSourceConnector = _Source
    module.JdbcSinkConnector = _Sink
    sys.modules["fake_plugins_mod"] = module
    eps = [
        EntryPointSpec(
            "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "fake_plugins_mod:FileStreamSourceConnector",
            CONNECTORS_GROUP,
        ),
        EntryPointSpec(
            "odradek.connect.connectors.sql.SqlSinkConnector",
            "fake_plugins_mod:JdbcSinkConnector",
            CONNECTORS_GROUP,
        ),
        EntryPointSpec(
            "io.confluent.connect.jdbc.JdbcSinkConnector",
            "fake_plugins_mod:JdbcSinkConnector",
            CONNECTORS_GROUP,
        ),
        EntryPointSpec("x.BrokenConnector", "no_such_module_xyz:Nope", CONNECTORS_GROUP),
        *builtin_entry_points(connectors=False),
    ]
    yield Plugins(eps, version="9.9")
    del sys.modules["fake_plugins_mod"]


@pytest.mark.parametrize(
    "name",
    [
        "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "FileStreamSourceConnector",
        "FileStreamSource",
        "fake_plugins_mod:FileStreamSourceConnector",
    ],
)
def test_connector_aliases(plugins, name):
    assert plugins.connector_class(name) is _Source


def test_an_alias_reports_the_class_it_stands_for(plugins):
    canonical = "odradek.connect.connectors.sql.SqlSinkConnector"
    assert plugins.class_name(CONNECTORS_GROUP, "JdbcSinkConnector") == canonical
    assert plugins.class_name(CONNECTORS_GROUP, "SqlSink") == canonical
    assert plugins.class_name(CONNECTORS_GROUP, "Unknown") == "Unknown"


def test_several_names_for_one_class(plugins):
    for name in (
        "JdbcSinkConnector",
        "JdbcSink",
        "SqlSink",
        "io.confluent.connect.jdbc.JdbcSinkConnector",
    ):
        assert plugins.connector_class(name) is _Sink


def test_other_plugin_kinds_resolve(plugins):
    assert plugins.converter_class("JsonConverter") is JsonConverter
    assert plugins.converter_class("org.apache.kafka.connect.storage.StringConverter") is (
        StringConverter
    )
    assert plugins.converter_class("String") is StringConverter
    assert isinstance(plugins.new_header_converter("SimpleHeaderConverter"), object)
    assert plugins.transform_class("InsertField$Value", "transforms.x.type") is InsertFieldValue
    assert plugins.predicate_class("RecordIsTombstone", "predicates.p.type")


def test_load_by_kind_for_the_runtime(plugins):
    assert plugins.load("connector", "FileStreamSource") is _Source
    assert plugins.load("converter", "JsonConverter") is JsonConverter
    assert plugins.load("header_converter", "SimpleHeaderConverter").__name__ == (
        "SimpleHeaderConverter"
    )
    assert plugins.load("transform", "InsertField$Value") is InsertFieldValue
    assert plugins.load("predicate", "RecordIsTombstone").__name__ == "RecordIsTombstone"
    with pytest.raises(ConfigException) as info:
        plugins.load("transform", "Nope", "transforms.x.type")
    assert info.value.name == "transforms.x.type"


def test_unknown_and_broken_plugins_name_the_key(plugins):
    with pytest.raises(ConfigException) as info:
        plugins.connector_class("NoSuchConnector")
    assert info.value.name == "connector.class"
    assert "NoSuchConnector" in str(info.value) and "FileStreamSourceConnector" in str(info.value)
    with pytest.raises(ConfigException, match="no_such_module_xyz"):
        plugins.connector_class("BrokenConnector")
    with pytest.raises(ConfigException) as info:
        plugins.transform_class("Nope", "transforms.a.type")
    assert info.value.name == "transforms.a.type"
    with pytest.raises(ConfigException):
        plugins.connector_class("JsonConverter")  # a converter is not a connector


def test_listing(plugins):
    listed = plugins.plugin_list_json()
    assert listed == [
        {
            "class": "odradek.connect.connectors.sql.SqlSinkConnector",
            "type": "sink",
            "version": "9.9",
        },
        {
            "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "type": "source",
            "version": "1.2.3",
        },
    ]
    everything = plugins.plugins(connectors_only=False)
    kinds = {(p.class_name, p.type) for p in everything}
    assert ("org.apache.kafka.connect.json.JsonConverter", PluginType.CONVERTER) in kinds
    assert ("org.apache.kafka.connect.json.JsonConverter", PluginType.HEADER_CONVERTER) in kinds
    assert ("org.apache.kafka.connect.transforms.Filter", PluginType.TRANSFORMATION) in kinds
    assert (
        "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        PluginType.PREDICATE,
    ) in kinds


def test_default_plugins_know_the_builtins_and_pyproject_registers_them():
    import tomllib
    from pathlib import Path

    installed = Plugins()
    assert installed.converter_class("JsonConverter") is JsonConverter
    assert installed.transform_class("InsertField$Value", "t") is InsertFieldValue
    listed = {(p.class_name, p.type) for p in installed.plugins(connectors_only=False)}
    assert ("org.apache.kafka.connect.transforms.Filter", PluginType.TRANSFORMATION) in listed
    pyproject = Path(__file__).parents[3] / "pyproject.toml"
    registered = tomllib.loads(pyproject.read_text())["project"]["entry-points"]
    for spec in builtin_entry_points():
        assert registered[spec.group][spec.name] == spec.value, spec
