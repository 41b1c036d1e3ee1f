"""The admin APIs of one shard: ListGroups, DescribeGroups, DeleteGroups (Kafka's
``GroupMetadataManager.listGroups`` / ``describeGroups`` / ``groupDeleteRecords``).

Pure functions of a shard's state: the groups of its namespace (``GroupCoordinatorShard.groups``)
and its committed offsets (``OffsetsView``, the offsets manager). They see a group only through
``Group`` (classic and consumer alike) and hold no state of their own, so they need no records of
their own and no place in the shard's managers.

**Groups known only by their offsets.** A simple consumer (``assign()`` + commit) commits with
generation -1 and no member id, and no group object is created for it; its group exists as
committed offsets alone. Such a group lists and describes as Kafka's coordinator shows it: state
``Empty``, protocol type "" (no protocol), type ``classic``, no members; and it may be deleted.

The empty string is a group id like any other here, as in Kafka (its coordinator accepts it in
DescribeGroups and DeleteGroups "for backwards compatibility"; only a null id, which these APIs
cannot carry, is INVALID_GROUP_ID).

**DeleteGroups** (``delete_group``) refuses what is not empty (``Group.validate_delete_group``:
NON_EMPTY_GROUP) and an unknown group (GROUP_ID_NOT_FOUND), else returns the tombstones of the
group's offsets then of its metadata, in one write: replaying them removes both (the managers
own that), and a coordinator that loads the log later replays the same tombstones.

Called on the event loop, within one operation of the shard (the runtime's lock).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from odradek.coordinator.result import Result
from odradek.errors import ErrorCode
from odradek.groups.errors import GroupError
from odradek.groups.group import Group, GroupDescription, GroupType
from odradek.groups.records.base import CoordinatorRecord

__all__ = [
    "OffsetsView",
    "ListedGroup",
    "EMPTY",
    "DEAD",
    "list_groups",
    "describe_group",
    "delete_group",
]

EMPTY = "Empty"
DEAD = "Dead"
NO_PROTOCOL_TYPE = ""


class OffsetsView(Protocol):
    """What the admin APIs need of the offsets manager (``shard.offsets``)."""

    def group_ids(self) -> set[str]:
        """Groups with committed offsets, with or without a group object."""
        ...

    def delete_group_offsets(self, group_id: str) -> list[CoordinatorRecord]:
        """The tombstones of every offset ``group_id`` committed."""
        ...


@dataclass(frozen=True, slots=True)
class ListedGroup:
    """One group as ListGroups reports it."""

    group_id: str
    protocol_type: str
    state: str
    type: GroupType


def list_groups(
    groups: Mapping[str, Group],
    offsets: OffsetsView,
    *,
    states_filter: Collection[str] = (),
    types_filter: Collection[str] = (),
) -> list[ListedGroup]:
    """The shard's groups, filtered as ListGroups v4+ (states) and v5+ (types) ask.

    Filters compare case-insensitively (Kafka parses them so); an empty filter admits all, a
    filter naming nothing known admits nothing (as Kafka's).
    """
    states = {s.lower() for s in states_filter}
    types = {t.lower() for t in types_filter}
    listed = [
        ListedGroup(
            group_id, group.protocol_type() or NO_PROTOCOL_TYPE, group.state_name(), group.type
        )
        for group_id, group in groups.items()
    ]
    listed.extend(
        ListedGroup(group_id, NO_PROTOCOL_TYPE, EMPTY, GroupType.CLASSIC)
        for group_id in offsets.group_ids() - groups.keys()
    )
    return sorted(
        (
            g
            for g in listed
            if (not states or g.state.lower() in states) and (not types or g.type.value in types)
        ),
        key=lambda g: g.group_id,
    )


def describe_group(
    groups: Mapping[str, Group], offsets: OffsetsView, group_id: str
) -> GroupDescription:
    """DescribeGroups' answer for one group: Kafka describes an unknown group as ``Dead``
    without an error, and a group known only by its offsets as ``Empty`` without a protocol."""
    group = groups.get(group_id)
    if group is not None:
        return group.describe()
    if group_id in offsets.group_ids():
        return GroupDescription(group_id, EMPTY, NO_PROTOCOL_TYPE, "", ())
    return GroupDescription(group_id, DEAD, "", "", ())


def delete_group(
    groups: Mapping[str, Group], offsets: OffsetsView, group_id: str
) -> Result[ErrorCode]:
    """The records that delete ``group_id`` and its offsets; ``GroupError`` if it may not be."""
    group = groups.get(group_id)
    if group is None and group_id not in offsets.group_ids():
        raise GroupError(ErrorCode.group_id_not_found, f"group {group_id!r} does not exist")
    if group is not None:
        group.validate_delete_group()
    records: list[CoordinatorRecord] = list(offsets.delete_group_offsets(group_id))
    if group is not None:
        records.extend(group.tombstones())
    return Result(records=records, response=ErrorCode.none)
