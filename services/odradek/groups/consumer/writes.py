"""The records a consumer-group operation writes (types 3 to 8), built from members and
assignments: one function per record, so the manager reads as the sequence of what happened.
Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.groups.consumer.assignment import Assignment, to_records
from odradek.groups.consumer.member import ConsumerGroupMember
from odradek.groups.records.base import CoordinatorRecord
from odradek.groups.records.consumer import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicMetadata,
)

__all__ = [
    "epoch_record",
    "member_record",
    "topics_record",
    "target_epoch_record",
    "target_record",
    "current_record",
    "member_tombstones",
]


def epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch))


def target_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupTargetAssignmentMetadataKey(group_id),
        ConsumerGroupTargetAssignmentMetadataValue(epoch),
    )


def member_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupMemberMetadataKey(group_id, m.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            server_assignor=m.server_assignor,
        ),
    )


def topics_record(group_id: str, topics: Mapping[str, TopicMetadata]) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupPartitionMetadataKey(group_id),
        ConsumerGroupPartitionMetadataValue(tuple(topics[name] for name in sorted(topics))),
    )


def target_record(group_id: str, member_id: str, assignment: Assignment) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(to_records(assignment)),
    )


def current_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupCurrentMemberAssignmentKey(group_id, m.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=m.member_epoch,
            previous_member_epoch=m.previous_member_epoch,
            state=int(m.state),
            assigned_partitions=to_records(m.assigned),
            partitions_pending_revocation=to_records(m.pending_revocation),
        ),
    )


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    return [
        CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        CoordinatorRecord(ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]
