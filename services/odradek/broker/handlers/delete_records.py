"""DeleteRecords (21): move log start offsets forward on the partitions this broker leads.

Each topic needs DELETE (Kafka's ``handleDeleteRecordsRequest``): the partitions of other topics
answer TOPIC_AUTHORIZATION_FAILED and nothing is deleted from them.

Bounded work, as Kafka reads the request (a map of partitions to offsets): a partition named more
than once is deleted from and answered once, at the offset named last; the partitions are
authorized, deleted from and answered in time slices (``time_slices``). 1 MB names 77,000
partitions, which held the broker's loop half a second before.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.records import DeleteRecordsResult, delete_one
from odradek.broker.authorization import filter_authorized_in_slices
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.DELETE_RECORDS


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    wanted: dict[tuple[str, int], int] = {}  # each partition once: the offset named last
    async for topic in sliced(request.topics, slices):
        async for partition in sliced(topic.partitions, slices):
            wanted[(topic.name, partition.partition_index)] = partition.offset
    deletable = await filter_authorized_in_slices(
        ctx, AclOperation.DELETE, ResourceType.TOPIC, (topic for topic, _ in wanted), slices
    )
    replicas, metadata = ctx.broker.replica_manager, ctx.broker.metadata
    results: list[DeleteRecordsResult] = []
    async for (topic, partition), offset in sliced(wanted.items(), slices):
        if topic in deletable:
            results.append(delete_one(replicas, metadata, topic, partition, offset))
        else:
            results.append(
                DeleteRecordsResult(topic, partition, ErrorCode.topic_authorization_failed)
            )

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    by_topic: dict[str, list[Any]] = {}
    async for r in sliced(results, slices):
        by_topic.setdefault(r.topic, []).append(
            build(
                partition_type,
                partition_index=r.partition,
                low_watermark=r.low_watermark,
                error_code=r.error,
            )
        )
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(topic_type, name=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
    )
