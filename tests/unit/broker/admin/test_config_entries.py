"""DescribeConfigs rows: values, sources and synonyms as Kafka reports them."""

from __future__ import annotations

import pytest

from odradek.broker.admin.config_entries import (
    ConfigSynonym,
    Source,
    broker_keys_set,
    describe_broker_config,
    describe_topic_config,
)
from odradek.config.broker import BROKER_KEYS, BrokerConfig
from odradek.config.keys import ConfigType
from odradek.config.topic import CONFIG_KEYS, TopicConfig


@pytest.fixture
def broker(tmp_path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "broker.id": "1",
            "zookeeper.connect": "127.0.0.1:2181",
            "log.dirs": str(tmp_path),
            "log.retention.hours": "48",
            "compression.type": "producer",  # set, but to its default: reads as a default
        }
    )


def rows_by_name(rows):
    return {row.name: row for row in rows}


def test_topic_rows_say_where_each_value_comes_from(broker):
    config = TopicConfig.from_properties({"segment.bytes": "1048576"}, broker.topic_defaults())
    rows = rows_by_name(
        describe_topic_config(config, {"segment.bytes": "1048576"}, broker, include_synonyms=True)
    )
    assert list(rows) == list(CONFIG_KEYS)
    segment = rows["segment.bytes"]
    assert (segment.value, segment.source, segment.read_only) == (
        "1048576",
        Source.DYNAMIC_TOPIC_CONFIG,
        False,
    )
    assert segment.synonyms == (
        ConfigSynonym("segment.bytes", "1048576", Source.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.segment.bytes", "1073741824", Source.DEFAULT_CONFIG),
    )
    retention = rows["retention.ms"]
    assert (retention.value, retention.source) == ("172800000", Source.STATIC_BROKER_CONFIG)
    assert retention.synonyms == (
        ConfigSynonym("log.retention.hours", "48", Source.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", Source.DEFAULT_CONFIG),
    )
    compression = rows["compression.type"]
    assert (compression.value, compression.source) == ("producer", Source.DEFAULT_CONFIG)
    assert rows["cleanup.policy"].config_type == ConfigType.LIST
    assert rows["cleanup.policy"].documentation is None


def test_topic_rows_without_a_broker_config_are_kafkas_defaults():
    rows = rows_by_name(
        describe_topic_config(TopicConfig(), {}, None, keys={"retention.ms", "nope"})
    )
    assert list(rows) == ["retention.ms"]
    row = rows["retention.ms"]
    assert (row.value, row.source, row.synonyms) == ("604800000", Source.DEFAULT_CONFIG, ())


def test_documentation_only_when_asked(broker):
    rows = describe_topic_config(TopicConfig(), {}, broker, include_documentation=True)
    assert all(row.documentation == CONFIG_KEYS[row.name].doc for row in rows)


def test_broker_rows_are_read_only_and_static_when_set(broker):
    rows = rows_by_name(describe_broker_config(broker, include_synonyms=True))
    assert list(rows) == list(BROKER_KEYS)
    assert all(row.read_only for row in rows.values())
    assert (rows["broker.id"].value, rows["broker.id"].source) == ("1", Source.STATIC_BROKER_CONFIG)
    hours = rows["log.retention.hours"]
    assert (hours.value, hours.source) == ("48", Source.STATIC_BROKER_CONFIG)
    assert hours.synonyms[-1] == ConfigSynonym("log.retention.hours", "168", Source.DEFAULT_CONFIG)
    partitions = rows["num.partitions"]
    assert (partitions.value, partitions.source) == ("1", Source.DEFAULT_CONFIG)
    unset = rows["log.retention.ms"]
    assert (unset.value, unset.source, unset.synonyms) == (None, Source.DEFAULT_CONFIG, ())
    assert rows["listeners"].value == "PLAINTEXT://127.0.0.1:9092,CONTROL_PLANE://127.0.0.1:9091"
    assert rows["listeners"].source == Source.DEFAULT_CONFIG


def test_keys_set_are_those_that_differ_from_their_defaults(broker, tmp_path):
    assert set(broker_keys_set(broker)) == {
        "broker.id",
        "zookeeper.connect",
        "log.dirs",
        "log.retention.hours",
    }
    assert broker_keys_set(None) == {}
