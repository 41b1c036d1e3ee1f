"""What the classic handlers give the manager and get back: plain values, no kio types, so the
state machine is tested without the wire and every API version maps onto one form.

Answers are values with an error code, never exceptions: a JoinGroup or SyncGroup answer that
waits in a future is completed with one (``MEMBER_ID_REQUIRED`` carries the new member id).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.errors import ErrorCode

__all__ = ["JoinRequest", "JoinedMember", "JoinAnswer", "SyncAnswer", "LeaveMember"]

UNKNOWN_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), in the member's preference
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool  # v4+ (KIP-394): a new dynamic member first gets its id
    supports_skip_assignment: bool = False  # v9+: a static leader rejoining may skip assigning
    reason: str | None = None
    connection_id: str = ""  # whose pending member ids these are (groups.limits)


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    error: ErrorCode
    member_id: str
    generation_id: int = UNKNOWN_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False

    @classmethod
    def failed(cls, error: ErrorCode, member_id: str) -> JoinAnswer:
        return cls(error, member_id)


@dataclass(frozen=True, slots=True)
class SyncAnswer:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode = ErrorCode.none
