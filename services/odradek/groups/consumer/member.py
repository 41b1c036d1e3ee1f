"""One member of a KIP-848 consumer group, as its records (types 5 and 8) describe it.

A member is a frozen value: an operation builds the next one with ``dataclasses.replace`` and
writes the records that say so; replaying them installs it. ``member_epoch`` is the epoch of
the assignment the member has been given (``assigned``); ``previous_member_epoch`` the one
before, accepted once more from a member whose last answer was lost. ``state``:

- STABLE: the member has its target assignment, or all of it that is free;
- UNREVOKED_PARTITIONS: it must first give up ``pending_revocation`` (its epoch does not move
  until it reports, in a heartbeat, that it owns no more of them);
- UNRELEASED_PARTITIONS: it is at the target epoch, but some partitions of its target are still
  owned by other members that have not revoked them yet: they are given once freed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from odradek.groups.consumer.assignment import Assignment
from odradek.groups.limits import MEMBER_OVERHEAD_BYTES

__all__ = ["MemberState", "ConsumerGroupMember"]


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    # Subscription and client (record type 5).
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    # Current assignment (record type 8).
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def held_bytes(self) -> int:
        """Its subscription, ids and assignment (a topic id and an int per partition), and a
        fixed cost, as ``groups.limits`` counts them."""
        strings = (self.member_id, self.instance_id, self.rack_id, self.client_id)
        held = MEMBER_OVERHEAD_BYTES + sum(len(s or "") for s in strings) + len(self.client_host)
        held += sum(map(len, self.subscribed_topic_names)) + len(self.subscribed_topic_regex or "")
        for assignment in (self.assigned, self.pending_revocation):
            held += sum(16 + 8 * len(partitions) for partitions in assignment.values())
        return held

    def same_subscription(self, other: ConsumerGroupMember) -> bool:
        return (
            self.instance_id == other.instance_id
            and self.rack_id == other.rack_id
            and self.client_id == other.client_id
            and self.client_host == other.client_host
            and self.subscribed_topic_names == other.subscribed_topic_names
            and self.subscribed_topic_regex == other.subscribed_topic_regex
            and self.rebalance_timeout_ms == other.rebalance_timeout_ms
            and self.server_assignor == other.server_assignor
        )

    def same_assignment(self, other: ConsumerGroupMember) -> bool:
        return (
            self.member_epoch == other.member_epoch
            and self.previous_member_epoch == other.previous_member_epoch
            and self.state == other.state
            and dict(self.assigned) == dict(other.assigned)
            and dict(self.pending_revocation) == dict(other.pending_revocation)
        )
