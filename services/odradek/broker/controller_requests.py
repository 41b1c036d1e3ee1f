"""What a broker does with the controller's requests: LeaderAndIsr, UpdateMetadata, StopReplica.

The rules are Kafka's (ZooKeeper mode, ``ReplicaManager.becomeLeaderOrFollower``,
``stopReplicas`` and ``ZkMetadataCache.updateMetadata``):

- **Controller epoch fence.** A request whose controller epoch is below the highest one this
  broker has seen is refused whole with STALE_CONTROLLER_EPOCH and changes nothing; otherwise its
  epoch becomes the highest seen. Only a new controller raises the epoch, so a deposed controller
  that still believes it is active cannot undo what its successor decided.
- **LeaderAndIsr, per partition.** The state is taken only if its leader epoch is above the one
  the broker holds (-1 for a partition it does not host yet) and the broker is among its
  replicas; an older or equal leader epoch answers STALE_CONTROLLER_EPOCH for that partition,
  not naming this broker UNKNOWN_TOPIC_OR_PARTITION, and a log on an offline directory (or that
  cannot be created) KAFKA_STORAGE_ERROR. Leader or follower, the broker hosts the log; only the
  leader takes produce and fetch (``Partition`` enforces it) until replication lands.
- **StopReplica, per partition.** Stopped if its leader epoch is above ours, or the sentinel -1
  (no epoch) or -2 (topic deletion); else FENCED_LEADER_EPOCH. A partition the broker does not
  host is stopped too, so a deleted topic's leftover log goes even after a restart.
- **UpdateMetadata.** The live broker list is replaced whole; each partition state replaces that
  partition in the cache, and leader -2 (LeaderDuringDelete) removes it, the topic with its last
  partition. Topics are replaced as new ``TopicMetadata`` objects, never mutated in place.

Runs on the broker's event loop only; each function completes without awaiting, so requests from
several connections never interleave inside one.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.broker.context import BrokerContext
from odradek.broker.metadata_cache import BrokerEndpoint, MetadataCache, PartitionMetadata
from odradek.broker.metadata_cache import TopicMetadata as CachedTopic
from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import ReplicaManager
from odradek.errors import ErrorCode, OdradekError

log = logging.getLogger(__name__)

NO_EPOCH = -1  # LeaderAndIsr.NoEpoch: skip the leader epoch check
EPOCH_DURING_DELETE = -2  # LeaderAndIsr.EpochDuringDelete: topic deletion, always stops
LEADER_DURING_DELETE = -2  # LeaderAndIsr.LeaderDuringDelete: UpdateMetadata removes the partition
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
DEFAULT_LISTENER = "PLAINTEXT"


def accept_controller_epoch(broker: BrokerContext, controller_epoch: int, what: str) -> bool:
    """False (and nothing recorded) if ``controller_epoch`` is older than the newest seen."""
    if controller_epoch < broker.controller_epoch:
        log.warning(
            "ignoring %s from controller epoch %d: broker %d has seen epoch %d",
            what,
            controller_epoch,
            broker.broker_id,
            broker.controller_epoch,
        )
        return False
    broker.controller_epoch = controller_epoch
    return True


# -- LeaderAndIsr ------------------------------------------------------------------------------


def become_leader_or_follower(
    replicas: ReplicaManager, topic: str, partition: int, state: PartitionState, *, is_new: bool
) -> ErrorCode:
    """Apply one partition state of a LeaderAndIsr request; the partition's error code."""
    hosted = replicas.partitions.get((topic, partition))
    if hosted is not None and hosted.log.offline:
        return ErrorCode.kafka_storage_error
    current_epoch = hosted.state.leader_epoch if hosted is not None else -1
    if state.leader_epoch <= current_epoch:
        log.info(
            "ignoring the state of %s-%d: leader epoch %d, ours %d",
            topic,
            partition,
            state.leader_epoch,
            current_epoch,
        )
        return ErrorCode.stale_controller_epoch
    if replicas.broker_id not in state.replicas:
        log.warning(
            "ignoring the state of %s-%d: broker %d is not among its replicas %s",
            topic,
            partition,
            replicas.broker_id,
            list(state.replicas),
        )
        return ErrorCode.unknown_topic_or_partition
    config = replicas.log_manager.topic_config(topic)
    try:
        replicas.become_leader_or_follower(topic, partition, state, config, is_new=is_new)
    except OdradekError as e:
        log.error("cannot host %s-%d: %s", topic, partition, e)
        return e.error_code
    except OSError as e:
        log.error("cannot host %s-%d: %s", topic, partition, e)
        return ErrorCode.kafka_storage_error
    return ErrorCode.none


# -- StopReplica -------------------------------------------------------------------------------


def stop_replica(
    replicas: ReplicaManager, topic: str, partition: int, leader_epoch: int, *, delete: bool
) -> ErrorCode:
    """Apply one partition of a StopReplica request; the partition's error code."""
    hosted = replicas.partitions.get((topic, partition))
    if hosted is not None:
        if hosted.log.offline:
            return ErrorCode.kafka_storage_error
        current_epoch = hosted.state.leader_epoch
        if leader_epoch not in (NO_EPOCH, EPOCH_DURING_DELETE) and leader_epoch <= current_epoch:
            log.info(
                "not stopping %s-%d: leader epoch %d, ours %d",
                topic,
                partition,
                leader_epoch,
                current_epoch,
            )
            return ErrorCode.fenced_leader_epoch
    try:
        replicas.stop_replica(topic, partition, delete=delete)
    except OdradekError as e:
        log.error("cannot stop %s-%d: %s", topic, partition, e)
        return e.error_code
    except OSError as e:
        log.error("cannot delete %s-%d: %s", topic, partition, e)
        return ErrorCode.kafka_storage_error
    return ErrorCode.none


# -- UpdateMetadata ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicUpdate:
    """One topic's partition states in an UpdateMetadata request, as plain values."""

    name: str
    topic_id: uuid.UUID | None
    partitions: tuple[PartitionMetadata, ...]


def listener_name(broker: BrokerContext) -> str:
    """The listener whose address the cache keeps for every broker: this broker's first one."""
    if broker.config is None:
        return DEFAULT_LISTENER
    return broker.config.effective_advertised_listeners[0].name


def update_metadata(
    cache: MetadataCache,
    brokers: Iterable[BrokerEndpoint],
    topics: Iterable[TopicUpdate],
) -> None:
    """Replace the live brokers; merge each partition state into its topic (see the module)."""
    cache.update_brokers(list(brokers))
    for update in topics:
        existing = cache.topic(update.name)
        partitions = dict(existing.partitions) if existing is not None else {}
        for state in update.partitions:
            if state.leader == LEADER_DURING_DELETE:
                partitions.pop(state.partition, None)
            else:
                partitions[state.partition] = state
        if not partitions:
            cache.remove_topic(update.name)
            continue
        topic_id = update.topic_id
        if topic_id is None:
            topic_id = existing.topic_id if existing is not None else uuid.UUID(int=0)
        cache.update_topic(
            CachedTopic(
                update.name,
                topic_id,
                partitions,
                is_internal=update.name in INTERNAL_TOPICS,
            )
        )
