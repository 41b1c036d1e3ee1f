"""Consumer groups as a library: list, describe (with lag), reset offsets, delete; what
kafka-consumer-groups.sh does, over the wire protocol.

- ``list_groups``: ListGroups to every broker (each lists the groups it coordinates), v4+ with
  a state filter and v5+ with a type filter when asked (a broker too old for a filter asked is
  ``UnsupportedByClusterError``, never a silently unfiltered list).
- ``describe_group``: FindCoordinator, then DescribeGroups and OffsetFetch (all the group's
  committed offsets) at the coordinator, then ListOffsets (latest) at each partition's leader:
  members with their assignments, and per partition committed offset, log end offset and lag.
- ``plan_reset`` / ``reset_offsets``: the new offsets of a reset (``group_offsets.reset_target``)
  for the partitions asked (or all the group committed), and, with ``execute``, an OffsetCommit
  of them as an admin commit (generation -1, no member), only while the group is Empty or Dead,
  as Kafka's tool refuses to reset a group with members.
- ``delete_groups``: DeleteGroups at each group's coordinator; per group its error code.

FindCoordinator (``client.coordinators.find_coordinator``, shared with Connect) is retried
while the coordinator is not available or loading (the first use creates
``__consumer_offsets``). Async; one ``ClusterClient`` per call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.client.admin import ClusterClient, build, element_type
from odradek.client.coordinators import find_coordinator
from odradek.client.errors import ClusterRequestError, UnsupportedByClusterError
from odradek.client.security import ClientSecurity
from odradek.common.partitions import TopicPartition
from odradek.errors import ErrorCode
from odradek.ops.cluster import read_cluster
from odradek.ops.errors import OpsError
from odradek.ops.group_offsets import (
    CONSUMER_PROTOCOL_TYPE,
    OffsetBounds,
    ResetKind,
    ResetSpec,
    decode_assignment,
    lag,
    reset_target,
)
from odradek.ops.model import ClusterView
from odradek.ops.reassign import REQUEST_TIMEOUT_S

__all__ = [
    "GroupListing",
    "MemberInfo",
    "PartitionOffsets",
    "GroupReport",
    "OffsetReset",
    "GroupNotInactiveError",
    "list_groups",
    "describe_group",
    "plan_reset",
    "reset_offsets",
    "delete_groups",
]

LIST_OFFSETS = 2
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42

LIST_OFFSETS_MAX_VERSION = 7
OFFSET_COMMIT_MAX_VERSION = 8
OFFSET_FETCH_MAX_VERSION = 7  # one group per request (v8+ batch groups)
DESCRIBE_GROUPS_MAX_VERSION = 5
LIST_GROUPS_MAX_VERSION = 5
DELETE_GROUPS_MAX_VERSION = 2

LATEST = -1
EARLIEST = -2
INACTIVE_STATES = ("Empty", "Dead")


class GroupNotInactiveError(OpsError):
    """A reset asked of a group with members: Kafka's tool refuses it too."""

    error_code = ErrorCode.non_empty_group


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str  # "" from brokers that answer ListGroups before v4
    type: str  # "" before v5
    coordinator: int


@dataclass(frozen=True, slots=True)
class MemberInfo:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    tp: TopicPartition
    committed: int | None
    log_end_offset: int | None
    member_id: str | None  # the member it is assigned to, if any

    @property
    def lag(self) -> int | None:
        return lag(self.committed, self.log_end_offset)


@dataclass(frozen=True, slots=True)
class GroupReport:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: tuple[MemberInfo, ...]
    partitions: tuple[PartitionOffsets, ...]

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)


@dataclass(frozen=True, slots=True)
class OffsetReset:
    tp: TopicPartition
    committed: int | None
    target: int | None  # None: left out (a shift without a committed offset)


# -- list, describe, delete -------------------------------------------------------------------


async def list_groups(
    bootstrap: str,
    *,
    states: Sequence[str] = (),
    types: Sequence[str] = (),
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> list[GroupListing]:
    """Every group of the cluster (each broker lists those it coordinates)."""
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        view = await read_cluster(client)
        listed: dict[str, GroupListing] = {}
        for broker_id in sorted(view.brokers):
            response = await client.send_to(
                broker_id,
                LIST_GROUPS,
                LIST_GROUPS_MAX_VERSION,
                lambda t: _list_request(t, states, types),
            )
            error = ErrorCode(response.error_code)
            if error != ErrorCode.none:
                raise ClusterRequestError(f"ListGroups at broker {broker_id}: {error.name}", error)
            for g in response.groups:
                listed[str(g.group_id)] = GroupListing(
                    str(g.group_id),
                    str(g.protocol_type),
                    str(getattr(g, "group_state", "")),
                    str(getattr(g, "group_type", "")),
                    broker_id,
                )
    return [listed[g] for g in sorted(listed)]


def _list_request(request_type: type, states: Sequence[str], types: Sequence[str]) -> Any:
    fields = request_type.__dataclass_fields__
    if states and "states_filter" not in fields:
        raise UnsupportedByClusterError("the cluster cannot filter groups by state (ListGroups v4)")
    if types and "types_filter" not in fields:
        raise UnsupportedByClusterError("the cluster cannot filter groups by type (ListGroups v5)")
    return build(request_type, states_filter=tuple(states), types_filter=tuple(types))


async def describe_group(
    bootstrap: str,
    group_id: str,
    *,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> GroupReport:
    """The group's state, members and, per partition, committed offset, log end and lag."""
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        view = await read_cluster(client)
        coordinator = await find_coordinator(client, group_id)
        described = await _describe(client, coordinator, group_id)
        committed = await fetch_committed(client, coordinator, group_id)
        members = tuple(
            MemberInfo(
                str(m.member_id),
                getattr(m, "group_instance_id", None),
                str(m.client_id),
                str(m.client_host),
                _assignment(described.protocol_type, bytes(m.member_assignment)),
            )
            for m in described.members
        )
        owner = {tp: m.member_id for m in members for tp in m.assignment}
        partitions = sorted(set(committed) | set(owner))
        ends = await list_offsets(client, view, partitions, LATEST)
    return GroupReport(
        group_id,
        str(described.group_state),
        str(described.protocol_type),
        str(described.protocol_data),
        coordinator,
        members,
        tuple(
            PartitionOffsets(tp, committed.get(tp), ends.get(tp), owner.get(tp))
            for tp in partitions
        ),
    )


def _assignment(protocol_type: str, data: bytes) -> tuple[TopicPartition, ...]:
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return ()  # another protocol (Connect's, say): its assignment is not partitions
    try:
        return decode_assignment(data)
    except ValueError:
        return ()


async def delete_groups(
    bootstrap: str,
    group_ids: Iterable[str],
    *,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> dict[str, ErrorCode]:
    """Delete each group at its coordinator; each group's error code (``none``: deleted)."""
    results: dict[str, ErrorCode] = {}
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        await read_cluster(client)
        for group_id in dict.fromkeys(group_ids):
            try:
                coordinator = await find_coordinator(client, group_id)
            except ClusterRequestError as e:
                results[group_id] = e.error_code
                continue
            response = await client.send_to(
                coordinator,
                DELETE_GROUPS,
                DELETE_GROUPS_MAX_VERSION,
                lambda t, g=group_id: build(t, groups_names=(g,)),
            )
            for result in response.results:
                results[str(result.group_id)] = ErrorCode(result.error_code)
    return results


# -- reset ------------------------------------------------------------------------------------


async def plan_reset(
    bootstrap: str,
    group_id: str,
    spec: ResetSpec,
    *,
    topics: Mapping[str, Sequence[int] | None] | None = None,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> list[OffsetReset]:
    """The new offsets of a reset, changing nothing (Kafka's ``--dry-run``)."""
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        return await _plan(client, group_id, spec, topics)


async def reset_offsets(
    bootstrap: str,
    group_id: str,
    spec: ResetSpec,
    *,
    topics: Mapping[str, Sequence[int] | None] | None = None,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> list[OffsetReset]:
    """Reset and commit (Kafka's ``--execute``); ``GroupNotInactiveError`` while it has members."""
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        planned = await _plan(client, group_id, spec, topics)
        coordinator = await find_coordinator(client, group_id)
        described = await _describe(client, coordinator, group_id)
        if described.group_state not in INACTIVE_STATES:
            raise GroupNotInactiveError(
                f"group {group_id} is {described.group_state}: offsets can be reset only while "
                "it has no members (stop its consumers first)"
            )
        await _commit(client, coordinator, group_id, [r for r in planned if r.target is not None])
    return planned


async def _plan(
    client: ClusterClient,
    group_id: str,
    spec: ResetSpec,
    topics: Mapping[str, Sequence[int] | None] | None,
) -> list[OffsetReset]:
    view = await read_cluster(client)
    coordinator = await find_coordinator(client, group_id)
    committed = await fetch_committed(client, coordinator, group_id)
    partitions = _partitions(view, committed, topics)
    starts = await list_offsets(client, view, partitions, EARLIEST)
    ends = await list_offsets(client, view, partitions, LATEST)
    at_time = (
        await list_offsets(client, view, partitions, spec.value)
        if spec.kind is ResetKind.DATETIME
        else {}
    )
    planned = []
    for tp in partitions:
        if tp not in starts or tp not in ends:
            raise ClusterRequestError(f"no offsets for {tp.topic}-{tp.partition}")
        bounds = OffsetBounds(starts[tp], ends[tp], at_time.get(tp))
        planned.append(
            OffsetReset(tp, committed.get(tp), reset_target(spec, committed.get(tp), bounds))
        )
    return planned


def _partitions(
    view: ClusterView,
    committed: Mapping[TopicPartition, int],
    topics: Mapping[str, Sequence[int] | None] | None,
) -> list[TopicPartition]:
    if topics is None:  # --all-topics: what the group committed
        return sorted(committed)
    chosen = []
    for topic, indexes in topics.items():
        existing = sorted(tp.partition for tp in view.partitions if tp.topic == topic)
        if not existing:
            raise ClusterRequestError(
                f"topic {topic!r} does not exist", ErrorCode.unknown_topic_or_partition
            )
        for index in existing if indexes is None else indexes:
            if index not in existing:
                raise ClusterRequestError(
                    f"{topic} has no partition {index}", ErrorCode.unknown_topic_or_partition
                )
            chosen.append(TopicPartition(topic, index))
    return sorted(set(chosen))


async def _commit(
    client: ClusterClient, coordinator: int, group_id: str, resets: Sequence[OffsetReset]
) -> None:
    if not resets:
        return
    by_topic: dict[str, list[OffsetReset]] = {}
    for reset in resets:
        by_topic.setdefault(reset.tp.topic, []).append(reset)

    def make(request_type: type) -> Any:
        topic_type = element_type(request_type, "topics")
        partition_type = element_type(topic_type, "partitions")
        return build(
            request_type,
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            retention_time_ms=-1,
            topics=tuple(
                build(
                    topic_type,
                    name=topic,
                    partitions=tuple(
                        build(
                            partition_type,
                            partition_index=r.tp.partition,
                            committed_offset=r.target,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                            commit_timestamp=-1,
                        )
                        for r in items
                    ),
                )
                for topic, items in by_topic.items()
            ),
        )

    response = await client.send_to(coordinator, OFFSET_COMMIT, OFFSET_COMMIT_MAX_VERSION, make)
    refusals = {
        f"{t.name}-{p.partition_index}": (ErrorCode(p.error_code), None)
        for t in response.topics
        for p in t.partitions
        if p.error_code != ErrorCode.none
    }
    if refusals:
        first = next(iter(refusals.values()))[0]
        raise ClusterRequestError(
            f"OffsetCommit refused for {', '.join(sorted(refusals))}", first, refusals
        )


# -- requests ---------------------------------------------------------------------------------


async def _describe(client: ClusterClient, coordinator: int, group_id: str) -> Any:
    response = await client.send_to(
        coordinator,
        DESCRIBE_GROUPS,
        DESCRIBE_GROUPS_MAX_VERSION,
        lambda t: build(t, groups=(group_id,), include_authorized_operations=False),
    )
    described = response.groups[0]
    error = ErrorCode(described.error_code)
    if error != ErrorCode.none:
        raise ClusterRequestError(f"DescribeGroups {group_id}: {error.name}", error)
    return described


async def fetch_committed(
    client: ClusterClient, coordinator: int, group_id: str
) -> dict[TopicPartition, int]:
    """Every offset ``group_id`` committed (OffsetFetch with all topics)."""
    response = await client.send_to(
        coordinator,
        OFFSET_FETCH,
        OFFSET_FETCH_MAX_VERSION,
        lambda t: build(t, group_id=group_id, topics=None, require_stable=False),
    )
    error = ErrorCode(getattr(response, "error_code", ErrorCode.none))
    if error != ErrorCode.none:
        raise ClusterRequestError(f"OffsetFetch {group_id}: {error.name}", error)
    committed = {}
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code == ErrorCode.none and p.committed_offset >= 0:
                committed[TopicPartition(str(topic.name), int(p.partition_index))] = int(
                    p.committed_offset
                )
    return committed


async def list_offsets(
    client: ClusterClient, view: ClusterView, partitions: Iterable[TopicPartition], timestamp: int
) -> dict[TopicPartition, int]:
    """ListOffsets at each partition's leader: the offset for ``timestamp`` (LATEST, EARLIEST,
    or epoch ms). A partition without a leader, an error, or no offset (-1) is left out."""
    by_leader: dict[int, dict[str, list[int]]] = {}
    for tp in partitions:
        info = view.partitions.get(tp)
        if info is None or info.leader < 0:
            continue
        by_leader.setdefault(info.leader, {}).setdefault(tp.topic, []).append(tp.partition)
    found: dict[TopicPartition, int] = {}
    for leader, topics in sorted(by_leader.items()):

        def make(request_type: type, topics: dict[str, list[int]] = topics) -> Any:
            topic_type = element_type(request_type, "topics")
            partition_type = element_type(topic_type, "partitions")
            return build(
                request_type,
                replica_id=-1,
                isolation_level=0,
                topics=tuple(
                    build(
                        topic_type,
                        name=topic,
                        partitions=tuple(
                            build(
                                partition_type,
                                partition_index=index,
                                current_leader_epoch=-1,
                                timestamp=timestamp,
                                max_num_offsets=1,
                            )
                            for index in indexes
                        ),
                    )
                    for topic, indexes in topics.items()
                ),
            )

        try:
            response = await client.send_to(leader, LIST_OFFSETS, LIST_OFFSETS_MAX_VERSION, make)
        except UnsupportedByClusterError:
            raise
        except OpsError:
            continue  # an unreachable leader: its partitions' offsets are unknown
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code == ErrorCode.none and p.offset >= 0:
                    found[TopicPartition(str(topic.name), int(p.partition_index))] = int(p.offset)
    return found
