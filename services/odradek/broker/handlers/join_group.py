"""JoinGroup (11), v0-9: a member joins a classic group; the answer waits for the join phase.

Thin: the request becomes a ``JoinRequest`` (v0 has no rebalance timeout: the session timeout
serves as one, as in Kafka), ``shard.classic.join`` runs on the group's shard and its answer
becomes the version's response. v4+ requires a known member id (KIP-394: MEMBER_ID_REQUIRED with
the new id first), v5+ carries ``group.instance.id`` (KIP-345), v7+ the protocol type and a
nullable protocol name, v9 ``skip_assignment`` for a static leader that rejoined. Coordinator
errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) are answers, never crashes. A
protocol named twice is kept once, its first occurrence (all Kafka's member ever uses), read in
time slices.

Needs READ on the group (Kafka's ``handleJoinGroupRequest``):
otherwise GROUP_AUTHORIZATION_FAILED, and the coordinator is not asked.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode, OdradekError
from odradek.groups.classic.messages import JoinAnswer, JoinRequest
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.JOIN_GROUP


def _ms(value: Any) -> int:
    return round(value.total_seconds() * 1000)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    # Each protocol once, the first of its name: what Kafka's member uses (``vote`` takes the
    # first candidate in order, ``metadata`` finds the first of a name), so repeats change
    # nothing; 333,000 of them in 1 MB held the loop past 250 ms (issue 23).
    slices = TimeSlices()
    protocols: dict[str, bytes] = {}
    async for p in sliced(request.protocols, slices):
        if p.name not in protocols:
            protocols[p.name] = bytes(p.metadata)
    session_ms = _ms(request.session_timeout)
    rebalance_ms = _ms(request.rebalance_timeout) if version >= 1 else session_ms
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=tuple(protocols.items()),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        reason=getattr(request, "reason", None),
        connection_id=ctx.connection_id,
    )
    groups = ctx.broker.groups
    try:
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, join.group_id):
            answer = JoinAnswer.failed(ErrorCode.group_authorization_failed, join.member_id)
        elif groups is None:
            answer = JoinAnswer.failed(ErrorCode.coordinator_not_available, join.member_id)
        else:
            answer = await groups.write(join.group_id, lambda shard: shard.classic.join(join))
    except OdradekError as e:
        answer = JoinAnswer.failed(e.error_code, join.member_id)
    return response(ctx.api_version, answer)


def response(version: int, answer: JoinAnswer) -> Any:
    response_type = schemas.response_schema(API_KEY, version)
    member_type = element_type(response_type, "members")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        generation_id=answer.generation_id,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name if version >= 7 else (answer.protocol_name or ""),
        leader=answer.leader,
        skip_assignment=answer.skip_assignment,
        member_id=answer.member_id,
        members=tuple(
            build(
                member_type,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata,
            )
            for m in answer.members
        ),
    )
