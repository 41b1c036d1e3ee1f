"""Test doubles of the group coordinator's managers, for tests of what sits on top of them (the
admin APIs, their handlers, the lag metric) without the classic, consumer and offsets managers.

They keep the interfaces those managers promise (``Group``; ``shard.offsets``: ``committed``,
``group_ids``, ``delete_group_offsets``) and the coordinator's one rule: state changes only by
replayed records. Their records are test-only types (990, 991), registered here, so a
``DoubleShard`` runs in a real ``CoordinatorRuntime`` over a ``MemoryLog`` and recovers by
replay like the real shard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from odradek.errors import ErrorCode
from odradek.groups.errors import GroupError
from odradek.groups.group import GroupDescription, GroupType, MemberDescription
from odradek.groups.records import CoordinatorRecord, register
from odradek.groups.shard import GroupCoordinatorShard, ShardContext

__all__ = [
    "DoubleGroupKey",
    "DoubleGroupValue",
    "DoubleOffsetKey",
    "DoubleOffsetValue",
    "OffsetAndMetadata",
    "DoubleGroup",
    "DoubleGroups",
    "DoubleOffsets",
    "DoubleShard",
    "group_record",
    "offset_record",
]


@dataclass(frozen=True, slots=True)
class DoubleGroupKey:
    __record_type__: ClassVar[int] = 990
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True)
class DoubleGroupValue:
    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = False
    type: str = field(metadata={"kafka_type": "string"})  # "classic" or "consumer"
    state: str = field(metadata={"kafka_type": "string"})
    protocol_type: str = field(metadata={"kafka_type": "string"})
    protocol_name: str = field(metadata={"kafka_type": "string"})
    members: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    topics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True)
class DoubleOffsetKey:
    __record_type__: ClassVar[int] = 991
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})
    topic: str = field(metadata={"kafka_type": "string"})
    partition: int = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True)
class DoubleOffsetValue:
    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = False
    offset: int = field(metadata={"kafka_type": "int64"})


register(DoubleGroupKey, DoubleGroupValue)
register(DoubleOffsetKey, DoubleOffsetValue)


def group_record(
    group_id: str,
    *,
    state: str = "Empty",
    type: str = "classic",
    protocol_type: str = "consumer",
    protocol_name: str = "",
    members: Sequence[str] = (),
    topics: Sequence[str] = (),
) -> CoordinatorRecord:
    return CoordinatorRecord(
        DoubleGroupKey(group_id),
        DoubleGroupValue(type, state, protocol_type, protocol_name, tuple(members), tuple(topics)),
    )


def offset_record(group_id: str, topic: str, partition: int, offset: int) -> CoordinatorRecord:
    return CoordinatorRecord(DoubleOffsetKey(group_id, topic, partition), DoubleOffsetValue(offset))


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = 0


class DoubleGroup:
    """A ``Group`` whose state is what its last record said."""

    def __init__(self, group_id: str, value: DoubleGroupValue):
        self.group_id = group_id
        self.value = value

    @property
    def type(self) -> GroupType:
        return GroupType(self.value.type)

    def state_name(self) -> str:
        return self.value.state

    def protocol_type(self) -> str | None:
        return self.value.protocol_type or None

    def is_empty(self) -> bool:
        return not self.value.members

    def describe(self) -> GroupDescription:
        return GroupDescription(
            self.group_id,
            self.value.state,
            self.value.protocol_type,
            self.value.protocol_name,
            tuple(
                MemberDescription(m, None, f"client-{m}", "/127.0.0.1", b"meta", b"assignment")
                for m in self.value.members
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
        pass

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        pass

    def validate_delete_group(self) -> None:
        if not self.is_empty():
            raise GroupError(ErrorCode.non_empty_group, f"group {self.group_id} has members")

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.value.topics

    def tombstones(self) -> Sequence[CoordinatorRecord]:
        return (CoordinatorRecord(DoubleGroupKey(self.group_id), None),)


class DoubleGroups:
    """The group managers' part: groups come and go in ``groups`` as their records say."""

    RECORD_KEYS = (DoubleGroupKey,)

    def __init__(self, groups: dict):
        self.groups = groups

    def replay(self, record: CoordinatorRecord) -> None:
        group_id = record.key.group
        if record.value is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = DoubleGroup(group_id, record.value)

    def on_loaded(self) -> None:
        pass

    def on_unloaded(self) -> None:
        pass


class DoubleOffsets:
    """The offsets manager's interface, committed offsets replayed from records."""

    RECORD_KEYS = (DoubleOffsetKey,)

    def __init__(self) -> None:
        self.offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}

    def replay(self, record: CoordinatorRecord) -> None:
        key = record.key
        group = self.offsets.setdefault(key.group, {})
        if record.value is None:
            group.pop((key.topic, key.partition), None)
            if not group:
                del self.offsets[key.group]
        else:
            group[(key.topic, key.partition)] = OffsetAndMetadata(record.value.offset)

    def committed(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        return dict(self.offsets.get(group_id, {}))

    def group_ids(self) -> set[str]:
        return set(self.offsets)

    def delete_group_offsets(self, group_id: str) -> list[CoordinatorRecord]:
        return [
            CoordinatorRecord(DoubleOffsetKey(group_id, topic, partition), None)
            for topic, partition in sorted(self.offsets.get(group_id, {}))
        ]

    def on_loaded(self) -> None:
        pass

    def on_unloaded(self) -> None:
        pass


class DoubleShard(GroupCoordinatorShard):
    """A shard with the doubles as its managers (``offsets`` as the real shard will name it)."""

    def __init__(self, context: ShardContext):
        super().__init__(context)
        self.offsets = DoubleOffsets()
        self._add(self.offsets)
        self.doubles = DoubleGroups(self.groups)
        self._add(self.doubles)
