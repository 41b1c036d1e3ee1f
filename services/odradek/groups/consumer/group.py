"""A KIP-848 consumer group: what its records (types 3 to 8) say, and ``Group`` for the rest of
the coordinator.

State, changed only by ``replay`` (``manager`` replays every record of types 3 to 8):

- ``group_epoch``: bumped whenever membership, a subscription, or the subscribed topics'
  metadata changes; ``target_epoch``: the group epoch the target assignment was computed for
  (``target_epoch < group_epoch``: a new target is due, state Assigning);
- ``members`` (records 5 and 8) and ``target`` (record 7, member id -> target partitions);
- ``topics``: the subscribed topics' metadata the last epoch was computed on (record 4);
- ``owners``: (topic id, partition) -> the member that owns it, derived from every member's
  assigned and pending-revocation partitions. **A partition has at most one owner**: a member
  gets a partition only while ``owners`` has no other member for it (``reconciliation``).

States as Kafka reports them: Empty (no members), Assigning, Reconciling (a member is not at
the target epoch, or is revoking or waiting for a partition), Stable.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from odradek.errors import ErrorCode
from odradek.groups.consumer.assignment import Assignment, partitions_of
from odradek.groups.consumer.assignors import preferred_assignor
from odradek.groups.consumer.member import ConsumerGroupMember, MemberState
from odradek.groups.errors import GroupError
from odradek.groups.group import GroupDescription, GroupType, MemberDescription
from odradek.groups.records.base import CoordinatorRecord
from odradek.groups.records.consumer import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    TopicMetadata,
)

__all__ = ["ConsumerGroup", "PROTOCOL_TYPE"]

PROTOCOL_TYPE = "consumer"


class ConsumerGroup:
    def __init__(self, group_id: str, assignors: Sequence[str] = ("uniform",)):
        self.group_id = group_id
        self.assignors = tuple(assignors)  # group.consumer.assignors: the first is the default
        self.group_epoch = 0
        self.target_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        self.topics: dict[str, TopicMetadata] = {}  # by name
        self.topic_names: dict[uuid.UUID, str] = {}  # every id this group has seen
        self.owners: dict[tuple[uuid.UUID, int], str] = {}
        # The members' bytes as groups.limits counts them, kept as members come and go.
        self.held_bytes = 0

    # -- state from records (manager.replay) ---------------------------------------------

    def put_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
            self.held_bytes -= old.held_bytes()
        self.members[member.member_id] = member
        self.held_bytes += member.held_bytes()
        for topic_partition in partitions_of(member.assigned):
            self.owners[topic_partition] = member.member_id
        for topic_partition in partitions_of(member.pending_revocation):
            self.owners[topic_partition] = member.member_id

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            self._release(old)
            self.held_bytes -= old.held_bytes()

    def _release(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_partition in partitions_of(assignment):
                if self.owners.get(topic_partition) == member.member_id:
                    del self.owners[topic_partition]

    def set_topics(self, topics: Sequence[TopicMetadata]) -> None:
        self.topics = {t.topic_name: t for t in topics}
        for t in topics:
            self.topic_names[t.topic_id] = t.topic_name

    # -- queries -----------------------------------------------------------------------------

    def owner(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.owners.get((topic_id, partition))

    def static_member_id(self, instance_id: str) -> str | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member.member_id
        return None

    def assignor_name(self) -> str:
        return preferred_assignor(self.members.values(), self.assignors)

    def topic_name(self, topic_id: uuid.UUID) -> str:
        return self.topic_names.get(topic_id, "")

    # -- Group ---------------------------------------------------------------------------------

    @property
    def type(self) -> GroupType:
        return GroupType.CONSUMER

    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.target_epoch:
            return "Assigning"
        for member in self.members.values():
            if member.member_epoch != self.target_epoch or member.state is not MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def protocol_type(self) -> str | None:
        return PROTOCOL_TYPE

    def is_empty(self) -> bool:
        return not self.members

    def describe(self) -> GroupDescription:
        members = tuple(
            MemberDescription(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=encode_subscription(m.subscribed_topic_names),
                assignment=encode_assignment(
                    [(self.topic_name(t), sorted(ps)) for t, ps in m.assigned.items()]
                ),
            )
            for m in sorted(self.members.values(), key=lambda m: m.member_id)
        )
        return GroupDescription(
            group_id=self.group_id,
            state=self.state_name(),
            protocol_type=PROTOCOL_TYPE,
            protocol_name=self.assignor_name(),
            members=members,
        )

    def validate_offset_commit(
        self,
        member_id: str,
        group_instance_id: str | None,
        generation_or_epoch: int,
        *,
        is_transactional: bool = False,
    ) -> None:
        # Kafka's ConsumerGroup.validateOffsetCommit: an epoch < 0 commits only while the group
        # has no members (the admin client, or a consumer that assigns partitions itself).
        if generation_or_epoch < 0 and not self.members:
            return
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id, f"{member_id!r} is not a member")
        _validate_epoch(generation_or_epoch, member.member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        # Kafka: no member id (null) and epoch -1 is the admin client, or a client that does not
        # say; an empty id is taken for null, as the offsets layer may not tell them apart.
        if member_epoch < 0 and not member_id:
            return
        member = self.members.get(member_id or "")
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id, f"{member_id!r} is not a member")
        _validate_epoch(member_epoch, member.member_epoch)

    def validate_delete_group(self) -> None:
        if self.members:
            raise GroupError(ErrorCode.non_empty_group, f"group {self.group_id} has members")

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.topics

    def tombstones(self) -> Sequence[CoordinatorRecord]:
        """Kafka's order: every member's current and target assignment, the target's epoch,
        the topics' metadata, the members' subscriptions, and the group epoch last."""
        g = self.group_id
        records = []
        for member_id in sorted(self.members):
            records.append(
                CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(g, member_id), None)
            )
        for member_id in sorted(self.target):
            records.append(
                CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(g, member_id), None)
            )
        records.append(CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(g), None))
        records.append(CoordinatorRecord(ConsumerGroupPartitionMetadataKey(g), None))
        for member_id in sorted(self.members):
            records.append(CoordinatorRecord(ConsumerGroupMemberMetadataKey(g, member_id), None))
        records.append(CoordinatorRecord(ConsumerGroupMetadataKey(g), None))
        return records


def _validate_epoch(received: int, expected: int) -> None:
    if received > expected:
        raise GroupError(
            ErrorCode.fenced_member_epoch, f"member epoch {received} is newer than {expected}"
        )
    if received < expected:
        raise GroupError(
            ErrorCode.stale_member_epoch, f"member epoch {received} is older than {expected}"
        )


# -- ConsumerProtocolSubscription / ConsumerProtocolAssignment (version 0, not flexible) ---------

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _string(value: str) -> bytes:
    encoded = value.encode()
    return _INT16.pack(len(encoded)) + encoded


def encode_subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data (null)."""
    parts = [_INT16.pack(0), _INT32.pack(len(topics))]
    parts.extend(_string(t) for t in topics)
    parts.append(_INT32.pack(-1))
    return b"".join(parts)


def encode_assignment(topics: Sequence[tuple[str, Sequence[int]]]) -> bytes:
    """ConsumerProtocolAssignment v0: version, (topic, partitions) pairs, user data (null)."""
    parts = [_INT16.pack(0), _INT32.pack(len(topics))]
    for topic, partitions in sorted(topics):
        parts.append(_string(topic))
        parts.append(_INT32.pack(len(partitions)))
        parts.extend(_INT32.pack(p) for p in partitions)
    parts.append(_INT32.pack(-1))
    return b"".join(parts)
