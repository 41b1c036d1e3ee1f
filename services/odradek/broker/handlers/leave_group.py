"""LeaveGroup (13), v0-5: members leave a classic group (the group rebalances).

v0-2 name one member and answer with its error; v3+ (KIP-345) name a batch of members, each by
member id or ``group.instance.id``, and answer per member; v5 adds a reason (logged by the
client's choice, ignored here). Thin: ``shard.classic.leave``; an unknown group fails the
whole request (UNKNOWN_MEMBER_ID), as in Kafka.

Needs READ on the group (Kafka's ``handleLeaveGroupRequest``): otherwise the answer's error is
GROUP_AUTHORIZATION_FAILED, with no member errors, and the coordinator is not asked.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode, OdradekError
from odradek.groups.classic.messages import LeaveMember
from odradek.groups.coordinator import GroupCoordinator
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.LEAVE_GROUP
LEAVE_CHUNK_MEMBERS = 500  # members one shard write takes (~1 ms of the shard's work)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    slices = TimeSlices()
    if version >= 3:
        leaving = [
            LeaveMember(m.member_id, m.group_instance_id)
            async for m in sliced(request.members, slices)
        ]
    else:
        leaving = [LeaveMember(request.member_id, None)]
    groups = ctx.broker.groups
    error = ErrorCode.none
    answers: list[LeaveMember] = []
    try:
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
            error = ErrorCode.group_authorization_failed
        elif groups is None:
            error = ErrorCode.coordinator_not_available
        elif not leaving:
            error = ErrorCode.invalid_request
        else:
            answers = await _leave(groups, request.group_id, leaving, slices)
    except OdradekError as e:
        error = e.error_code
    response_type = schemas.response_schema(API_KEY, version)
    if version < 3:
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=answers[0].error if answers else error,
        )
    member_type = element_type(response_type, "members")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=error,
        members=tuple(
            [
                member_type(
                    member_id=a.member_id, group_instance_id=a.group_instance_id, error_code=a.error
                )
                async for a in sliced(answers, slices)
            ]
        ),
    )


async def _leave(
    groups: GroupCoordinator, group_id: str, leaving: list[LeaveMember], slices: TimeSlices
) -> list[LeaveMember]:
    """The members leave in order, ``LEAVE_CHUNK_MEMBERS`` to a shard write, the loop turning
    between writes once a slice is used up: a batch of a million members (4 bytes each)
    otherwise held the loop for seconds (issue 23). Each member is answered as in one write
    (the shard takes them in the same order, each seeing the group its predecessors left);
    only the records are written in several batches, each a complete change of the group."""
    answers: list[LeaveMember] = []
    for start in range(0, len(leaving), LEAVE_CHUNK_MEMBERS):
        chunk = leaving[start : start + LEAVE_CHUNK_MEMBERS]
        answers += await groups.write(
            group_id, lambda shard, chunk=chunk: shard.classic.leave(group_id, chunk)
        )
        await slices.tick(len(chunk))
    return answers
