"""OffsetFetch (9), v1-9: committed offsets of one group (v1-7) or of several (v8+).

Each group is one read of its shard (``OffsetMetadataManager.fetch_offsets``), answered once
what the shard wrote is replicated: a fetch never returns an offset a failover could lose.
Topics null (v2+) asks for every topic the group committed. A partition without a committed
offset is -1 with empty metadata. v9 names a KIP-848 member (member id, epoch) that its group
validates (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH). A group's error (not the coordinator, still
loading, an empty group id) is, as Kafka answers: v1 every requested partition's error, v2-7
the top-level error with no topics, v8+ the group's error. ``require_stable`` (v7+): a
partition for which a transaction has a pending offset of the group (TxnOffsetCommit, not yet
ended by its marker) is UNSTABLE_OFFSET_COMMIT with offset -1, which the client retries, as
Kafka; without it (or before v7) the committed offsets only.

Every group, topic and partition named is answered, each occurrence, as Kafka's
``fetchOffsets``; a group named twice with the same topics is read once (``answer_each``), and a
shard looks each distinct partition up once. The request and the answer are gone through in
time slices (``time_slices``: 250,000 repeats of a group in 1 MB held the loop 2.1 s).

Authorization, as Kafka's ``handleOffsetFetchRequest``: each group needs DESCRIBE (else its
error is GROUP_AUTHORIZATION_FAILED, the coordinator not asked), each topic DESCRIBE: a named
topic that is not describable answers TOPIC_AUTHORIZATION_FAILED per partition (offset -1), and
when every topic of the group is asked for, those not describable are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odradek.broker.authorization import filter_authorized, partition_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode, OdradekError
from odradek.groups.offsets import FetchedPartition
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, answer_each, sliced

API_KEY = ApiKey.OFFSET_FETCH
MULTI_GROUP_VERSION = 8

Fetched = list[tuple[str, list[FetchedPartition]]]


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    response_type = schemas.response_schema(API_KEY, version)
    require_stable = bool(getattr(request, "require_stable", False))
    slices = TimeSlices()
    if version < MULTI_GROUP_VERSION:
        topics = await _topics(request.topics, slices)
        error, fetched = await _fetch(
            ctx, request.group_id, topics, None, -1, require_stable, slices
        )
        if error != ErrorCode.none and version < 2:
            fetched = [(t, [FetchedPartition(p, None) for p in ps]) for t, ps in topics or ()]
            encoded = await _encode(response_type, "topics", fetched, error, slices)
            return build(response_type, topics=encoded)
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            topics=await _encode(response_type, "topics", fetched, ErrorCode.none, slices),
        )
    group_type = element_type(response_type, "groups")

    async def answer(group: Any) -> Any:
        error, fetched = await _fetch(
            ctx,
            group.group_id,
            await _topics(group.topics, slices),
            getattr(group, "member_id", None),
            getattr(group, "member_epoch", -1),
            require_stable,
            slices,
        )
        return group_type(
            group_id=group.group_id,
            error_code=error,
            topics=await _encode(group_type, "topics", fetched, ErrorCode.none, slices),
        )

    # A group named twice (the same topics) is read once and answered at each occurrence.
    answers = await answer_each(request.groups, answer, slices)
    return build(response_type, throttle_time=NO_THROTTLE, groups=tuple(answers))


async def _topics(topics: Any, slices: TimeSlices) -> list[tuple[str, list[int]]] | None:
    if topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) async for t in sliced(topics, slices)]


async def _distinct(
    topics: list[tuple[str, list[int]]], slices: TimeSlices
) -> list[tuple[str, list[int]]]:
    """Each topic once with each of its partitions once, in the order first named: what the
    shard looks up (the answer repeats what the request repeats, as Kafka's)."""
    merged: dict[str, dict[int, None]] = {}
    for topic, partitions in topics:
        seen = merged.setdefault(topic, {})
        for p in partitions:
            seen[p] = None
            await slices.tick()
        await slices.tick()
    return [(t, list(ps)) for t, ps in merged.items()]


async def _fetch(
    ctx: RequestContext,
    group_id: str,
    topics: list[tuple[str, list[int]]] | None,
    member_id: str | None,
    member_epoch: int,
    require_stable: bool,
    slices: TimeSlices,
) -> tuple[ErrorCode, Fetched]:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, []
    groups = ctx.broker.groups
    if groups is None:
        return ErrorCode.coordinator_not_available, []
    if not group_id:
        return ErrorCode.invalid_group_id, []
    wanted = None if topics is None else await _distinct(topics, slices)
    refused: set[str] = set()
    if wanted is not None:
        wanted, unauthorized = partition_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, wanted, lambda t: t[0]
        )
        refused = {t for t, _ in unauthorized}
    try:
        found = await groups.read(
            group_id,
            lambda shard: shard.offsets.fetch_offsets(
                group_id, wanted, member_id, member_epoch, require_stable
            ),
        )
    except OdradekError as e:
        return e.error_code, []
    if topics is None:  # every topic of the group: those not describable are left out
        described = filter_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in found)
        )
        return ErrorCode.none, [(t, ps) for t, ps in found if t in described]
    by_partition = {(t, p.partition): p for t, ps in found for p in ps}
    fetched: Fetched = []
    for named in (False, True):  # the topics looked up, then the refused ones, as before
        for topic, partitions in topics:
            if (topic in refused) is not named:
                continue
            answered = []
            for p in partitions:
                answered.append(_Refused(p, None) if named else by_partition[(topic, p)])
                await slices.tick()
            fetched.append((topic, answered))
            await slices.tick()
    return ErrorCode.none, fetched


@dataclass(frozen=True, slots=True)
class _Refused(FetchedPartition):
    """A partition of a topic the principal may not describe: answered -1, with the error."""


def _error_of(partition: FetchedPartition, error: ErrorCode) -> ErrorCode:
    if isinstance(partition, _Refused):
        return ErrorCode.topic_authorization_failed
    return ErrorCode.unstable_offset_commit if partition.unstable else error


async def _encode(
    parent_type: type[Any], field: str, fetched: Fetched, error: ErrorCode, slices: TimeSlices
) -> tuple:
    topic_type = element_type(parent_type, field)
    partition_type = element_type(topic_type, "partitions")
    encoded = []
    for topic, partitions in fetched:
        answers = []
        for p in partitions:
            answers.append(
                build(
                    partition_type,
                    partition_index=p.partition,
                    committed_offset=-1 if p.offset is None else p.offset.committed_offset,
                    committed_leader_epoch=-1 if p.offset is None else p.offset.leader_epoch,
                    metadata="" if p.offset is None else p.offset.metadata,
                    error_code=_error_of(p, error),
                )
            )
            await slices.tick()
        encoded.append(topic_type(name=topic, partitions=tuple(answers)))
        await slices.tick()
    return tuple(encoded)
