"""The group coordinator wired into the broker: its log is this broker's replicas of
``__consumer_offsets``, its topics the metadata cache, its shards follow leadership.

- ``ReplicaCoordinatorLog`` appends the runtime's batches as leader with the coordinator's origin
  (fenced by the shard's leader epoch; a TxnOffsetCommit's batch is a producer's transactional
  batch), waits for the high watermark, and reads a partition's whole log for loading: its data
  records, each with its producer id if its batch is transactional, and its transaction markers
  (control batches), in log order.
- ``MetadataTopics`` answers what a group may know of topics from the metadata cache.
- ``start_group_coordinator`` builds the coordinator and registers it with the replica manager's
  leadership changes: leading a partition of ``__consumer_offsets`` loads its shard, following it
  or stopping it unloads it (Kafka's ``onElection`` / ``onResignation``; ``follow_leadership``,
  which the transaction coordinator uses too).
- ``ensure_offsets_topic`` creates ``__consumer_offsets`` on first use (FindCoordinator, through
  ``internal_topics``, one creation at a time), with Kafka's settings:
  ``offsets.topic.num.partitions``, ``offsets.topic.replication.factor`` (never fewer: while
  fewer brokers live, the topic is not created and the group waits), ``cleanup.policy=compact``,
  ``segment.bytes=offsets.topic.segment.bytes``.

Runs on the broker's event loop; ``read_all`` runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from typing import Protocol

from odradek.broker.admin.topics import TopicAdmin
from odradek.broker.admin.validation import NewTopic
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.partition import ACKS_ALL
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.workers import Workers
from odradek.common.topics import OFFSETS_TOPIC
from odradek.config.broker import BrokerConfig
from odradek.coordinator.runtime import LoggedMarker, LoggedRecord
from odradek.errors import ErrorCode, NotLeaderOrFollowerError, RequestTimedOutError
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import GroupCoordinator, group_runtime
from odradek.groups.limits import GroupLimits
from odradek.groups.shard import ShardContext, Timer
from odradek.storage.batch import NO_PRODUCER_ID, BatchHeader
from odradek.storage.control import ControlType, marker_or_none
from odradek.storage.records import decode_records
from odradek.storage.validator import AppendOrigin

__all__ = [
    "ReplicaCoordinatorLog",
    "MetadataTopics",
    "start_group_coordinator",
    "ensure_offsets_topic",
]

log = logging.getLogger(__name__)


class ReplicaCoordinatorLog:
    """``CoordinatorLog`` over this broker's replicas of ``topic`` (``__consumer_offsets``, or
    ``__transaction_state`` for the transaction coordinator)."""

    def __init__(
        self, replicas: ReplicaManager, workers: Workers | None = None, topic: str = OFFSETS_TOPIC
    ):
        self.replicas = replicas
        self.workers = workers
        self.topic = topic

    async def append(self, partition: int, leader_epoch: int, batch: bytes) -> int:
        hosted = self.replicas.get_partition(self.topic, partition)
        if not hosted.is_leader or hosted.state.leader_epoch != leader_epoch:
            raise NotLeaderOrFollowerError(
                f"{hosted.name}: not the leader in epoch {leader_epoch} any more"
            )
        info = await hosted.append_as_leader(
            batch, ACKS_ALL, self.workers, origin=AppendOrigin.COORDINATOR
        )
        return info.last_offset + 1

    async def wait_replicated(self, partition: int, offset: int, timeout_ms: int) -> None:
        hosted = self.replicas.get_partition(self.topic, partition)
        waiter = hosted.wait_for_high_watermark(offset)
        try:
            error = await asyncio.wait_for(asyncio.shield(waiter), timeout_ms / 1000)
        except TimeoutError:
            waiter.cancel()
            raise RequestTimedOutError(
                f"{hosted.name}: not replicated to the ISR within {timeout_ms} ms"
            ) from None
        if error is not None:  # the waiter's result is the error (wait_for_high_watermark)
            raise error

    def read_all(self, partition: int) -> Iterator[LoggedRecord | LoggedMarker]:
        hosted = self.replicas.get_partition(self.topic, partition)
        partition_log = hosted.log
        end = partition_log.log_end_offset
        for _, batch in partition_log.batches(partition_log.log_start_offset):
            header = BatchHeader.parse(batch)
            if header.base_offset >= end:
                break
            if header.is_control:
                marker = marker_or_none(header, batch)
                if marker is not None and header.has_producer_id:
                    committed = marker.control is ControlType.COMMIT
                    yield LoggedMarker(header.base_offset, header.producer_id, committed)
                continue  # another kind of control batch: nothing to a coordinator
            producer_id = (
                header.producer_id
                if header.is_transactional and header.has_producer_id
                else NO_PRODUCER_ID
            )
            for record in decode_records(batch):
                yield LoggedRecord(record.offset, record.key, record.value, producer_id)


class MetadataTopics:
    """``Topics`` from the broker's metadata cache."""

    def __init__(self, metadata: MetadataCache):
        self.metadata = metadata

    def partition_count(self, topic: str) -> int | None:
        cached = self.metadata.topic(topic)
        return None if cached is None else len(cached.partitions)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        cached = self.metadata.topic(topic)
        return None if cached is None else cached.topic_id

    def topic_names(self) -> list[str]:
        return sorted(self.metadata.topics)


def start_group_coordinator(
    config: BrokerConfig,
    replicas: ReplicaManager,
    metadata: MetadataCache,
    workers: Workers | None = None,
) -> GroupCoordinator:
    group_config = GroupCoordinatorConfig.of(config)
    limits = GroupLimits(group_config)  # one account for every shard of this broker
    topics = MetadataTopics(metadata)
    runtime = group_runtime(
        ReplicaCoordinatorLog(replicas, workers),
        lambda partition, timer: _context(partition, timer, group_config, topics, replicas, limits),
        write_timeout_ms=group_config.offsets_commit_timeout_ms,
        clock_ms=replicas.clock_ms,
    )
    follow_leadership(replicas, OFFSETS_TOPIC, runtime)
    return GroupCoordinator(runtime, group_config)


class LeadershipFollower(Protocol):
    """What follows a topic's leadership: a coordinator runtime, the transaction coordinator."""

    def on_elected(self, partition: int, leader_epoch: int) -> object: ...

    def on_resigned(self, partition: int) -> object: ...


def follow_leadership(
    replicas: ReplicaManager, topic: str, coordinator: LeadershipFollower
) -> None:
    """Tell ``coordinator`` each time this broker starts leading a partition of ``topic``
    (``on_elected``, with its leader epoch) or stops (``on_resigned``): Kafka's
    ``onElection`` / ``onResignation``."""

    def leadership_changed(changed: str, partition: int, leader_epoch: int | None) -> None:
        if changed != topic:
            return
        if leader_epoch is None:
            coordinator.on_resigned(partition)
        else:
            coordinator.on_elected(partition, leader_epoch)

    replicas.leadership_listeners.append(leadership_changed)


def _context(
    partition: int,
    timer: Timer,
    config: GroupCoordinatorConfig,
    topics: MetadataTopics,
    replicas: ReplicaManager,
    limits: GroupLimits,
) -> ShardContext:
    return ShardContext(partition, config, timer, topics, replicas.clock_ms, limits=limits)


async def ensure_offsets_topic(admin: TopicAdmin, config: GroupCoordinatorConfig) -> bool:
    """Create ``__consumer_offsets`` unless it exists; whether it exists now.

    Kafka refuses to create it with fewer live brokers than its replication factor (rather than
    a topic that could never have the ISR it was asked for); so does this.
    """
    results = await admin.create_topics(
        [
            NewTopic(
                name=OFFSETS_TOPIC,
                num_partitions=config.offsets_topic_num_partitions,
                replication_factor=config.offsets_topic_replication_factor,
                configs=(
                    ("cleanup.policy", "compact"),
                    ("compression.type", "producer"),
                    ("segment.bytes", str(config.offsets_topic_segment_bytes)),
                ),
            )
        ],
        validate_only=False,
    )
    result = results[0]
    if result.error in (ErrorCode.none, ErrorCode.topic_already_exists):
        return True
    log.info("cannot create %s yet: %s %s", OFFSETS_TOPIC, result.error.name, result.message)
    return False
