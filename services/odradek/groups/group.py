"""What every group is to the rest of the coordinator, classic or consumer (KIP-848).

One namespace: a group id names at most one group, of one type, in its shard
(``GroupCoordinatorShard.groups``). The offsets, the admin APIs (ListGroups, DescribeGroups,
DeleteGroups) and expiry see a group only through ``Group``; each type's state machine lives in
its own package (``groups.classic``, ``groups.consumer``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.groups.records.base import CoordinatorRecord

__all__ = ["GroupType", "MemberDescription", "GroupDescription", "Group"]


class GroupType(enum.Enum):
    CLASSIC = "classic"
    CONSUMER = "consumer"


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """One member as DescribeGroups reports it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    # Classic members: the chosen protocol's metadata and the SyncGroup assignment, opaque.
    # Consumer-protocol members: Kafka's ConsumerProtocolSubscription and
    # ConsumerProtocolAssignment encodings of their subscription and assignment, so that tools
    # that know only DescribeGroups read them as they read a classic consumer's.
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group as DescribeGroups reports it (ConsumerGroupDescribe has its own, richer form)."""

    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[MemberDescription, ...]


class Group(Protocol):
    group_id: str

    @property
    def type(self) -> GroupType: ...

    def state_name(self) -> str:
        """ListGroups' and DescribeGroups' state: Empty, Stable, PreparingRebalance, ...;
        consumer groups: Empty, Assigning, Reconciling, Stable, Dead."""
        ...

    def protocol_type(self) -> str | None:
        """ListGroups' protocol type: "consumer" for consumers, None for a group without one."""
        ...

    def is_empty(self) -> bool: ...

    def describe(self) -> GroupDescription: ...

    def validate_offset_commit(
        self,
        member_id: str,
        group_instance_id: str | None,
        generation_or_epoch: int,
        *,
        is_transactional: bool = False,
    ) -> None:
        """Raise ``GroupError`` unless this member may commit: classic groups check member id,
        instance id and generation (-1 and no member: a simple consumer's commit, allowed only
        while the group is empty, or a transactional commit that names no member); consumer
        groups the member epoch (STALE_MEMBER_EPOCH)."""
        ...

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9+ may name a member (KIP-848): raise ``GroupError`` if it is stale."""
        ...

    def validate_delete_group(self) -> None:
        """Raise ``GroupError`` (NON_EMPTY_GROUP) unless the group may be deleted."""
        ...

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether a member consumes ``topic`` (OffsetDelete refuses: GROUP_SUBSCRIBED_TO_TOPIC)."""
        ...

    def tombstones(self) -> Sequence[CoordinatorRecord]:
        """The records that delete this group's metadata (not its offsets) from the log."""
        ...
