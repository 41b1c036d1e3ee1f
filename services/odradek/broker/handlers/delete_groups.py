"""DeleteGroups (42, v0-2): delete empty groups and their committed offsets.

Each group is deleted by the shard that owns it, in one write of that shard
(``groups.admin.delete_group``: the tombstones of its offsets and of its metadata, acknowledged
once replicated). Per group, as Kafka: GROUP_ID_NOT_FOUND for a group without metadata or
offsets (the empty id is an id like another), NON_EMPTY_GROUP while it has members,
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when its shard is not here or not loaded. A
group named twice is answered once; the groups are deleted in time slices (``time_slices``).

Each group needs DELETE (Kafka's ``handleDeleteGroupsRequest``): else GROUP_AUTHORIZATION_FAILED
for it, and it is not deleted.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode, OdradekError
from odradek.groups import admin
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import sliced

API_KEY = ApiKey.DELETE_GROUPS


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    result_type = element_type(response_type, "results")
    results = []
    async for group_id in sliced(dict.fromkeys(str(g) for g in request.groups_names)):
        error = await _delete(ctx, group_id)
        results.append(build(result_type, group_id=group_id, error_code=error))
    return build(response_type, throttle_time=NO_THROTTLE, results=tuple(results))


async def _delete(ctx: RequestContext, group_id: str) -> ErrorCode:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed
    groups = ctx.broker.groups
    if groups is None:
        return ErrorCode.coordinator_not_available
    try:
        return await groups.write(
            group_id, lambda shard: admin.delete_group(shard.groups, shard.offsets, group_id)
        )
    except OdradekError as e:
        return e.error_code
