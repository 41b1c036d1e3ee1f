"""ConsumerGroupDescribe (69), v0-1: KIP-848 groups as their coordinator knows them.

Per group: state, group and target assignment epochs, the assignor, and each member with its
subscription, current assignment and target assignment (topics by id and name). A group that
does not exist here, or is a classic group, is GROUP_ID_NOT_FOUND (Kafka's answer); a group
whose coordinator is elsewhere NOT_COORDINATOR, per group. Served only when
``group.coordinator.rebalance.protocols`` includes ``consumer`` (otherwise UNSUPPORTED_VERSION).

Each group needs DESCRIBE (Kafka's ``handleConsumerGroupDescribe``): else it answers
GROUP_AUTHORIZATION_FAILED. With ``include_authorized_operations`` a described group carries its
authorized-operations bitfield (else the schema's default, -2147483648).

Ids are answered in time slices, each distinct id described once (``time_slices.answer_each``):
a 1 MB request may name a million; Kafka caps nothing here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from odradek.broker.authorization import authorized_operations
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode, OdradekError
from odradek.groups.consumer.assignment import Assignment, to_records
from odradek.groups.consumer.requests import DescribedConsumerGroup
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import answer_each

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
CONSUMER_MEMBER = 1  # member_type (v1): a member of the consumer protocol


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    group_type = element_type(response_type, "groups")
    member_type = element_type(group_type, "members")
    assignment_type = member_type.__dataclass_fields__["assignment"].type
    partitions_type = element_type(assignment_type, "topic_partitions")
    groups = ctx.broker.groups

    def failed(group_id: str, code: ErrorCode, message: str | None) -> Any:
        return build(
            group_type,
            error_code=code,
            error_message=message,
            group_id=group_id,
            group_state="",
            group_epoch=0,
            assignment_epoch=0,
            assignor_name="",
            members=(),
        )

    def assignment(value: Assignment, names: dict[Any, str]) -> Any:
        return assignment_type(
            topic_partitions=tuple(
                partitions_type(
                    topic_id=t.topic_id,
                    topic_name=names.get(t.topic_id, ""),
                    partitions=t.partitions,
                )
                for t in to_records(value)
            )
        )

    def described(group: DescribedConsumerGroup) -> Any:
        names = dict(group.topic_names)
        return build(
            group_type,
            error_code=ErrorCode.none,
            error_message=None,
            group_id=group.group_id,
            group_state=group.state,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor_name,
            members=tuple(
                build(
                    member_type,
                    member_id=d.member.member_id,
                    instance_id=d.member.instance_id,
                    rack_id=d.member.rack_id,
                    member_epoch=d.member.member_epoch,
                    client_id=d.member.client_id,
                    client_host=d.member.client_host,
                    subscribed_topic_names=d.member.subscribed_topic_names,
                    subscribed_topic_regex=d.member.subscribed_topic_regex,
                    assignment=assignment(d.member.assigned, names),
                    target_assignment=assignment(d.target, names),
                    member_type=CONSUMER_MEMBER,
                )
                for d in group.members
            ),
        )

    async def one(group_id: str) -> Any:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            return failed(group_id, ErrorCode.group_authorization_failed, None)
        if groups is None:
            return failed(group_id, ErrorCode.coordinator_not_available, None)
        if not groups.config.consumer_protocol_enabled:
            return failed(
                group_id,
                ErrorCode.unsupported_version,
                "the consumer group protocol is not enabled "
                "(group.coordinator.rebalance.protocols)",
            )
        if not group_id:
            # Kafka's answer, without a message: a million empty ids are a million answers
            return failed(group_id, ErrorCode.invalid_group_id, None)
        try:
            group = await groups.read(group_id, lambda shard: shard.consumer.describe(group_id))
        except OdradekError as e:
            return failed(group_id, e.error_code, str(e))
        result = described(group)
        if request.include_authorized_operations:
            operations = authorized_operations(ctx, ResourceType.GROUP, group_id)
            result = replace(result, authorized_operations=operations)
        return result

    results = await answer_each(request.group_ids, one)
    return build(response_type, throttle_time=NO_THROTTLE, groups=tuple(results))
