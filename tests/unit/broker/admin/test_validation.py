"""Topic admin rules: Kafka's name, count, assignment and config checks, with Kafka's wording."""

from __future__ import annotations

import random

import pytest

from odradek.broker.admin.errors import (
    AdminRequestError,
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    ReassignmentInProgressError,
)
from odradek.broker.admin.validation import (
    PARTITIONS_MAX,
    BrokerDefaults,
    NewTopic,
    check_config_names,
    plan_new_partitions,
    plan_topic,
    topic_overrides,
    validate_topic_name,
)
from odradek.cluster.placement import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    PlacementError,
)
from odradek.config.broker import BrokerConfig
from odradek.config.topic import DEFAULT_TOPIC_CONFIG, TopicConfig
from odradek.errors import ErrorCode, InvalidConfigError
from odradek.zk.paths import TopicAssignment

BROKERS = {1: None, 2: None, 3: None}
DEFAULTS = BrokerDefaults(num_partitions=4, default_replication_factor=2)


@pytest.mark.parametrize("name", ["orders", "a", "A-b_c.d", "x" * 249, "__consumer_offsets"])
def test_legal_topic_names(name):
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is illegal, it can't be empty"),
        (".", 'Topic name cannot be "." or ".."'),
        ("..", 'Topic name cannot be "." or ".."'),
        ("x" * 250, "Topic name is illegal, it can't be longer than 249 characters, Topic name: "),
        ("a/b", 'Topic name "a/b" is illegal, it contains a character other than ASCII'),
        ("a b", 'Topic name "a b" is illegal'),
        ("café", 'Topic name "café" is illegal'),
        ("a\x00", "is illegal, it contains a character other than"),
    ],
)
def test_illegal_topic_names_are_invalid_topic_exception(name, message):
    with pytest.raises(InvalidTopicError) as raised:
        validate_topic_name(name)
    assert message in str(raised.value)
    assert raised.value.error_code == ErrorCode.invalid_topic_exception


def test_defaults_come_from_the_broker_for_minus_one():
    plan = plan_topic(NewTopic("t"), BROKERS, DEFAULTS, random.Random(1))
    assert sorted(plan.assignment) == [0, 1, 2, 3]
    assert plan.replication_factor == 2
    assert all(set(r) <= set(BROKERS) and len(set(r)) == 2 for r in plan.assignment.values())
    explicit = plan_topic(NewTopic("t", 6, 3), BROKERS, DEFAULTS, random.Random(1))
    assert (len(explicit.assignment), explicit.replication_factor) == (6, 3)


def test_broker_defaults_read_the_broker_config(tmp_path):
    config = BrokerConfig.from_properties(
        {
            "broker.id": "1",
            "zookeeper.connect": "127.0.0.1:2181",
            "log.dirs": str(tmp_path),
            "num.partitions": "7",
            "default.replication.factor": "3",
            "delete.topic.enable": "false",
            "log.retention.hours": "1",
        }
    )
    defaults = BrokerDefaults.of(config)
    assert defaults.num_partitions == 7
    assert defaults.default_replication_factor == 3
    assert defaults.delete_topic_enable is False
    assert defaults.topic_config.retention_ms == 3_600_000
    assert BrokerDefaults.of(None) == BrokerDefaults()


def test_replication_factor_above_the_live_brokers_is_refused():
    with pytest.raises(InvalidReplicationFactorError) as raised:
        plan_topic(NewTopic("t", 1, 4), BROKERS, DEFAULTS)
    assert str(raised.value) == "Replication factor: 4 larger than available brokers: 3."
    with pytest.raises(InvalidReplicationFactorError):
        plan_topic(NewTopic("t", 1, 1), {}, DEFAULTS)


@pytest.mark.parametrize("partitions", [0, -2])
def test_partition_counts_must_be_positive(partitions):
    with pytest.raises(InvalidPartitionsError) as raised:
        plan_topic(NewTopic("t", partitions, 1), BROKERS, DEFAULTS)
    assert str(raised.value) == "Number of partitions must be larger than 0."


def test_partition_count_is_bounded():
    with pytest.raises(InvalidPartitionsError):
        plan_topic(NewTopic("t", PARTITIONS_MAX + 1, 1), BROKERS, DEFAULTS)
    with pytest.raises(InvalidPartitionsError):
        plan_topic(NewTopic("t", 2**31 - 1, 1), BROKERS, DEFAULTS)


def test_replicas_per_topic_are_bounded():
    brokers = dict.fromkeys(range(1, 12))
    with pytest.raises(InvalidPartitionsError, match="make 110000 replicas, more than the 100000"):
        plan_topic(NewTopic("t", PARTITIONS_MAX, 11), brokers, DEFAULTS)
    with pytest.raises(InvalidPartitionsError, match="more than the 100000"):
        plan_new_partitions("t", TopicAssignment({0: tuple(range(1, 12))}), 10_000, None, brokers)


def test_an_assignment_must_fit_in_a_znode():
    brokers = dict.fromkeys(range(2_147_483_000, 2_147_483_020))  # ten-digit ids
    with pytest.raises(InvalidPartitionsError, match="more than a ZooKeeper node holds"):
        plan_topic(NewTopic("t", 5000, 20), brokers, DEFAULTS)


def test_racks_are_respected():
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    plan = plan_topic(NewTopic("t", 8, 2), racks, DEFAULTS, random.Random(3))
    for replicas in plan.assignment.values():
        assert {racks[b] for b in replicas} == {"a", "b"}


def test_some_brokers_without_a_rack_cannot_be_placed():
    with pytest.raises(PlacementError) as raised:
        plan_topic(NewTopic("t", 1, 1), {1: "a", 2: None}, DEFAULTS)
    assert raised.value.error_code == ErrorCode.unknown_server_error


def test_configs_are_validated_with_kafkas_wording_and_normalised():
    plan = plan_topic(
        NewTopic("t", 1, 1, configs=(("retention.ms", " 86400000 "), ("preallocate", "TRUE"))),
        BROKERS,
        DEFAULTS,
    )
    assert plan.overrides == {"preallocate": "true", "retention.ms": "86400000"}
    assert plan.config.retention_ms == 86_400_000
    with pytest.raises(InvalidConfigError) as raised:
        plan_topic(NewTopic("t", 1, 1, configs=(("retention.ms", "soon"),)), BROKERS, DEFAULTS)
    assert str(raised.value) == (
        "Invalid value soon for configuration retention.ms: Not a number of type LONG"
    )
    assert raised.value.error_code == ErrorCode.invalid_config
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: retention.msec"):
        plan_topic(NewTopic("t", 1, 1, configs=(("retention.msec", "1"),)), BROKERS, DEFAULTS)


def test_config_values_are_checked_against_the_brokers_defaults():
    base = TopicConfig(max_compaction_lag_ms=1000)
    with pytest.raises(InvalidConfigError, match="conflict topic config setting"):
        topic_overrides({"min.compaction.lag.ms": "5000"}, base)
    assert topic_overrides({}, DEFAULT_TOPIC_CONFIG) == ({}, DEFAULT_TOPIC_CONFIG)


def test_null_config_values_are_an_invalid_request():
    topic = NewTopic("t", 1, 1, configs=(("retention.ms", None), ("segment.ms", None)))
    with pytest.raises(AdminRequestError) as raised:
        plan_topic(topic, BROKERS, DEFAULTS)
    assert (
        str(raised.value) == "Null value not supported for topic configs : retention.ms,segment.ms"
    )


def test_assignments_exclude_counts():
    topic = NewTopic("t", 2, -1, assignments=((0, (1,)),))
    with pytest.raises(AdminRequestError, match="Both numPartitions or replicationFactor"):
        plan_topic(topic, BROKERS, DEFAULTS)


def test_a_manual_assignment_is_taken_as_given():
    topic = NewTopic("t", assignments=((1, (3, 1)), (0, (2, 3))))
    plan = plan_topic(topic, BROKERS, DEFAULTS)
    assert plan.assignment == {0: (2, 3), 1: (3, 1)}
    assert list(plan.assignment) == [0, 1]


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        (((0, (1, 2)), (1, (1,))), "All partitions should have the same number of replicas"),
        (((0, (1, 1)),), "Duplicate replica assignment found: {0: [1, 1]}"),
        (((0, (1,)), (2, (2,))), "partitions should be a consecutive 0-based integer sequence"),
        (((0, (1,)), (0, (2,))), "partitions should be a consecutive 0-based integer sequence"),
        (((-1, (1,)),), "partitions should be a consecutive 0-based integer sequence"),
        (((0, ()),), "The manual partition assignment includes an empty replica list."),
        (((0, (1, 9)),), "includes broker 9, but no such broker is registered."),
    ],
)
def test_malformed_manual_assignments(assignments, message):
    with pytest.raises(InvalidReplicaAssignmentError) as raised:
        plan_topic(NewTopic("t", assignments=assignments), BROKERS, DEFAULTS)
    assert message in str(raised.value)
    assert raised.value.error_code == ErrorCode.invalid_replica_assignment


EXISTING = TopicAssignment({0: (1, 2), 1: (2, 3), 2: (3, 1)}, topic_id="cMr3GpVESX2L3byPGf93lQ")


def test_new_partitions_continue_the_round_robin_with_partition_0s_replication_factor():
    added = plan_new_partitions("t", EXISTING, 6, None, BROKERS)
    assert sorted(added) == [3, 4, 5]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in added.values())
    assert [r[0] for r in added.values()] == [1, 2, 3]  # leaders continue from partition 0's


@pytest.mark.parametrize(
    ("count", "message"),
    [
        (2, "Topic currently has 3 partitions, which is higher than the requested 2."),
        (3, "Topic already has 3 partitions."),
        (PARTITIONS_MAX + 1, "is more than the 10000 a topic may have"),
    ],
)
def test_partitions_only_increase(count, message):
    with pytest.raises(InvalidPartitionsError) as raised:
        plan_new_partitions("t", EXISTING, count, None, BROKERS)
    assert message in str(raised.value)
    assert raised.value.error_code == ErrorCode.invalid_partitions


def test_no_partitions_are_added_during_a_reassignment():
    moving = TopicAssignment({0: (1, 2)}, adding_replicas={0: (3,)})
    with pytest.raises(ReassignmentInProgressError, match="reassignment is in progress"):
        plan_new_partitions("t", moving, 2, None, BROKERS)


def test_manual_new_partitions():
    assert plan_new_partitions("t", EXISTING, 5, [[3, 1], [1, 2]], BROKERS) == {
        3: (3, 1),
        4: (1, 2),
    }


@pytest.mark.parametrize(
    ("manual", "message"),
    [
        ([[1, 7], [8, 1]], "Unknown broker(s) in replica assignment: 7, 8."),
        ([[1, 2]], "Increasing the number of partitions by 2 but 1 assignments provided."),
        ([[1, 2], []], "Cannot have replication factor of 0 for partition id 4."),
        ([[1, 1], [1, 2]], "Duplicate brokers not allowed in replica assignment: 1, 1 for"),
        (
            [[1], [1, 2, 3]],
            "Inconsistent replication factor between partitions, partition 0 has 2 while "
            "partitions [3, 4] have replication factors [1, 3], respectively.",
        ),
    ],
)
def test_malformed_manual_new_partitions(manual, message):
    with pytest.raises(InvalidReplicaAssignmentError) as raised:
        plan_new_partitions("t", EXISTING, 5, manual, BROKERS)
    assert message in str(raised.value)


def test_unknown_config_names_are_invalid_config():
    check_config_names(["retention.ms", "cleanup.policy"])
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: nope"):
        check_config_names(["retention.ms", "nope"])
