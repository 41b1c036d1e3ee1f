"""AlterPartition (KIP-497): a leader asks the controller to record its partition's new ISR.

The controller is the only writer of partition state in ZooKeeper. A leader that shrinks or
expands its ISR sends what it wants; this module decides, from the controller's model, whether
that may be written, with the checks and error codes of Kafka's ZooKeeper-mode controller
(``KafkaController.processAlterPartition``) and, where that one is silent, its KRaft controller:

- the request's ``broker_id`` must be a live broker and ``broker_epoch`` its registration's
  czxid, else STALE_BROKER_EPOCH for the whole request (an earlier incarnation of the broker);
- a topic id the controller does not know: UNKNOWN_TOPIC_ID; a partition it does not know, or
  without a leader and ISR yet: UNKNOWN_TOPIC_OR_PARTITION;
- the sender must be the partition's leader (NOT_LEADER_OR_FOLLOWER) at the current leader
  epoch (FENCED_LEADER_EPOCH);
- a request equal to the current state (same ISR and recovery state) is answered with it, as
  Kafka does for a retry whose first attempt was written but whose answer was lost;
- ``partition_epoch`` must equal the state znode's version (INVALID_UPDATE_VERSION: the leader
  has not seen the latest state yet);
- the proposed ISR must include the leader (INVALID_REQUEST, as Kafka's KRaft controller) and
  hold only assigned replicas on live brokers, none of them shutting down but the leader itself
  (Kafka refuses brokers in controlled shutdown, KIP-841; the leader is let through so that a
  partition it could not hand over may still grow its ISR and move at the next attempt); with
  v3's ``new_isr_with_epochs``, each broker epoch that is not -1 ("unknown") must be that
  broker's live registration's (INELIGIBLE_REPLICA otherwise);
- ``leader_recovery_state``: RECOVERING with more than one ISR member, or RECOVERED back to
  RECOVERING, is INVALID_REQUEST.

What passes is written by the controller (``controller.Controller``) with a conditional write
(the controller epoch fence and the znode version); the answer then carries the new ISR and the
new znode version as ``partition_epoch``. Pure functions of the model and the proposals, which
``handlers.alter_partition`` decodes from the request and whose results it encodes; any task on
the controller's event loop may call them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.common.partitions import TopicPartition
from odradek.controller.model import ClusterModel
from odradek.errors import ErrorCode
from odradek.zk.paths import LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING
from odradek.zk.paths import PartitionState as LeaderAndIsr

UNKNOWN_BROKER_EPOCH = -1  # v3's BrokerState.broker_epoch when the leader does not know it


@dataclass(frozen=True, slots=True)
class ProposedIsr:
    """One partition of an AlterPartition request, whatever its version."""

    topic_id: uuid.UUID
    partition_index: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    broker_epochs: tuple[int, ...] | None  # v3: one per ISR member; v2: None
    leader_recovery_state: int
    partition_epoch: int


def check_broker(model: ClusterModel, broker_id: int, broker_epoch: int) -> ErrorCode:
    """STALE_BROKER_EPOCH unless the sender is live with exactly this broker epoch."""
    if model.broker_epochs.get(broker_id) != broker_epoch:
        return ErrorCode.stale_broker_epoch
    return ErrorCode.none


def resolve(model: ClusterModel, proposed: ProposedIsr) -> TopicPartition | ErrorCode:
    """The partition a proposal names, or UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION."""
    topic = model.topic_id_names().get(proposed.topic_id)
    if topic is None:
        return ErrorCode.unknown_topic_id
    tp = (topic, proposed.partition_index)
    if proposed.partition_index not in model.topics[topic].partitions or tp not in model.states:
        return ErrorCode.unknown_topic_or_partition
    return tp


def check_partition(
    model: ClusterModel, broker_id: int, tp: TopicPartition, proposed: ProposedIsr
) -> ErrorCode | LeaderAndIsr:
    """The error for this proposal, or the state to write (the current one if unchanged)."""
    current = model.states[tp]
    if current.leader != broker_id:
        return ErrorCode.not_leader_or_follower
    if proposed.leader_epoch != current.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if (
        proposed.new_isr == current.isr
        and proposed.leader_recovery_state == current.leader_recovery_state
    ):
        return current
    if proposed.partition_epoch != model.state_versions.get(tp):
        return ErrorCode.invalid_update_version
    if proposed.leader_recovery_state not in (
        LEADER_RECOVERY_RECOVERED,
        LEADER_RECOVERY_RECOVERING,
    ):
        return ErrorCode.invalid_request
    if proposed.leader_recovery_state == LEADER_RECOVERY_RECOVERING and (
        len(proposed.new_isr) > 1 or current.leader_recovery_state == LEADER_RECOVERY_RECOVERED
    ):
        return ErrorCode.invalid_request
    if broker_id not in proposed.new_isr or len(set(proposed.new_isr)) != len(proposed.new_isr):
        return ErrorCode.invalid_request
    replicas = model.replicas(tp)
    for index, member in enumerate(proposed.new_isr):
        if member not in replicas or member not in model.live_replicas(tp):
            return ErrorCode.ineligible_replica
        if member in model.shutting_down and member != broker_id:
            return ErrorCode.ineligible_replica
        if proposed.broker_epochs is not None:
            epoch = proposed.broker_epochs[index]
            if epoch != UNKNOWN_BROKER_EPOCH and epoch != model.broker_epochs.get(member):
                return ErrorCode.ineligible_replica
    return LeaderAndIsr(
        leader=current.leader,
        leader_epoch=current.leader_epoch,
        isr=proposed.new_isr,
        controller_epoch=model.epoch,
        leader_recovery_state=proposed.leader_recovery_state,
    )


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """One partition's answer: its error and, on success, the state written."""

    topic_id: uuid.UUID
    partition_index: int
    error_code: ErrorCode
    state: LeaderAndIsr | None = None  # on success
    partition_epoch: int = -1  # on success: the state znode's version
