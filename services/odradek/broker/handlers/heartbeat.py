"""Heartbeat (12), v0-4: a classic group's member is alive; the answer says whether the group
is rebalancing (REBALANCE_IN_PROGRESS: rejoin) or the member is gone (UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, FENCED_INSTANCE_ID). Thin: ``shard.classic.heartbeat``. v3+ carries
``group.instance.id``.

Needs READ on the group (Kafka's ``handleHeartbeatRequest``):
otherwise GROUP_AUTHORIZATION_FAILED, and the coordinator is not asked.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build
from odradek.errors import ErrorCode, OdradekError
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.HEARTBEAT


async def handle(ctx: RequestContext, request: Any) -> Any:
    groups = ctx.broker.groups
    instance_id = getattr(request, "group_instance_id", None)
    try:
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
            error = ErrorCode.group_authorization_failed
        elif groups is None:
            error = ErrorCode.coordinator_not_available
        else:
            error = await groups.write(
                request.group_id,
                lambda shard: shard.classic.heartbeat(
                    request.group_id, request.member_id, instance_id, request.generation_id
                ),
            )
    except OdradekError as e:
        error = e.error_code
    return build(
        schemas.response_schema(API_KEY, ctx.api_version),
        throttle_time=NO_THROTTLE,
        error_code=error,
    )
