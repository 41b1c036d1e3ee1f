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

API_KEY = ApiKey.OFFSET_FETCH
MULTI_GROUP_VERSION = 8

Fetched = list[tuple[str, list[FetchedPartition]]]


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    response_type = schemas.response_schema(API_KEY, version)
    require_stable = bool(getattr(request, "require_stable", False))
    if version < MULTI_GROUP_VERSION:
        topics = _topics(request.topics)
        error, fetched = await _fetch(ctx, request.group_id, topics, None, -1, require_stable)
        if error != ErrorCode.none and version < 2:
            fetched = [(t, [FetchedPartition(p, None) for p in ps]) for t, ps in topics or ()]
            return build(response_type, topics=_encode(response_type, "topics", fetched, error))
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            topics=_encode(response_type, "topics", fetched, ErrorCode.none),
        )
    group_type = element_type(response_type, "groups")
    answers = []
    for group in request.groups:
        error, fetched = await _fetch(
            ctx,
            group.group_id,
            _topics(group.topics),
            getattr(group, "member_id", None),
            getattr(group, "member_epoch", -1),
            require_stable,
        )
        answers.append(
            group_type(
                group_id=group.group_id,
                error_code=error,
                topics=_encode(group_type, "topics", fetched, ErrorCode.none),
            )
        )
    return build(response_type, throttle_time=NO_THROTTLE, groups=tuple(answers))


def _topics(topics: Any) -> list[tuple[str, list[int]]] | None:
    if topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) for t in topics]


async def _fetch(
    ctx: RequestContext,
    group_id: str,
    topics: list[tuple[str, list[int]]] | None,
    member_id: str | None,
    member_epoch: int,
    require_stable: bool,
) -> tuple[ErrorCode, Fetched]:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, []
    groups = ctx.broker.groups
    if groups is None:
        return ErrorCode.coordinator_not_available, []
    if not group_id:
        return ErrorCode.invalid_group_id, []
    refused: list[tuple[str, list[int]]] = []
    if topics is not None:
        topics, refused = partition_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics, lambda t: t[0]
        )
    try:
        fetched = await groups.read(
            group_id,
            lambda shard: shard.offsets.fetch_offsets(
                group_id, topics, member_id, member_epoch, require_stable
            ),
        )
    except OdradekError as e:
        return e.error_code, []
    if topics is None:  # every topic of the group: those not describable are left out
        described = filter_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in fetched)
        )
        fetched = [(t, ps) for t, ps in fetched if t in described]
    return ErrorCode.none, fetched + [
        (t, [_Refused(p, None) for p in partitions]) for t, partitions in refused
    ]


@dataclass(frozen=True, slots=True)
class _Refused(FetchedPartition):
    """A partition of a topic the principal may not describe: answered -1, with the error."""


def _error_of(partition: FetchedPartition, error: ErrorCode) -> ErrorCode:
    if isinstance(partition, _Refused):
        return ErrorCode.topic_authorization_failed
    return ErrorCode.unstable_offset_commit if partition.unstable else error


def _encode(parent_type: type[Any], field: str, fetched: Fetched, error: ErrorCode) -> tuple:
    topic_type = element_type(parent_type, field)
    partition_type = element_type(topic_type, "partitions")
    return tuple(
        topic_type(
            name=topic,
            partitions=tuple(
                build(
                    partition_type,
                    partition_index=p.partition,
                    committed_offset=-1 if p.offset is None else p.offset.committed_offset,
                    committed_leader_epoch=-1 if p.offset is None else p.offset.leader_epoch,
                    metadata="" if p.offset is None else p.offset.metadata,
                    error_code=_error_of(p, error),
                )
                for p in partitions
            ),
        )
        for topic, partitions in fetched
    )
