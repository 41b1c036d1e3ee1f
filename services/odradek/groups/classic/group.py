"""A classic group: its members, generation, chosen protocol and state (Kafka's
``ClassicGroup``), and what the rest of the coordinator asks of a ``Group``.

Invariants:

- ``members`` holds every member with a generation or joining one; ``pending_members`` the ids
  handed out with MEMBER_ID_REQUIRED (KIP-394) that have not joined yet: neither is a member
  until it joins with that id;
- ``static_members`` maps each static member's ``group.instance.id`` to its current member id;
  an older member id of the same instance is fenced (FENCED_INSTANCE_ID);
- the leader is a member (or None when there is none); the generation only grows;
- ``protocol_name`` is the protocol every member supports, chosen when a join phase completes,
  None while the group has no members;
- only the manager changes a group (``manager``); state moves only along
  ``ClassicGroupState.valid_previous``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from odradek.errors import ErrorCode
from odradek.groups.classic.member import ClassicMember
from odradek.groups.classic.messages import JoinAnswer, JoinedMember, SyncAnswer
from odradek.groups.classic.state import ClassicGroupState
from odradek.groups.errors import GroupError
from odradek.groups.group import GroupDescription, GroupType, MemberDescription
from odradek.groups.limits import PENDING_MEMBER_BYTES
from odradek.groups.records.base import CoordinatorRecord
from odradek.groups.records.classic import (
    GroupMetadataKey,
    GroupMetadataMember,
    GroupMetadataValue,
)

__all__ = ["ClassicGroup", "CONSUMER_PROTOCOL_TYPE"]

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int = -1):
        self.group_id = group_id
        self.state = ClassicGroupState.EMPTY
        self.previous_state = ClassicGroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self._protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}
        # Each pending member id with the connection that asked for it (``groups.limits``).
        self.pending_members: dict[str, str] = {}
        self.pending_sync_members: set[str] = set()
        # A member joined during the initial rebalance's delay: wait once more (KIP-134).
        self.new_member_added = False

    # -- the Group protocol ----------------------------------------------------------------

    @property
    def type(self) -> GroupType:
        return GroupType.CLASSIC

    def state_name(self) -> str:
        return self.state.value

    def protocol_type(self) -> str | None:
        """The members' protocol type ("consumer", "connect", ...), kept while the group is
        empty after having had members; None for a group that never had one."""
        return self._protocol_type

    def is_empty(self) -> bool:
        return self.state is ClassicGroupState.EMPTY

    def describe(self) -> GroupDescription:
        stable = self.state is ClassicGroupState.STABLE
        return GroupDescription(
            group_id=self.group_id,
            state=self.state.value,
            protocol_type=self._protocol_type or "",
            protocol_name=(self.protocol_name or "") if stable else "",
            members=tuple(
                MemberDescription(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    metadata=m.metadata(self.protocol_name) if stable else b"",
                    assignment=m.assignment if stable else b"",
                )
                for m in self.members.values()
            ),
        )

    def validate_offset_commit(
        self,
        member_id: str,
        group_instance_id: str | None,
        generation_or_epoch: int,
        *,
        is_transactional: bool = False,
    ) -> None:
        if self.state is ClassicGroupState.DEAD:
            raise GroupError(ErrorCode.coordinator_not_available, f"group {self.group_id} is dead")
        if generation_or_epoch < 0 and self.state is ClassicGroupState.EMPTY:
            return  # an admin client's or a simple consumer's commit
        if generation_or_epoch >= 0 or member_id or group_instance_id is not None:
            operation = "transactional offset commit" if is_transactional else "offset commit"
            self.validate_member(member_id, group_instance_id, operation)
            if generation_or_epoch != self.generation_id:
                raise GroupError(
                    ErrorCode.illegal_generation,
                    f"generation {generation_or_epoch} is not the group's {self.generation_id}",
                )
            # Kafka: a transactional commit is not refused while the group rebalances.
            if self.state is ClassicGroupState.COMPLETING_REBALANCE and not is_transactional:
                raise GroupError(ErrorCode.rebalance_in_progress)
        elif not is_transactional:
            # A TxnOffsetCommit before v3 names no member: Kafka accepts it from anyone.
            raise GroupError(
                ErrorCode.unknown_member_id,
                "a commit without member id and generation is only accepted by an empty group",
            )

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Classic groups do not check who fetches (KIP-848's member checks are for its groups)."""

    def validate_delete_group(self) -> None:
        if self.state is ClassicGroupState.DEAD:
            raise GroupError(ErrorCode.group_id_not_found, f"group {self.group_id} is dead")
        if self.state is not ClassicGroupState.EMPTY:
            raise GroupError(ErrorCode.non_empty_group, f"group {self.group_id} has members")

    def is_subscribed_to(self, topic: str) -> bool:
        """Only a consumer group's subscriptions are known (its members' metadata); a group of
        another protocol type consumes no topic the coordinator knows of."""
        if self._protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return False
        for member in self.members.values():
            topics = subscribed_topics(member.metadata(self.protocol_name))
            if topics is None or topic in topics:
                return True  # unreadable metadata: assume it does, as the safe answer
        return False

    def tombstones(self) -> Sequence[CoordinatorRecord]:
        return [CoordinatorRecord(GroupMetadataKey(self.group_id), None)]

    # -- membership ------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def validate_member(
        self, member_id: str, group_instance_id: str | None, operation: str
    ) -> None:
        """UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID for an older member id of a static instance."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                raise GroupError(
                    ErrorCode.unknown_member_id,
                    f"{operation}: instance {group_instance_id} is not a member",
                )
            if current != member_id:
                raise GroupError(
                    ErrorCode.fenced_instance_id,
                    f"{operation}: instance {group_instance_id} is member {current} now,"
                    f" not {member_id}",
                )
        elif member_id not in self.members:
            raise GroupError(
                ErrorCode.unknown_member_id, f"{operation}: unknown member {member_id}"
            )

    def add(self, member: ClassicMember) -> None:
        if not self.members:
            self._protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, group_instance_id: str, old_id: str, new_id: str) -> None:
        """The instance rejoined with a new member id: the old one is fenced, its waits end."""
        member = self.members.pop(old_id)
        member.complete_join(JoinAnswer.failed(ErrorCode.fenced_instance_id, old_id))
        member.complete_sync(SyncAnswer(ErrorCode.fenced_instance_id))
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)

    def held_bytes(self) -> int:
        """What its members and pending member ids hold, as ``groups.limits`` counts it."""
        members = sum(m.held_bytes() for m in self.members.values())
        return members + PENDING_MEMBER_BYTES * len(self.pending_members)

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """A joining member fits if the group is empty (and it names a type and a protocol) or
        it has the group's type and a protocol every member supports."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self._protocol_type and bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        candidates = set(first.protocol_names())
        for member in members:
            candidates &= set(member.protocol_names())
        return candidates

    def select_protocol(self) -> str:
        """Each member votes for its first protocol that all support; the most votes win (ties:
        the candidate first in the first member's preference)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def all_members_joined(self) -> bool:
        joined = sum(1 for m in self.members.values() if m.awaiting_join)
        return joined == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def joined_members(self) -> tuple[JoinedMember, ...]:
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    # -- state -----------------------------------------------------------------------------

    def transition_to(self, target: ClassicGroupState, now_ms: int) -> None:
        if self.state not in target.valid_previous:
            raise RuntimeError(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def in_state(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(ClassicGroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(ClassicGroupState.EMPTY, now_ms)
        self.pending_sync_members = set(self.members)

    # -- records ---------------------------------------------------------------------------

    def record(self, assignments: dict[str, bytes] | None = None) -> CoordinatorRecord:
        """The group as one GroupMetadata record, with ``assignments`` or the current ones."""
        return CoordinatorRecord(
            GroupMetadataKey(self.group_id),
            GroupMetadataValue(
                protocol_type=self._protocol_type or "",
                generation=self.generation_id,
                protocol=self.protocol_name,
                leader=self.leader_id,
                current_state_timestamp=self.state_timestamp_ms,
                members=tuple(
                    GroupMetadataMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        rebalance_timeout=m.rebalance_timeout_ms,
                        session_timeout=m.session_timeout_ms,
                        subscription=m.metadata(self.protocol_name),
                        assignment=(
                            m.assignment if assignments is None else assignments[m.member_id]
                        ),
                    )
                    for m in self.members.values()
                ),
            ),
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """The group a loading coordinator rebuilds: Stable with its members, or Empty."""
        group = cls(group_id, value.current_state_timestamp)
        group.generation_id = value.generation
        group._protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in value.members:
            group.add(
                ClassicMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout,
                    session_timeout_ms=m.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=((value.protocol or "", m.subscription),),
                    assignment=m.assignment,
                )
            )
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        if group.members:
            group.state = ClassicGroupState.STABLE
            group.previous_state = ClassicGroupState.COMPLETING_REBALANCE
        return group


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (version, then an array of strings), None if
    ``metadata`` is not one."""
    try:
        (version,) = _I16.unpack_from(metadata, 0)
        if version < 0:
            return None
        (count,) = _I32.unpack_from(metadata, 2)
        offset, topics = 6, set()
        for _ in range(max(count, 0)):
            (length,) = _I16.unpack_from(metadata, offset)
            offset += 2
            if length < 0 or offset + length > len(metadata):
                return None
            topics.add(bytes(metadata[offset : offset + length]).decode())
            offset += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
