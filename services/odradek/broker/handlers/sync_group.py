"""SyncGroup (14), v0-5: the leader hands out the assignment; every member gets its own.

Thin: ``shard.classic.sync`` on the group's shard; a follower's answer waits for the leader's
SyncGroup, the leader's for its GroupMetadata record to be replicated. v3+ carries
``group.instance.id``; v5 the protocol type and name, checked against the group's
(INCONSISTENT_GROUP_PROTOCOL) and returned.

Needs READ on the group (Kafka's ``handleSyncGroupRequest``):
otherwise GROUP_AUTHORIZATION_FAILED, and the coordinator is not asked.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build
from odradek.errors import ErrorCode, OdradekError
from odradek.groups.classic.messages import SyncAnswer
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.SYNC_GROUP


async def handle(ctx: RequestContext, request: Any) -> Any:
    groups = ctx.broker.groups
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    instance_id = getattr(request, "group_instance_id", None)
    protocol_type = getattr(request, "protocol_type", None)
    protocol_name = getattr(request, "protocol_name", None)
    try:
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
            answer = SyncAnswer(ErrorCode.group_authorization_failed)
        elif groups is None:
            answer = SyncAnswer(ErrorCode.coordinator_not_available)
        else:
            answer = await groups.write(
                request.group_id,
                lambda shard: shard.classic.sync(
                    request.group_id,
                    request.member_id,
                    instance_id,
                    request.generation_id,
                    protocol_type,
                    protocol_name,
                    assignments,
                ),
            )
    except OdradekError as e:
        answer = SyncAnswer(e.error_code)
    return build(
        schemas.response_schema(API_KEY, ctx.api_version),
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name,
        assignment=answer.assignment,
    )
