"""Topic configuration has Kafka's keys, defaults, parsing and error messages, and round-trips."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from odradek.config.topic import (
    CONFIG_KEYS,
    DEFAULT_TOPIC_CONFIG,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    ConfigKey,
    ConfigSource,
    ConfigType,
    TopicConfig,
    alter_overrides,
    validate_alteration,
)
from odradek.errors import ErrorCode, InvalidConfigError

# Copied from Kafka 3.x's documentation of topic-level configs.
KAFKA_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "9223372036854775807",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}


def test_defaults_equal_kafkas():
    assert TopicConfig().to_properties() == KAFKA_DEFAULTS
    assert TopicConfig.from_properties({}) == DEFAULT_TOPIC_CONFIG == TopicConfig()
    config = DEFAULT_TOPIC_CONFIG
    assert config.segment_bytes == 1073741824
    assert config.cleanup_policy == ("delete",)
    assert config.delete and not config.compact and not config.log_append_time
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.preallocate is False


def test_attribute_names_are_kafka_names_with_underscores():
    names = [f.name for f in dataclasses.fields(TopicConfig)]
    assert names == [name.replace(".", "_") for name in KAFKA_DEFAULTS]


def test_strings_are_parsed_as_kafka_parses_them():
    config = TopicConfig.from_properties(
        {
            "segment.bytes": " 1024 ",
            "retention.ms": "-1",
            "retention.bytes": "+5000",
            "preallocate": "TRUE",
            "unclean.leader.election.enable": "False",
            "cleanup.policy": " compact , delete ",
            "min.cleanable.dirty.ratio": ".25",
            "message.timestamp.type": "LogAppendTime",
            "compression.type": " zstd",
        }
    )
    assert config.segment_bytes == 1024
    assert config.retention_ms == -1
    assert config.retention_bytes == 5000
    assert config.preallocate is True
    assert config.unclean_leader_election_enable is False
    assert config.cleanup_policy == ("compact", "delete")
    assert config.compact and config.delete
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.log_append_time
    assert config.compression_type == "zstd"


def test_typed_values_are_accepted():
    config = TopicConfig.from_properties(
        {
            "segment.bytes": 1024,
            "preallocate": True,
            "cleanup.policy": ["compact"],
            "min.cleanable.dirty.ratio": 1,
        }
    )
    assert config == TopicConfig(
        segment_bytes=1024,
        preallocate=True,
        cleanup_policy=("compact",),
        min_cleanable_dirty_ratio=1.0,
    )


def test_empty_cleanup_policy_is_allowed_as_in_kafka_3():
    config = TopicConfig.from_properties({"cleanup.policy": ""})
    assert config.cleanup_policy == ()
    assert not config.compact and not config.delete


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "segment.bytes",
            "-5",
            "Invalid value -5 for configuration segment.bytes: Value must be at least 14",
        ),
        ("segment.bytes", "13", "Value must be at least 14"),
        ("segment.bytes", "1.5", "Not a number of type INT"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("segment.bytes", 2**31, "Not a number of type INT"),
        ("segment.bytes", 1024.0, "Expected a value of type INT"),
        ("segment.bytes", True, "Expected a value of type INT"),
        ("segment.bytes", "1_024", "Not a number of type INT"),
        ("segment.bytes", "", "Not a number of type INT"),
        ("segment.index.bytes", "3", "Value must be at least 4"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("retention.ms", "9223372036854775808", "Not a number of type LONG"),
        ("retention.bytes", "lots", "Not a number of type LONG"),
        ("segment.ms", "0", "Value must be at least 1"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("max.compaction.lag.ms", "0", "Value must be at least 1"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("delete.retention.ms", "-1", "Value must be at least 0"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "-0.1", "Value must be at least 0"),
        ("min.cleanable.dirty.ratio", "NaN", "Not a number of type DOUBLE"),
        ("min.cleanable.dirty.ratio", float("nan"), "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("preallocate", 1, "Expected a value of type BOOLEAN"),
        (
            "compression.type",
            "brotli",
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        ("compression.type", "GZIP", "String must be one of"),
        (
            "message.timestamp.type",
            "createtime",
            "String must be one of: CreateTime, LogAppendTime",
        ),
        (
            "cleanup.policy",
            "compact,compct",
            "Invalid value compct for configuration "
            "cleanup.policy: String must be one of: "
            "compact, delete",
        ),
        ("cleanup.policy", [1], "Expected a value of type LIST"),
    ],
)
def test_invalid_values_name_the_key_and_the_value(name, value, message):
    with pytest.raises(InvalidConfigError) as raised:
        TopicConfig.from_properties({name: value})
    assert message in str(raised.value)
    assert name in str(raised.value)
    assert raised.value.error_code is ErrorCode.invalid_config


def test_unknown_key():
    with pytest.raises(InvalidConfigError, match="^Unknown topic config name: segmnt.bytes$"):
        TopicConfig.from_properties({"segment.bytes": "-5", "segmnt.bytes": "1024"})


def test_min_compaction_lag_above_max_is_a_conflict():
    with pytest.raises(InvalidConfigError, match=r"min.compaction.lag.ms \(10\) > "):
        TopicConfig.from_properties({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_building_by_hand_validates_and_the_result_is_frozen():
    with pytest.raises(InvalidConfigError, match="segment.bytes"):
        TopicConfig(segment_bytes=1)
    config = TopicConfig(segment_bytes=100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.segment_bytes = 1  # type: ignore[misc]
    assert hash(config) == hash(TopicConfig(segment_bytes="100"))


def test_properties_round_trip():
    config = TopicConfig.from_properties(
        {
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.1",
            "segment.bytes": "1024",
            "preallocate": "true",
        }
    )
    props = config.to_properties()
    assert props["cleanup.policy"] == "compact,delete"
    assert props["preallocate"] == "true"
    assert props["min.cleanable.dirty.ratio"] == "0.1"
    assert TopicConfig.from_properties(props) == config


def test_overrides_are_the_keys_that_differ_from_base():
    config = TopicConfig.from_properties({"segment.bytes": "1024", "retention.ms": "604800000"})
    assert config.overrides() == {"segment.bytes": "1024"}
    base = TopicConfig(retention_ms=1000)
    assert config.overrides(base) == {"segment.bytes": "1024", "retention.ms": "604800000"}
    assert TopicConfig.from_properties(config.overrides(base), base) == config
    assert TopicConfig.from_properties({"retention.ms": "5"}, base).segment_bytes == 1073741824


def test_describe_reports_value_source_type_and_documentation():
    config = TopicConfig.from_properties({"segment.bytes": "1024"})
    entries = {e.name: e for e in config.describe({"segment.bytes"})}
    assert list(entries) == list(KAFKA_DEFAULTS)
    assert entries["segment.bytes"].value == "1024"
    assert entries["segment.bytes"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert not entries["segment.bytes"].is_default
    assert entries["retention.ms"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["retention.ms"].is_default
    assert entries["cleanup.policy"].type is ConfigType.LIST
    assert all(e.documentation for e in entries.values())


def test_incremental_alteration_sets_and_deletes_back_to_default():
    current = TopicConfig.from_properties({"retention.ms": "1000", "segment.bytes": "2048"})
    altered = validate_alteration(current, {"segment.ms": "60000"}, ["retention.ms"])
    assert altered.retention_ms == 604800000
    assert altered.segment_bytes == 2048
    assert altered.segment_ms == 60000
    assert altered.overrides() == {"segment.bytes": "2048", "segment.ms": "60000"}


def test_incremental_alteration_appends_and_subtracts_list_values():
    current = DEFAULT_TOPIC_CONFIG
    both = validate_alteration(current, append={"cleanup.policy": "compact,delete"})
    assert both.cleanup_policy == ("delete", "compact")
    compact = validate_alteration(both, subtract={"cleanup.policy": "delete"})
    assert compact.cleanup_policy == ("compact",)
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        validate_alteration(current, append={"retention.ms": "5"})


def test_incremental_alteration_rejects_bad_input_and_changes_nothing():
    current = TopicConfig(segment_bytes=2048)
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: retention"):
        validate_alteration(current, {}, ["retention"])
    with pytest.raises(InvalidConfigError, match="segment.bytes"):
        validate_alteration(current, {"segment.bytes": "4096"}, ["segment.bytes"])
    with pytest.raises(InvalidConfigError, match="Invalid value 0 for configuration segment.ms"):
        validate_alteration(current, {"segment.ms": "0", "retention.ms": "1"})
    assert current == TopicConfig(segment_bytes=2048)


def test_alter_overrides_works_on_what_zookeeper_stores():
    stored = {"retention.ms": "1000", "preallocate": "TRUE"}
    new, config = alter_overrides(
        stored,
        set_={"retention.ms": "604800000"},
        delete=["preallocate"],
        append={"cleanup.policy": "compact"},
    )
    # An override equal to the default stays an override, as in Kafka.
    assert new == {"retention.ms": "604800000", "cleanup.policy": "delete,compact"}
    assert config == TopicConfig(cleanup_policy=("delete", "compact"))
    assert stored == {"retention.ms": "1000", "preallocate": "TRUE"}


def _valid_value(key: ConfigKey) -> st.SearchStrategy:
    if key.type is ConfigType.BOOLEAN:
        return st.booleans()
    if key.type in (ConfigType.INT, ConfigType.LONG):
        low, high = (INT_MIN, INT_MAX) if key.type is ConfigType.INT else (LONG_MIN, LONG_MAX)
        return st.integers(low if key.minimum is None else key.minimum, high)
    if key.type is ConfigType.DOUBLE:
        return st.floats(key.minimum, key.maximum, allow_nan=False)
    if key.type is ConfigType.LIST and not key.choices:  # *.replication.throttled.replicas
        replica = st.builds("{}:{}".format, st.integers(0, 99), st.integers(0, 99))
        return st.one_of(st.just(("*",)), st.lists(replica, max_size=3).map(tuple))
    if key.type is ConfigType.LIST:
        return st.lists(st.sampled_from(key.choices), max_size=3).map(tuple)
    return st.sampled_from(key.choices)


@st.composite
def valid_properties(draw) -> dict[str, object]:
    props = draw(
        st.fixed_dictionaries(
            {}, optional={name: _valid_value(key) for name, key in CONFIG_KEYS.items()}
        )
    )
    as_strings = draw(st.booleans())
    return {
        name: CONFIG_KEYS[name].to_string(value) if as_strings else value
        for name, value in props.items()
    }


@given(valid_properties())
def test_any_valid_properties_round_trip(props):
    try:
        config = TopicConfig.from_properties(props)
    except InvalidConfigError as e:
        assume("conflict" not in str(e))
        raise
    assert TopicConfig.from_properties(config.to_properties()) == config
    assert TopicConfig.from_properties(config.overrides()) == config
    for name, value in props.items():
        key = CONFIG_KEYS[name]
        assert getattr(config, key.attr) == key.parse(value)


def test_an_integer_too_long_for_python_is_not_a_number_of_its_type():
    # int() refuses strings of more than 4300 digits with a ValueError: it must be Kafka's error.
    row = CONFIG_KEYS["retention.ms"]
    with pytest.raises(InvalidConfigError, match="Not a number of type LONG") as e:
        row.parse("9" * 5000)
    assert len(str(e.value)) < 300
    with pytest.raises(InvalidConfigError, match="Not a number of type LONG"):
        row.parse(10**5000)
