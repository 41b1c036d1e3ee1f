"""DescribeGroups (15, v0-5): groups' state, protocol and members, through ``Group.describe()``.

Each group is answered by itself (``groups.admin.describe_group`` on the shard that owns it):
NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS when that shard is not here or not loaded, an
unknown group (the empty id included, as Kafka) ``Dead`` without an error, a group known only by
its committed offsets ``Empty`` without a protocol. v4+ carry members' instance ids.
Authorized operations (v3+) are not computed: there is no authorizer, so the answer keeps
Kafka's "not requested" value, as Metadata does.

Each group needs DESCRIBE (Kafka's ``handleDescribeGroupsRequest``): else it answers
GROUP_AUTHORIZATION_FAILED with an unknown ("") state. With ``include_authorized_operations``
(v3+) a described group carries its authorized-operations bitfield.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import OPERATIONS_NOT_ASKED, authorized_operations
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.coordinator.errors import CoordinatorNotAvailableError
from odradek.errors import ErrorCode, OdradekError
from odradek.groups import admin
from odradek.groups.group import GroupDescription
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import answer_each

API_KEY = ApiKey.DESCRIBE_GROUPS


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    group_type = element_type(response_type, "groups")
    member_type = element_type(group_type, "members")
    operations_asked = getattr(request, "include_authorized_operations", False)

    async def one(group_id: str) -> Any:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            return build(
                group_type,
                error_code=ErrorCode.group_authorization_failed,
                group_id=group_id,
                group_state="",  # Kafka's DescribeGroupsResponse.groupError: unknown
                protocol_type="",
                protocol_data="",
                members=(),
                authorized_operations=OPERATIONS_NOT_ASKED,
            )
        try:
            description = await _describe(ctx, group_id)
        except OdradekError as e:
            return build(
                group_type,
                error_code=e.error_code,
                group_id=group_id,
                group_state=admin.DEAD,
                protocol_type="",
                protocol_data="",
                members=(),
                authorized_operations=OPERATIONS_NOT_ASKED,
            )
        return build(
            group_type,
            error_code=ErrorCode.none,
            group_id=group_id,
            group_state=description.state,
            protocol_type=description.protocol_type,
            protocol_data=description.protocol_name,
            members=tuple(
                build(
                    member_type,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in description.members
            ),
            authorized_operations=authorized_operations(ctx, ResourceType.GROUP, group_id)
            if operations_asked
            else OPERATIONS_NOT_ASKED,
        )

    described = await answer_each((str(g) for g in request.groups), one)
    return build(response_type, throttle_time=NO_THROTTLE, groups=tuple(described))


async def _describe(ctx: RequestContext, group_id: str) -> GroupDescription:
    groups = ctx.broker.groups
    if groups is None:
        raise CoordinatorNotAvailableError("no group coordinator here")
    return await groups.read(
        group_id, lambda shard: admin.describe_group(shard.groups, shard.offsets, group_id)
    )
