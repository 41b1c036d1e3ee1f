"""One member of a classic group (Kafka's ``ClassicGroupMember``).

A member is waiting in JoinGroup while ``join_future`` is set, and in SyncGroup while
``sync_future`` is set; completing one clears it. ``is_new``: joined in the current rebalance and
not yet given a generation; such a member may expire while it waits (the new-member join
timeout), the others count as heartbeating while they wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.groups.classic.messages import JoinAnswer, SyncAnswer
from odradek.groups.classic.waiting import Waiting, answer
from odradek.groups.limits import MEMBER_OVERHEAD_BYTES

__all__ = ["ClassicMember", "protocols_bytes"]


def protocols_bytes(protocols: tuple[tuple[str, bytes], ...]) -> int:
    """The bytes of a member's protocols (names and metadata), bounded by
    ``odradek.group.member.metadata.max.bytes``."""
    return sum(len(name) + len(metadata) for name, metadata in protocols)


@dataclass(slots=True, eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    is_new: bool = False
    join_future: Waiting[JoinAnswer] | None = field(default=None, repr=False)
    sync_future: Waiting[SyncAnswer] | None = field(default=None, repr=False)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def held_bytes(self) -> int:
        """Its metadata, assignment and fixed cost, as ``groups.limits`` counts them."""
        fields = len(self.member_id) + len(self.client_id) + len(self.client_host)
        return (
            MEMBER_OVERHEAD_BYTES
            + fields
            + protocols_bytes(self.protocols)
            + len(self.assignment)
            + len(self.group_instance_id or "")
        )

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Whether a rejoin changes nothing (same protocols, same metadata, same order)."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The first of its protocols that every member supports."""
        return next(name for name, _ in self.protocols if name in candidates)

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def complete_join(self, value: JoinAnswer) -> bool:
        future, self.join_future = self.join_future, None
        if future is None:
            return False
        answer(future, value)
        return True

    def complete_sync(self, value: SyncAnswer) -> bool:
        future, self.sync_future = self.sync_future, None
        if future is None:
            return False
        answer(future, value)
        return True
