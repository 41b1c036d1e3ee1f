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
            "compression.type": "producer",  # named at its default: still STATIC, as Kafka's
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
    assert (compression.value, compression.source) == ("producer", Source.STATIC_BROKER_CONFIG)
    assert compression.synonyms == (
        ConfigSynonym("compression.type", "producer", Source.STATIC_BROKER_CONFIG),
        ConfigSynonym("compression.type", "producer", Source.DEFAULT_CONFIG),
    )
    assert rows["min.insync.replicas"].source == Source.DEFAULT_CONFIG  # not named
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


def test_keys_set_are_those_named_whatever_their_values(broker, tmp_path):
    assert set(broker_keys_set(broker)) == {
        "broker.id",
        "zookeeper.connect",
        "log.dirs",
        "log.retention.hours",
        "compression.type",
    }
    assert broker_keys_set(None) == {}


def test_a_config_built_by_hand_has_set_the_keys_that_differ_from_their_defaults(tmp_path):
    by_hand = BrokerConfig(
        broker_id=1, zookeeper_connect="127.0.0.1:2181", log_dirs=str(tmp_path), num_partitions=1
    )
    assert set(broker_keys_set(by_hand)) == {"broker.id", "zookeeper.connect", "log.dirs"}


def test_a_key_named_by_an_override_at_its_default_is_static(tmp_path):
    # the local clusters of the tests name min.insync.replicas=1 (its default): Kafka describes
    # every topic's min.insync.replicas as STATIC_BROKER_CONFIG then, not as a default
    loaded = BrokerConfig.load(
        overrides={
            "broker.id": "1",
            "zookeeper.connect": "127.0.0.1:2181",
            "log.dirs": str(tmp_path),
            "min.insync.replicas": "1",
        }
    )
    assert loaded.named_keys == {
        "broker.id",
        "zookeeper.connect",
        "log.dirs",
        "min.insync.replicas",
    }
    rows = rows_by_name(
        describe_topic_config(TopicConfig(), {}, loaded, keys={"min.insync.replicas"})
    )
    assert (rows["min.insync.replicas"].value, rows["min.insync.replicas"].source) == (
        "1",
        Source.STATIC_BROKER_CONFIG,
    )
    assert loaded == BrokerConfig.from_properties(loaded.to_properties())  # names not compared
