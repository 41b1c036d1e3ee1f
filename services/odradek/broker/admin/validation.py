"""Pure rules of the topic admin APIs: names, counts, assignments and config overrides.

No I/O, no clock; the only randomness (where placement's round-robin starts) comes from an
injected ``random.Random``. Each rule raises the error whose Kafka code and wording a client gets,
taken from Kafka 3.x's ZooKeeper mode (``Topic.validate``, ``ZkAdminManager``,
``AdminZkClient.validateTopicCreate`` and ``validateReplicaAssignment``), with two additions:

- a manual assignment in CreateTopics must name registered brokers (Kafka's KRaft rule; its
  ZooKeeper mode accepted unknown ids and left such partitions offline);
- a topic has at most ``PARTITIONS_MAX`` partitions and ``REPLICAS_MAX`` replicas (partitions
  x replication factor), and its assignment must fit in a znode, so a request cannot make the
  broker compute (or ZooKeeper store) an assignment of billions of entries;
- a topic's ``min.insync.replicas`` may not exceed its replication factor (no acks=all write
  could ever succeed: producers retry until their delivery timeout, which reads as a hang). Set
  explicitly above it, it is refused (INVALID_CONFIG, naming both numbers); only inherited from a
  larger broker default, the topic gets its replication factor as its own override
  (``fit_min_insync_replicas``), so DescribeConfigs shows what is enforced. Kafka accepts both.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from odradek.broker.admin.errors import (
    AdminRequestError,
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    ReassignmentInProgressError,
)
from odradek.cluster.placement import (
    InvalidPartitionsError,
    assign_additional_partitions,
    assign_replicas,
)
from odradek.common.topics import LEGAL_TOPIC_CHARACTERS, TOPIC_NAME_LENGTH_MAX
from odradek.config.broker import BrokerConfig
from odradek.config.topic import CONFIG_KEYS, DEFAULT_TOPIC_CONFIG, TopicConfig
from odradek.errors import InvalidConfigError
from odradek.zk.codec import ZNODE_DATA_BYTES_MAX
from odradek.zk.paths import TopicAssignment

__all__ = [
    "MIN_INSYNC_REPLICAS",
    "NO_NUM_PARTITIONS",
    "NO_REPLICATION_FACTOR",
    "PARTITIONS_MAX",
    "REPLICAS_MAX",
    "BrokerDefaults",
    "check_assignment_size",
    "NewTopic",
    "TopicPlan",
    "check_config_names",
    "check_manual_assignment",
    "fit_min_insync_replicas",
    "plan_new_partitions",
    "placeable_size",
    "plan_topic",
    "replication_factor_of",
    "topic_overrides",
    "validate_topic_name",
]

NO_NUM_PARTITIONS = -1  # CreateTopics: use num.partitions (or the manual assignment)
NO_REPLICATION_FACTOR = -1  # CreateTopics: use default.replication.factor
PARTITIONS_MAX = 10_000
REPLICAS_MAX = 100_000  # partitions x replication factor, per topic


@dataclass(frozen=True, slots=True)
class BrokerDefaults:
    """What the receiving broker's configuration decides for admin requests."""

    num_partitions: int = 1
    default_replication_factor: int = 1
    delete_topic_enable: bool = True
    topic_config: TopicConfig = DEFAULT_TOPIC_CONFIG

    @classmethod
    def of(cls, config: BrokerConfig | None) -> BrokerDefaults:
        """From the broker's configuration; Kafka's defaults for a broker run without one."""
        if config is None:
            return cls()
        return cls(
            num_partitions=config.num_partitions,
            default_replication_factor=config.default_replication_factor,
            delete_topic_enable=config.delete_topic_enable,
            topic_config=config.topic_defaults(),
        )


def validate_topic_name(name: object) -> str:
    """Kafka's ``Topic.validate``: INVALID_TOPIC_EXCEPTION with Kafka's wording."""
    if not isinstance(name, str) or name == "":
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > TOPIC_NAME_LENGTH_MAX:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {TOPIC_NAME_LENGTH_MAX} "
            f"characters, Topic name: {name}"
        )
    if LEGAL_TOPIC_CHARACTERS.fullmatch(name) is None:
        raise InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return name


@dataclass(frozen=True, slots=True)
class NewTopic:
    """One CreateTopics entry, as the client sent it."""

    name: str
    num_partitions: int = NO_NUM_PARTITIONS
    replication_factor: int = NO_REPLICATION_FACTOR
    # (partition, replicas) pairs in request order; empty for automatic placement.
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()
    configs: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """A valid topic, ready to be written: replicas per partition and stored overrides."""

    name: str
    assignment: dict[int, tuple[int, ...]]
    overrides: dict[str, str]
    config: TopicConfig = field(compare=False)

    @property
    def replication_factor(self) -> int:
        return len(self.assignment[0])


def plan_topic(
    topic: NewTopic,
    brokers: Mapping[int, str | None],
    defaults: BrokerDefaults,
    rng: random.Random | None = None,
) -> TopicPlan:
    """Check a CreateTopics entry against the live ``brokers`` (id -> rack) and place it."""
    validate_topic_name(topic.name)
    nulls = [name for name, value in topic.configs if value is None]
    if nulls:
        raise AdminRequestError(f"Null value not supported for topic configs : {','.join(nulls)}")
    if topic.assignments:
        if (
            topic.num_partitions != NO_NUM_PARTITIONS
            or topic.replication_factor != NO_REPLICATION_FACTOR
        ):
            raise AdminRequestError(
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time."
            )
        assignment = check_manual_assignment(topic.assignments, brokers)
    else:
        partitions, replication_factor = _size(topic, defaults)
        _check_partition_count(partitions)
        _check_replica_count(partitions, replication_factor)
        placed = assign_replicas(partitions, replication_factor, brokers, rng=rng)
        assignment = {p: tuple(replicas) for p, replicas in placed.items()}
    check_assignment_size(assignment)
    overrides, _ = topic_overrides(dict(topic.configs), defaults.topic_config)
    replication_factor = len(assignment[0])
    overrides = fit_min_insync_replicas(
        topic.name, overrides, defaults.topic_config, replication_factor
    )
    config = TopicConfig.from_properties(overrides, defaults.topic_config)
    return TopicPlan(topic.name, assignment, overrides, config)


def _size(topic: NewTopic, defaults: BrokerDefaults) -> tuple[int, int]:
    """(partitions, replication factor) an entry without a manual assignment asks for."""
    partitions = topic.num_partitions
    if partitions == NO_NUM_PARTITIONS:
        partitions = defaults.num_partitions
    replication_factor = topic.replication_factor
    if replication_factor == NO_REPLICATION_FACTOR:
        replication_factor = defaults.default_replication_factor
    return partitions, replication_factor


# An entry at most this big (partitions x replicas) never fills a znode's megabyte.
PLACEABLE_REPLICAS_MAX = 10_000


def placeable_size(
    topic: NewTopic, defaults: BrokerDefaults, brokers: Mapping[int, str | None]
) -> tuple[int, int] | None:
    """(partitions, replication factor) of an entry ``plan_topic`` can refuse for nothing but
    its name: no manual assignment, no configs, at most ``PLACEABLE_REPLICAS_MAX`` replicas, no
    more per partition than the live ``brokers`` (id -> rack), whose racks placement can use
    (all brokers have one, or none). None for any other entry (only its plan can tell).

    So a caller may check the cluster's room for it before planning it, without changing which
    error an invalid entry gets: planning costs ~80 µs a topic, and 1 MB names 77,000."""
    if topic.assignments or topic.configs:
        return None
    partitions, replication_factor = _size(topic, defaults)
    if not (partitions > 0 and 0 < replication_factor <= len(brokers)):
        return None
    if partitions * replication_factor > PLACEABLE_REPLICAS_MAX:
        return None
    if len({rack is None for rack in brokers.values()}) > 1:  # ENFORCED placement refuses
        return None
    return partitions, replication_factor


MIN_INSYNC_REPLICAS = "min.insync.replicas"


def fit_min_insync_replicas(
    topic: str, overrides: Mapping[str, str], base: TopicConfig, replication_factor: int
) -> dict[str, str]:
    """``overrides`` (valid, normalised) with ``min.insync.replicas`` at most the RF.

    An explicit value above ``replication_factor`` raises ``InvalidConfigError``; a larger value
    inherited from ``base`` (the broker's default) becomes an override equal to the RF.
    """
    explicit = overrides.get(MIN_INSYNC_REPLICAS)
    if explicit is not None:
        if int(explicit) > replication_factor:
            raise InvalidConfigError(
                f"min.insync.replicas {explicit} is above the replication factor "
                f"{replication_factor} of topic '{topic}': no acks=all write could succeed. "
                f"Use a min.insync.replicas of at most {replication_factor}."
            )
        return dict(overrides)
    if base.min_insync_replicas <= replication_factor:
        return dict(overrides)
    return dict(sorted({**overrides, MIN_INSYNC_REPLICAS: str(replication_factor)}.items()))


def replication_factor_of(assignment: TopicAssignment) -> int:
    """The smallest replica count of a topic's partitions, leaving out replicas being removed."""
    return min(
        len(set(replicas) - set(assignment.removing_replicas.get(partition, ())))
        for partition, replicas in assignment.partitions.items()
    )


def _check_partition_count(count: int) -> None:
    if count > PARTITIONS_MAX:
        raise InvalidPartitionsError(
            f"Number of partitions {count} is more than the {PARTITIONS_MAX} a topic may have."
        )


def _check_replica_count(partitions: int, replication_factor: int) -> None:
    if partitions * replication_factor > REPLICAS_MAX:
        raise InvalidPartitionsError(
            f"{partitions} partitions with replication factor {replication_factor} make "
            f"{partitions * replication_factor} replicas, more than the {REPLICAS_MAX} a topic "
            "may have."
        )


_ANY_TOPIC_ID = "A" * 22  # as long as every topic id


def check_assignment_size(assignment: Mapping[int, Sequence[int]]) -> None:
    """``/brokers/topics/<t>`` must fit in a znode (1 MiB): partitions x replicas is bounded."""
    size = len(TopicAssignment(assignment, topic_id=_ANY_TOPIC_ID).encode())
    if size > ZNODE_DATA_BYTES_MAX:
        raise InvalidPartitionsError(
            f"The assignment of {len(assignment)} partitions takes {size} bytes, more than a "
            f"ZooKeeper node holds ({ZNODE_DATA_BYTES_MAX})."
        )


def check_manual_assignment(
    assignments: Sequence[tuple[int, Sequence[int]]], brokers: Mapping[int, str | None]
) -> dict[int, tuple[int, ...]]:
    """A CreateTopics manual assignment: partitions 0..n-1, same non-zero RF, known brokers."""
    _check_partition_count(len(assignments))
    assignment = {partition: tuple(replicas) for partition, replicas in assignments}
    for replicas in assignment.values():
        if not replicas:
            raise InvalidReplicaAssignmentError(
                "The manual partition assignment includes an empty replica list."
            )
    if len({len(replicas) for replicas in assignment.values()}) != 1:
        raise InvalidReplicaAssignmentError(
            "All partitions should have the same number of replicas"
        )
    if any(len(set(replicas)) != len(replicas) for replicas in assignment.values()):
        shown = {p: list(r) for p, r in sorted(assignment.items())}
        raise InvalidReplicaAssignmentError(f"Duplicate replica assignment found: {shown}")
    if len(assignment) != len(assignments) or sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignmentError(
            "partitions should be a consecutive 0-based integer sequence"
        )
    for replicas in assignment.values():
        for broker in replicas:
            if broker not in brokers:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes broker {broker}, but no such "
                    "broker is registered."
                )
    return dict(sorted(assignment.items()))


def plan_new_partitions(
    topic: str,
    existing: TopicAssignment,
    count: int,
    manual: Sequence[Sequence[int]] | None,
    brokers: Mapping[int, str | None],
) -> dict[int, tuple[int, ...]]:
    """CreatePartitions: the replicas of partitions ``len(existing) .. count - 1`` only."""
    if existing.adding_replicas or existing.removing_replicas:
        raise ReassignmentInProgressError(
            f"A partition reassignment is in progress for the topic '{topic}'."
        )
    current = len(existing.partitions)
    if count < current:
        raise InvalidPartitionsError(
            f"Topic currently has {current} partitions, which is higher than the requested {count}."
        )
    if count == current:
        raise InvalidPartitionsError(f"Topic already has {current} partitions.")
    _check_partition_count(count)
    if manual is None:
        _check_replica_count(count, len(existing.partitions.get(0, ())))
        placed = assign_additional_partitions(existing.partitions, count, brokers)
        added = {p: tuple(replicas) for p, replicas in placed.items()}
        check_assignment_size({**existing.partitions, **added})
        return added
    unknown = sorted({b for replicas in manual for b in replicas} - set(brokers))
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
        )
    increment = count - current
    if len(manual) != increment:
        raise InvalidReplicaAssignmentError(
            f"Increasing the number of partitions by {increment} but {len(manual)} "
            "assignments provided."
        )
    added = {current + i: tuple(replicas) for i, replicas in enumerate(manual)}
    expected = len(existing.partitions.get(0, ()))
    for partition, replicas in added.items():
        if not replicas:
            raise InvalidReplicaAssignmentError(
                f"Cannot have replication factor of 0 for partition id {partition}."
            )
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {partition}."
            )
    uneven = {p: len(r) for p, r in added.items() if len(r) != expected}
    if uneven:
        raise InvalidReplicaAssignmentError(
            f"Inconsistent replication factor between partitions, partition 0 has {expected} "
            f"while partitions [{', '.join(map(str, uneven))}] have replication factors "
            f"[{', '.join(map(str, uneven.values()))}], respectively."
        )
    check_assignment_size({**existing.partitions, **added})
    return added


def check_config_names(names: Iterable[str]) -> None:
    """Unknown topic keys are INVALID_CONFIG (Kafka's ``LogConfig.validateNames``)."""
    for name in names:
        if name not in CONFIG_KEYS:
            raise InvalidConfigError(f"Unknown topic config name: {name}")


def topic_overrides(
    props: Mapping[str, object], base: TopicConfig
) -> tuple[dict[str, str], TopicConfig]:
    """Validate overrides on top of ``base``: (overrides as Kafka prints them, effective config).

    Raises ``InvalidConfigError`` with Kafka's wording, unknown names first, then values.
    """
    config = TopicConfig.from_properties(props, base)
    return stored_overrides(props, config), config


def stored_overrides(names: Iterable[str], config: TopicConfig) -> dict[str, str]:
    """The overrides named ``names``, their values normalised from the effective ``config``."""
    return {
        name: CONFIG_KEYS[name].to_string(getattr(config, CONFIG_KEYS[name].attr))
        for name in sorted(names)
    }
