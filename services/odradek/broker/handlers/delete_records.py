"""DeleteRecords (21): move log start offsets forward on the partitions this broker leads.

Each topic needs DELETE (Kafka's ``handleDeleteRecordsRequest``): the partitions of other topics
answer TOPIC_AUTHORIZATION_FAILED and nothing is deleted from them.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.records import DeleteRecordsResult, delete_records
from odradek.broker.authorization import filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.DELETE_RECORDS


async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [
        (topic.name, partition.partition_index, partition.offset)
        for topic in request.topics
        for partition in topic.partitions
    ]
    deletable = filter_authorized(
        ctx, AclOperation.DELETE, ResourceType.TOPIC, (topic for topic, _, _ in wanted)
    )
    results = delete_records(
        ctx.broker.replica_manager, ctx.broker.metadata, [w for w in wanted if w[0] in deletable]
    ) + [
        DeleteRecordsResult(topic, partition, ErrorCode.topic_authorization_failed)
        for topic, partition, _ in wanted
        if topic not in deletable
    ]

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    by_topic: dict[str, list[Any]] = {}
    for r in results:
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
