"""DescribeProducers (61): the active producers of partitions this broker leads.
Each topic needs READ (Kafka's ``handleDescribeProducersRequest``): its partitions otherwise
answer TOPIC_AUTHORIZATION_FAILED and are not looked at.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.producer_states import PartitionProducers, describe_producers
from odradek.broker.authorization import filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.DESCRIBE_PRODUCERS


async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [(topic.name, index) for topic in request.topics for index in topic.partition_indexes]
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, (t for t, _ in wanted))
    refused = {(t, p) for t, p in wanted if t not in readable}
    described = describe_producers(
        ctx.broker.replica_manager, ctx.broker.metadata, [w for w in wanted if w not in refused]
    )
    by_partition = {(r.topic, r.partition): r for r in described}
    results = [
        PartitionProducers(t, p, ErrorCode.topic_authorization_failed)
        if (t, p) in refused
        else by_partition[(t, p)]
        for t, p in wanted
    ]

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    producer_type = element_type(partition_type, "active_producers")
    by_topic: dict[str, list[Any]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            build(
                partition_type,
                partition_index=r.partition,
                error_code=r.error,
                error_message=r.message,
                active_producers=tuple(
                    build(
                        producer_type,
                        producer_id=p.producer_id,
                        producer_epoch=p.producer_epoch,
                        last_sequence=p.last_sequence,
                        last_timestamp=p.last_timestamp,
                        coordinator_epoch=p.coordinator_epoch,
                        current_txn_start_offset=p.current_txn_start_offset,
                    )
                    for p in r.producers
                ),
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
