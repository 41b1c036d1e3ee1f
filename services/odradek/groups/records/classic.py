"""The classic group's record of ``__consumer_offsets``: record type 2, Kafka's
``GroupMetadataKey`` / ``GroupMetadataValue`` (group-coordinator's ``GroupMetadataKey.json`` and
``GroupMetadataValue.json``).

One record holds the whole group as of its last completed rebalance: protocol type, generation,
chosen protocol, leader, and every member with its subscription (the chosen protocol's metadata)
and its assignment, opaque bytes. A tombstone (value None) deletes the group.

Odradek writes and reads value version 3 (with static members' ``group_instance_id``,
non-flexible, what Kafka 2.3 to 3.x write): the log holds only what Odradek wrote. Pure data;
any thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from odradek.groups.records.base import register

__all__ = ["GroupMetadataKey", "GroupMetadataMember", "GroupMetadataValue"]


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    __record_type__: ClassVar[int] = 2
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataMember:
    """One member (value v3): the fields in Kafka's order."""

    __flexible__: ClassVar[bool] = False
    member_id: str = field(metadata={"kafka_type": "string"})
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    rebalance_timeout: int = field(metadata={"kafka_type": "int32"})
    session_timeout: int = field(metadata={"kafka_type": "int32"})
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    assignment: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    """Value version 3."""

    __version__: ClassVar[int] = 3
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: int = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"}, default=None)
    leader: str | None = field(metadata={"kafka_type": "string"}, default=None)
    current_state_timestamp: int = field(metadata={"kafka_type": "int64"}, default=-1)
    members: tuple[GroupMetadataMember, ...] = ()


register(GroupMetadataKey, GroupMetadataValue)
