"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3), or the offset at a time.

Consumers ask the leader (below the high watermark); a replica (``replica_id`` >= 0) may ask
any replica and sees its log end. Each answer names the leader epoch of the offset found (v4+),
and ``current_leader_epoch`` is checked (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).

Each topic needs DESCRIBE (Kafka's ``handleListOffsetRequest``, for consumers and replicas
alike): the partitions of other topics answer TOPIC_AUTHORIZATION_FAILED and are not looked up.

Bounded work, as Kafka: each partition is answered once, grouped by topic (Kafka's
``ReplicaManager.fetchOffset`` keys its answers by partition), so a topic named without
partitions, or twice, adds nothing; a partition named twice answers INVALID_REQUEST (v1+, Kafka's
``duplicatePartitions``) and is not looked up. All of it in time slices (``time_slices``).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.broker.replica_manager import OffsetResult
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.LIST_OFFSETS


async def handle(ctx: RequestContext, request: Any) -> Any:
    replicas = ctx.broker.replica_manager
    isolation = getattr(request, "isolation_level", 0)
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    described = filter_authorized(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    duplicates = await _duplicate_partitions(request.topics) if ctx.api_version >= 1 else set()
    slices = TimeSlices()
    # Each partition answered once, grouped by topic in the order first named, as Kafka's
    # ReplicaManager.fetchOffset keys its answers by partition: a topic named with no partition
    # has nothing to answer.
    answered: dict[str, dict[int, Any]] = {}
    async for topic in sliced(request.topics, slices):
        async for partition in sliced(topic.partitions, slices):
            partitions = answered.setdefault(topic.name, {})
            if partition.partition_index in partitions:
                continue
            if (topic.name, partition.partition_index) in duplicates:
                found = OffsetResult(ErrorCode.invalid_request)
            elif topic.name not in described:
                found = OffsetResult(ErrorCode.topic_authorization_failed)
            else:
                found = replicas.list_offsets(
                    topic.name,
                    partition.partition_index,
                    partition.timestamp,
                    isolation,
                    replica_id=request.replica_id,
                    current_leader_epoch=getattr(partition, "current_leader_epoch", -1),
                )
            partitions[partition.partition_index] = build(
                partition_type,
                partition_index=partition.partition_index,
                error_code=found.error,
                timestamp=found.timestamp,
                offset=found.offset,
                leader_epoch=found.leader_epoch,
            )
    topics = [
        build(topic_type, name=name, partitions=tuple(partitions.values()))
        async for name, partitions in sliced(answered.items(), slices)
    ]
    return build(response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))


async def _duplicate_partitions(topics: Any) -> set[tuple[str, int]]:
    """The partitions named more than once (Kafka's ``ListOffsetsRequest.duplicatePartitions``)."""
    seen: set[tuple[str, int]] = set()
    duplicates: set[tuple[str, int]] = set()
    slices = TimeSlices()
    async for topic in sliced(topics, slices):
        async for partition in sliced(topic.partitions, slices):
            tp = (topic.name, partition.partition_index)
            if tp in seen:
                duplicates.add(tp)
            seen.add(tp)
    return duplicates
