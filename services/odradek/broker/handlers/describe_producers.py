"""DescribeProducers (61): the active producers of partitions this broker leads.
Each topic needs READ (Kafka's ``handleDescribeProducersRequest``): its partitions otherwise
answer TOPIC_AUTHORIZATION_FAILED and are not looked at. A partition named several times is
looked up once (``answer_each``); every topic and partition is answered as named, each
occurrence (Kafka's answer), in time slices.
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
from odradek.time_slices import TimeSlices, answer_each, sliced

API_KEY = ApiKey.DESCRIBE_PRODUCERS


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    wanted = [
        (topic.name, index)
        async for topic in sliced(request.topics, slices)
        for index in topic.partition_indexes
    ]
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, (t for t, _ in wanted))

    async def describe(tp: tuple[str, int]) -> PartitionProducers:
        if tp[0] not in readable:
            return PartitionProducers(tp[0], tp[1], ErrorCode.topic_authorization_failed)
        [described] = describe_producers(ctx.broker.replica_manager, ctx.broker.metadata, [tp])
        return described

    # A partition named twice is looked up once and answered at each occurrence, as Kafka.
    results = await answer_each(wanted, describe, slices)

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    producer_type = element_type(partition_type, "active_producers")
    answered = iter(results)
    topics = []
    async for topic in sliced(request.topics, slices):  # each topic as named, as Kafka
        partitions = []
        for _ in topic.partition_indexes:
            r = next(answered)
            partitions.append(
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
            await slices.tick()
        topics.append(build(topic_type, name=topic.name, partitions=tuple(partitions)))
    return build(response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))
