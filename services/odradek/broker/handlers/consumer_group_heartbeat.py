"""ConsumerGroupHeartbeat (68), v0-1: a KIP-848 member joins, heartbeats, reconciles, leaves.

Decodes the request into ``groups.consumer.manager.HeartbeatRequest``, runs it as a write of
the group's shard (``shard.consumer.heartbeat``) and encodes the answer: member id and epoch,
heartbeat interval, and the assignment when the coordinator sends one. Served only when
``group.coordinator.rebalance.protocols`` includes ``consumer``; otherwise UNSUPPORTED_VERSION,
as Kafka answers. v0 lets the coordinator name a joining member; v1 requires the member's own id.

Authorization: READ on the group (Kafka 3.9's ``handleConsumerGroupHeartbeat``), else
GROUP_AUTHORIZATION_FAILED; and DESCRIBE on each subscribed topic name (Kafka 4.0's check),
else TOPIC_AUTHORIZATION_FAILED naming them, so a subscription cannot probe for topics.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from odradek.broker.authorization import filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode, OdradekError
from odradek.groups.consumer.assignment import normalized, to_records
from odradek.groups.consumer.requests import (
    HeartbeatAnswer,
    HeartbeatRequest,
    validate_heartbeat,
)
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import distinct

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    groups = ctx.broker.groups

    def refuse(code: ErrorCode, message: str | None) -> Any:
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=code,
            error_message=message,
            member_id=None,
            member_epoch=0,  # Kafka's error answer: the defaults
            heartbeat_interval=timedelta(0),
        )

    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return refuse(ErrorCode.group_authorization_failed, None)
    # The subscription is a set (Kafka's ConsumerGroupMember): each name once from here on,
    # taken in time slices (issue 23: a million repeats went through five passes at once).
    names = request.subscribed_topic_names
    if names is not None:
        names = tuple(await distinct(names))
    if names:
        described = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        hidden = sorted(set(names) - described)
        if hidden:
            return refuse(
                ErrorCode.topic_authorization_failed,
                f"The following topic names are not authorized: {', '.join(hidden)}",
            )
    if groups is None:
        return refuse(ErrorCode.coordinator_not_available, "no group coordinator here")
    if not groups.config.consumer_protocol_enabled:
        return refuse(
            ErrorCode.unsupported_version,
            "the consumer group protocol is not enabled (group.coordinator.rebalance.protocols)",
        )
    heartbeat = _request(ctx, request, names)
    try:
        validate_heartbeat(
            heartbeat,
            groups.config.group_consumer_assignors,
            groups.config.group_member_metadata_max_bytes,
        )
        answer: HeartbeatAnswer = await groups.write(
            heartbeat.group_id, lambda shard: shard.consumer.heartbeat(heartbeat)
        )
    except OdradekError as e:
        return refuse(e.error_code, str(e))
    assignment = None
    if answer.assignment is not None:
        assignment_type = response_type.__dataclass_fields__["assignment"].type
        assignment_type = next(
            t for t in getattr(assignment_type, "__args__", (assignment_type,)) if t is not None
        )
        partitions_type = element_type(assignment_type, "topic_partitions")
        assignment = assignment_type(
            topic_partitions=tuple(
                partitions_type(topic_id=t.topic_id, partitions=t.partitions)
                for t in to_records(answer.assignment)
            )
        )
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        heartbeat_interval=timedelta(milliseconds=answer.heartbeat_interval_ms),
        assignment=assignment,
    )


def _request(ctx: RequestContext, request: Any, names: tuple[str, ...] | None) -> HeartbeatRequest:
    owned = None
    if request.topic_partitions is not None:
        merged: dict[Any, set[int]] = {}
        for topic in request.topic_partitions:
            merged.setdefault(topic.topic_id, set()).update(topic.partitions)
        owned = normalized(merged)
    timeout = request.rebalance_timeout
    timeout_ms = int(timeout.total_seconds() * 1000) if isinstance(timeout, timedelta) else timeout
    return HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=timeout_ms,
        subscribed_topic_names=names,
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),  # v1+
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
        api_version=ctx.api_version,
    )
