"""The replication throttle keys parse and refuse as Kafka's do, and each broker reads its own."""

from __future__ import annotations

import pytest

from odradek.config.throttle import (
    DYNAMIC_BROKER_KEYS,
    UNTHROTTLED_RATE,
    ThrottleRates,
    check_dynamic_broker_config,
    lists_replica,
    throttled_partitions,
)
from odradek.config.topic import CONFIG_KEYS, TopicConfig, alter_overrides
from odradek.errors import ErrorCode, InvalidConfigError

LEADER = "leader.replication.throttled.replicas"
FOLLOWER = "follower.replication.throttled.replicas"
KAFKA_FORMAT = (
    "must be the literal '*' or a list of replicas in the following format: "
    "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
)


def test_the_topic_keys_are_kafkas_lists_with_an_empty_default():
    for name in (LEADER, FOLLOWER):
        key = CONFIG_KEYS[name]
        assert (key.type.name, key.to_string(key.parse(key.default))) == ("LIST", "")
    assert TopicConfig().leader_replication_throttled_replicas == ()


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("0:1,1:2", "0:1,1:2"),
        (" 0:1 , 12:345 ", "0:1,12:345"),
        ("*", "*"),
        ("", ""),
        ("0:1,,1:2", "0:1,,1:2"),  # Kafka's validator lets empty elements through
    ],
)
def test_valid_lists_are_taken_and_printed_back(value, stored):
    overrides, config = alter_overrides({}, set_={LEADER: value})
    assert overrides == {LEADER: stored}
    assert TopicConfig.from_properties(overrides) == config


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        ("0:1,x", "[0:1, x]"),
        ("0-1", "[0-1]"),
        ("*,0:1", "[*, 0:1]"),
        ("0:1:2", "[0:1:2]"),
        ("-1:2", "[-1:2]"),
    ],
)
def test_invalid_lists_get_kafkas_message(value, printed):
    with pytest.raises(InvalidConfigError) as refused:
        TopicConfig.from_properties({FOLLOWER: value})
    assert (
        str(refused.value)
        == f"Invalid value {printed} for configuration {FOLLOWER}: {FOLLOWER} {KAFKA_FORMAT}"
    )
    assert refused.value.error_code == ErrorCode.invalid_config


def test_a_broker_reads_only_the_replicas_that_name_it():
    replicas = ("0:1", "1:2", "2:1", "")
    assert throttled_partitions(replicas, 1) == {0, 2}
    assert throttled_partitions(replicas, 2) == {1}
    assert throttled_partitions(replicas, 3) == frozenset()
    assert throttled_partitions(("*",), 7) is None
    assert lists_replica(("*",), 99, 7)
    assert lists_replica(replicas, 2, 1) and not lists_replica(replicas, 1, 1)
    assert not lists_replica((), 0, 1)


def test_the_dynamic_keys_are_the_two_rates_unthrottled_by_default():
    assert set(DYNAMIC_BROKER_KEYS) == {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
    }
    for key in DYNAMIC_BROKER_KEYS.values():
        assert (key.type.name, key.default, key.minimum) == ("LONG", 2**63 - 1, 0)
    assert ThrottleRates() == ThrottleRates(UNTHROTTLED_RATE, UNTHROTTLED_RATE)


def test_a_brokers_own_rate_wins_over_the_default():
    own = {"leader.replication.throttled.rate": "100"}
    default = {
        "leader.replication.throttled.rate": "5",
        "follower.replication.throttled.rate": "7",
    }
    assert ThrottleRates.of(own, default) == ThrottleRates(100, 7)
    assert ThrottleRates.of({}, default) == ThrottleRates(5, 7)
    assert ThrottleRates.of(own, {}) == ThrottleRates(100, UNTHROTTLED_RATE)


def test_dynamic_broker_configs_are_checked_as_kafka_checks_them():
    assert check_dynamic_broker_config({"follower.replication.throttled.rate": " 1024 "}) == {
        "follower.replication.throttled.rate": "1024"
    }
    with pytest.raises(
        InvalidConfigError,
        match=r"^Cannot update these configs dynamically: "
        r"Set\(log\.retention\.ms, no\.such\.key\)",
    ):
        check_dynamic_broker_config(
            {"no.such.key": "1", "log.retention.ms": "1", "leader.replication.throttled.rate": "1"}
        )
    with pytest.raises(InvalidConfigError) as negative:
        check_dynamic_broker_config({"leader.replication.throttled.rate": "-1"})
    assert str(negative.value) == (
        "Invalid value -1 for configuration leader.replication.throttled.rate: "
        "Value must be at least 0"
    )
    with pytest.raises(InvalidConfigError, match="Not a number of type LONG"):
        check_dynamic_broker_config({"leader.replication.throttled.rate": str(2**63)})


def test_fetch_max_bytes_is_static_as_in_kafka():
    """fetch.max.bytes is read-only in Kafka; the broker reads it once at start, so it is
    refused at runtime rather than accepted and ignored."""
    with pytest.raises(InvalidConfigError, match=r"Set\(fetch\.max\.bytes\)"):
        check_dynamic_broker_config({"fetch.max.bytes": "1048576"})
