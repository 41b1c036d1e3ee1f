"""OffsetCommit (8), v2-9: a group's (or a simple consumer's) committed offsets.

Decodes the request into ``PartitionCommit``s, runs ``OffsetMetadataManager.commit_offsets`` on
the group's shard, and answers once the records are replicated to the ISR (the runtime). An
error of the whole request (not the coordinator, unknown member, stale generation, an empty group
id) is every partition's error, as Kafka answers. v2-v4 carry a retention time (-1: the broker's
``offsets.retention.minutes``); before v9 a generation for a group that does not exist is
ILLEGAL_GENERATION, from v9 on GROUP_ID_NOT_FOUND (KIP-848).

Authorization, as Kafka's ``handleOffsetCommitRequest``: READ on the group, else every partition
answers GROUP_AUTHORIZATION_FAILED; READ on each topic, else its partitions answer
TOPIC_AUTHORIZATION_FAILED and are not committed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.commit_shape import (
    commits_of,
    partition_errors_response,
    readable_commits,
)
from odradek.errors import ErrorCode, OdradekError
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices

API_KEY = ApiKey.OFFSET_COMMIT


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    commits = await commits_of(request, slices)
    retention = getattr(request, "retention_time", None)
    retention_ms = -1 if retention is None else retention // timedelta(milliseconds=1)
    errors: dict[tuple[str, int], ErrorCode] = {}
    failed = ErrorCode.none
    groups = ctx.broker.groups
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return await partition_errors_response(
            API_KEY, ctx.api_version, request, {}, ErrorCode.group_authorization_failed
        )
    commits, refused = readable_commits(ctx, commits)
    try:
        if not commits and refused:
            pass  # nothing the principal may commit: only the refusals to answer
        elif groups is None:
            failed = ErrorCode.coordinator_not_available
        elif not request.group_id:
            failed = ErrorCode.invalid_group_id
        else:
            errors = await groups.write(
                request.group_id,
                lambda shard: shard.offsets.commit_offsets(
                    request.group_id,
                    request.member_id,
                    getattr(request, "group_instance_id", None),
                    request.generation_id_or_member_epoch,
                    commits,
                    retention_ms,
                ),
            )
    except OdradekError as e:
        failed = e.error_code
        if failed == ErrorCode.group_id_not_found and ctx.api_version < 9:
            failed = ErrorCode.illegal_generation
    return await partition_errors_response(
        API_KEY, ctx.api_version, request, errors, failed, refused, slices
    )
