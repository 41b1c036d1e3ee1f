"""FindCoordinator (10): which broker coordinates a group or a transactional id (v0-3 one
key, v4+ a batch of keys).

Each key needs DESCRIBE on its group or transactional id (Kafka's ``getCoordinator``): otherwise
it answers GROUP_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED with no node, and nothing is looked
up (no internal topic is created for it). The look-up is the domain's
(``broker.coordinator_lookup``: the partition leader, or COORDINATOR_NOT_AVAILABLE while the
internal topic is created or has no leader; key types other than groups and transactions are
INVALID_REQUEST); this module decodes the keys and encodes the answers.

v4+ keys are answered in time slices, each distinct key found once (``time_slices.answer_each``):
a 1 MB request may name a million; Kafka caps nothing here.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.coordinator_lookup import (
    GROUP_KEY,
    TRANSACTION_KEY,
    Coordinator,
    find_coordinator,
)
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import answer_each

API_KEY = ApiKey.FIND_COORDINATOR


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    key_type = getattr(request, "key_type", GROUP_KEY)
    if ctx.api_version < 4:
        answer = await _find(ctx, key_type, request.key)
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=answer.error,
            error_message=answer.message,
            node_id=answer.node_id,
            host=answer.host,
            port=answer.port,
        )
    coordinator_type = element_type(response_type, "coordinators")

    async def one(key: str) -> Any:
        answer = await _find(ctx, key_type, key)
        return coordinator_type(
            key=key,
            node_id=answer.node_id,
            host=answer.host,
            port=answer.port,
            error_code=answer.error,
            error_message=answer.message,
        )

    coordinators = await answer_each(request.coordinator_keys, one)
    return build(response_type, throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))


async def _find(ctx: RequestContext, key_type: int, key: str) -> Coordinator:
    if key_type == GROUP_KEY and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return Coordinator(ErrorCode.group_authorization_failed)
    if key_type == TRANSACTION_KEY and not ctx.authorize(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return Coordinator(ErrorCode.transactional_id_authorization_failed)
    return await find_coordinator(ctx.broker, key_type, key, ctx.listener.name)
