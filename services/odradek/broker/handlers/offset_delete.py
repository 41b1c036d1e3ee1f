"""OffsetDelete (47), v0: delete a group's committed offsets of some partitions.

One domain call (``OffsetMetadataManager.delete_offsets``) on the group's shard. A group-level
error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, not the coordinator) is the top-level error code with
no partitions, as Kafka answers; per partition: UNKNOWN_TOPIC_OR_PARTITION,
GROUP_SUBSCRIBED_TO_TOPIC, or none (also when nothing was committed).

Authorization, as Kafka's ``handleOffsetDeleteRequest``: DELETE on the group (else the top-level
error is GROUP_AUTHORIZATION_FAILED), READ on each topic (else its partitions answer
TOPIC_AUTHORIZATION_FAILED and keep their offsets).

As Kafka's ``handleOffsetDeleteRequest``: a partition the metadata does not know answers
UNKNOWN_TOPIC_OR_PARTITION before the shard is asked, which gets each existing partition once;
a topic named several times is answered once (``OffsetDeleteResponse.Builder``), with every
partition of each occurrence. The request is gone through in time slices (``time_slices``).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode, OdradekError
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.OFFSET_DELETE


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    slices = TimeSlices()
    topics = [
        (t.name, [p.partition_index for p in t.partitions])
        async for t in sliced(request.topics, slices)
    ]
    groups = ctx.broker.groups
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return _refused(response_type, ErrorCode.group_authorization_failed)
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, (t for t, _ in topics))
    errors: dict[tuple[str, int], ErrorCode] = {}
    valid: dict[str, dict[int, None]] = {}  # each existing partition once, for the shard
    for topic, partitions in topics:
        known = ctx.broker.metadata.topic(topic)
        for p in partitions:
            if topic not in readable:
                errors[(topic, p)] = ErrorCode.topic_authorization_failed
            elif known is None or p not in known.partitions:
                errors[(topic, p)] = ErrorCode.unknown_topic_or_partition
            else:
                valid.setdefault(topic, {})[p] = None
            await slices.tick()
    allowed = [(t, list(partitions)) for t, partitions in valid.items()]
    try:
        if groups is None:
            return _refused(response_type, ErrorCode.coordinator_not_available)
        if not request.group_id:
            return _refused(response_type, ErrorCode.invalid_group_id)
        if allowed or not errors:
            errors |= await groups.write(
                request.group_id,
                lambda shard: shard.offsets.delete_offsets(request.group_id, allowed),
            )
    except OdradekError as e:
        return _refused(response_type, e.error_code)
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    by_topic: dict[str, list[Any]] = {}  # Kafka's Builder: one answer per topic name
    for name, partitions in topics:
        answered = by_topic.setdefault(name, [])
        for p in partitions:
            answered.append(partition_type(partition_index=p, error_code=errors[(name, p)]))
            await slices.tick()
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        topics=tuple(
            topic_type(name=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
    )


def _refused(response_type: type[Any], error: ErrorCode) -> Any:
    return build(response_type, throttle_time=NO_THROTTLE, error_code=error, topics=())
