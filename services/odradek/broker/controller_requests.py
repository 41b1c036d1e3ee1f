"""What a broker does with the controller's requests: LeaderAndIsr, UpdateMetadata, StopReplica.

These requests arrive only on the control-plane listener (the server answers them with
CLUSTER_AUTHORIZATION_FAILED anywhere else). The rules are Kafka's (ZooKeeper mode,
``ReplicaManager.becomeLeaderOrFollower``, ``stopReplicas``, ``ZkMetadataCache.updateMetadata``)
with a stricter broker epoch, checked first:

- **Broker epoch fence.** Kafka's broker epoch is the czxid of the broker's ephemeral
  ``/brokers/ids/<id>`` registration: it changes whenever the broker registers again (a new
  ZooKeeper session, a restart). The controller reads it with the registration and puts it in
  every request; the broker learns its own from the znode it created (``BrokerRegistrar``).
  A request is taken only if it carries the broker's current epoch; anything else is refused
  whole with STALE_BROKER_EPOCH and changes nothing. Unlike Kafka, -1 ("unknown", what a
  controller older than KIP-380 sent) is refused too: both ends are Odradek's, so -1 can only
  come from something that is not our controller. An epoch above the one the broker knows is
  what a controller sends when it read a re-registration before the broker finished recording
  it: the broker then reads its own znode and takes the request only if that znode, owned by its
  session, was created at exactly that epoch. So requests a controller decided for an earlier
  incarnation of this broker are never applied to this one.
- **Controller epoch fence.** A request whose controller epoch is below the highest one this
  broker has seen is refused whole with STALE_CONTROLLER_EPOCH and changes nothing; otherwise its
  epoch becomes the highest seen. Only a new controller raises the epoch, so a deposed controller
  that still believes it is active cannot undo what its successor decided.
- **LeaderAndIsr, per partition.** The state is taken only if its leader epoch is above the one
  the broker holds (-1 for a partition it does not host yet) and the broker is among its
  replicas; an older or equal leader epoch answers STALE_CONTROLLER_EPOCH for that partition,
  not naming this broker UNKNOWN_TOPIC_OR_PARTITION, and a log on an offline directory (or that
  cannot be created) KAFKA_STORAGE_ERROR. A replica the controller marks new (``is_new``) is
  created on a healthy directory even while another is offline, and so is one the state leaves
  out of the ISR (a replica whose dir failed and did not come back: the controller took it out
  of the ISR, and it catches up from the leader before it rejoins); one that should exist and is
  in the ISR is not recreated while a directory is offline (its data may be there): that answers
  KAFKA_STORAGE_ERROR, the controller takes it out of the ISR and asks again. The leader epoch
  fence is the partition's own (``Partition.make_leader`` / ``make_follower``); a follower then
  fetches from its leader (``replica_fetcher``).
- **StopReplica, per partition.** Stopped if its leader epoch is above ours, or the sentinel -1
  (no epoch) or -2 (topic deletion); else FENCED_LEADER_EPOCH. A partition the broker does not
  host is stopped too, so a deleted topic's leftover log goes even after a restart.
- **UpdateMetadata.** The live broker list is replaced whole, each broker with all of its
  endpoints; each partition state replaces that partition in the cache, and leader -2
  (LeaderDuringDelete) removes it, the topic with its last partition. Topics are replaced as new
  ``TopicMetadata`` objects, never mutated in place.

Runs on the broker's event loop only. The broker epoch check may await one ZooKeeper read (see
above); every other function completes without awaiting, so requests from several connections
never interleave inside one.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from odradek.broker.context import BrokerContext
from odradek.broker.metadata_cache import MetadataCache, PartitionMetadata
from odradek.broker.metadata_cache import TopicMetadata as CachedTopic
from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import ReplicaManager
from odradek.common.partitions import NO_EPOCH
from odradek.common.topics import INTERNAL_TOPICS
from odradek.errors import ErrorCode, OdradekError
from odradek.zk.errors import ZkError
from odradek.zk.paths import broker_path

log = logging.getLogger(__name__)

EPOCH_DURING_DELETE = -2  # LeaderAndIsr.EpochDuringDelete: topic deletion, always stops
LEADER_DURING_DELETE = -2  # LeaderAndIsr.LeaderDuringDelete: UpdateMetadata removes the partition
UNKNOWN_BROKER_EPOCH = -1  # AbstractControlRequest.UNKNOWN_BROKER_EPOCH: refused here


async def accept_broker_epoch(broker: BrokerContext, broker_epoch: int, what: str) -> bool:
    """True if ``broker_epoch`` is this broker's current epoch (see the module docstring)."""
    current = broker.broker_epoch
    if current is not None and broker_epoch == current:
        return True
    known = UNKNOWN_BROKER_EPOCH if current is None else current
    if broker_epoch > known and await _registered_at(broker, broker_epoch):
        log.info(
            "broker %d: its registration has broker epoch %d (was %s)",
            broker.broker_id,
            broker_epoch,
            current,
        )
        broker.broker_epoch = broker_epoch
        return True
    log.warning(
        "refusing %s with broker epoch %d: broker %d's current broker epoch is %s",
        what,
        broker_epoch,
        broker.broker_id,
        current,
    )
    return False


async def _registered_at(broker: BrokerContext, broker_epoch: int) -> bool:
    """Whether this broker's registration, held by its own session, was created at the epoch."""
    if broker.zk is None:
        return False
    try:
        stat = await broker.zk.aexists(broker_path(broker.broker_id))
    except ZkError as e:
        log.warning("cannot read broker %d's registration: %s", broker.broker_id, e)
        return False
    return (
        stat is not None
        and stat.czxid == broker_epoch
        and stat.ephemeralOwner == broker.zk.session_id
    )


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


async def stale_epoch(broker: BrokerContext, request: Any, what: str) -> ErrorCode | None:
    """Why a LeaderAndIsr, StopReplica or UpdateMetadata ``request`` changes nothing, in Kafka's
    order: STALE_BROKER_EPOCH (not this broker's epoch), then STALE_CONTROLLER_EPOCH (an older
    controller); None to go ahead. ``what`` names the API in the log."""
    if not await accept_broker_epoch(broker, request.broker_epoch, what):
        return ErrorCode.stale_broker_epoch
    if not accept_controller_epoch(broker, request.controller_epoch, what):
        return ErrorCode.stale_controller_epoch
    return None


# -- LeaderAndIsr ------------------------------------------------------------------------------


def may_create_empty(broker_id: int, state: Any, is_new: bool) -> bool:
    """Whether a missing log of this partition may be created empty (``is_new`` for
    ``LogManager.get_or_create_log``): the controller says the replica is new, or it is out of
    the ISR. Such a replica can never be elected cleanly and joins the ISR only once it has
    caught up from the leader: created empty on a healthy dir even if it may be on an offline one
    (the dir failed and did not come back), rather than refused as Kafka's ZooKeeper mode does
    until an operator takes the dir out of log.dirs. ``state``: anything with ``leader`` and
    ``isr`` (a LeaderAndIsr partition state, on the wire or decoded)."""
    return is_new or (broker_id not in state.isr and state.leader != broker_id)


def become_leader_or_follower(
    replicas: ReplicaManager, topic: str, partition: int, state: PartitionState, *, is_new: bool
) -> ErrorCode:
    """Apply one partition state of a LeaderAndIsr request; the partition's error code."""
    hosted = replicas.partitions.get((topic, partition))
    if hosted is not None and hosted.log.offline:
        return ErrorCode.kafka_storage_error
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
        applied = replicas.become_leader_or_follower(
            topic,
            partition,
            state,
            config,
            is_new=may_create_empty(replicas.broker_id, state, is_new),
        )
    except OdradekError as e:
        log.error("cannot host %s-%d: %s", topic, partition, e)
        return e.error_code
    except OSError as e:
        log.error("cannot host %s-%d: %s", topic, partition, e)
        return ErrorCode.kafka_storage_error
    if not applied:
        log.info(
            "ignoring the state of %s-%d: leader epoch %d is not above ours",
            topic,
            partition,
            state.leader_epoch,
        )
        return ErrorCode.stale_controller_epoch
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


def merge_topic(cache: MetadataCache, update: TopicUpdate) -> None:
    """Merge one topic's partition states of an UpdateMetadata into the cache."""
    existing = cache.topic(update.name)
    partitions = dict(existing.partitions) if existing is not None else {}
    for state in update.partitions:
        if state.leader == LEADER_DURING_DELETE:
            partitions.pop(state.partition, None)
        else:
            partitions[state.partition] = state
    if not partitions:
        cache.remove_topic(update.name)
        return
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
