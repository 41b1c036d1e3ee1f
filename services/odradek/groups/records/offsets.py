"""Committed offsets in ``__consumer_offsets``: Kafka's OffsetCommitKey and OffsetCommitValue.

The key names one partition of one group: record type 1 (``OffsetCommitKey``), or type 0, the
legacy key of the same layout that old Kafka versions wrote and that is still read
(``LegacyOffsetCommitKey``). The value is the committed offset; a null value (tombstone) says the
offset was deleted (OffsetDelete, DeleteGroups, expiry).

Value versions, as Kafka's ``OffsetCommitValue.json`` (0-4, flexible from 4):

| version | fields |
|---:|---|
| 0, 2 | offset, metadata, commitTimestamp |
| 1 | offset, metadata, commitTimestamp, expireTimestamp (OffsetCommit v2-v4's retention time) |
| 3, 4 | offset, leaderEpoch, metadata, commitTimestamp |

Odradek writes version 3, or version 1 when the commit carried a retention time (as Kafka), and
reads every version. ``offset_value`` is the one place that builds a value; readers use
``leader_epoch_of`` / ``expire_timestamp_of`` for the fields some versions lack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from odradek.groups.records.base import register

__all__ = [
    "OffsetCommitKey",
    "LegacyOffsetCommitKey",
    "OffsetCommitValueV0",
    "OffsetCommitValueV1",
    "OffsetCommitValueV2",
    "OffsetCommitValueV3",
    "OffsetCommitValueV4",
    "offset_value",
    "leader_epoch_of",
    "expire_timestamp_of",
]


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    __record_type__: ClassVar[int] = 1
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})
    topic: str = field(metadata={"kafka_type": "string"})
    partition: int = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True)
class LegacyOffsetCommitKey:
    """Record type 0: the same key, as Kafka's first versions wrote it; read, never written."""

    __record_type__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})
    topic: str = field(metadata={"kafka_type": "string"})
    partition: int = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True)
class OffsetCommitValueV0:
    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = False
    offset: int = field(metadata={"kafka_type": "int64"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: int = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True)
class OffsetCommitValueV1:
    __version__: ClassVar[int] = 1
    __flexible__: ClassVar[bool] = False
    offset: int = field(metadata={"kafka_type": "int64"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: int = field(metadata={"kafka_type": "int64"})
    expire_timestamp: int = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True)
class OffsetCommitValueV2:
    __version__: ClassVar[int] = 2
    __flexible__: ClassVar[bool] = False
    offset: int = field(metadata={"kafka_type": "int64"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: int = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True)
class OffsetCommitValueV3:
    __version__: ClassVar[int] = 3
    __flexible__: ClassVar[bool] = False
    offset: int = field(metadata={"kafka_type": "int64"})
    leader_epoch: int = field(metadata={"kafka_type": "int32"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: int = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True)
class OffsetCommitValueV4:
    __version__: ClassVar[int] = 4
    __flexible__: ClassVar[bool] = True
    offset: int = field(metadata={"kafka_type": "int64"})
    leader_epoch: int = field(metadata={"kafka_type": "int32"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: int = field(metadata={"kafka_type": "int64"})


_VALUES = (
    OffsetCommitValueV0,
    OffsetCommitValueV1,
    OffsetCommitValueV2,
    OffsetCommitValueV3,
    OffsetCommitValueV4,
)
register(OffsetCommitKey, *_VALUES)
register(LegacyOffsetCommitKey, *_VALUES)


def offset_value(
    offset: int, leader_epoch: int, metadata: str, commit_timestamp: int, expire_timestamp: int
) -> Any:
    """The value Odradek writes: v1 when the commit set an expiry (no leader epoch), else v3."""
    if expire_timestamp >= 0:
        return OffsetCommitValueV1(offset, metadata, commit_timestamp, expire_timestamp)
    return OffsetCommitValueV3(offset, leader_epoch, metadata, commit_timestamp)


def leader_epoch_of(value: Any) -> int:
    return getattr(value, "leader_epoch", -1)


def expire_timestamp_of(value: Any) -> int:
    return getattr(value, "expire_timestamp", -1)
