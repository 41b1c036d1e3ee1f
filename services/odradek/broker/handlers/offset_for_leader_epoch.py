"""OffsetForLeaderEpoch (23): where a leader epoch ends in the leader's log (KIP-101, KIP-320).

A consumer that saw records of epoch E asks, after a leader change, where E ends on the new
leader: an end offset below its position means its records were truncated away (it was reading an
unclean leader's history) and it must reset. Each partition answers the largest epoch <= the one
asked for that the leader's log holds, and that epoch's end offset (the start of the next epoch,
or the log end offset for the latest); -1 and -1 if the log holds none. ``current_leader_epoch``
is checked as everywhere (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); only the leader answers.

Authorization, as Kafka's ``handleOffsetForLeaderEpochRequest``: a principal with CLUSTER_ACTION
(a follower) may ask about every topic; any other needs DESCRIBE on each topic, whose partitions
otherwise answer TOPIC_AUTHORIZATION_FAILED. Every topic and partition named is answered, each
occurrence (as Kafka's ``lastOffsetForLeaderEpoch``), in time slices (``time_slices``).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import authorize_cluster, filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.broker.replica_manager import OffsetResult
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH


async def handle(ctx: RequestContext, request: Any) -> Any:
    replicas = ctx.broker.replica_manager
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    names = [t.topic for t in request.topics]
    if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        described = set(names)
    else:
        described = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    slices = TimeSlices()
    topics = []
    async for topic in sliced(request.topics, slices):
        partitions = []
        for partition in topic.partitions:
            await slices.tick()
            if topic.topic not in described:
                found = OffsetResult(ErrorCode.topic_authorization_failed)
            else:
                found = replicas.last_offset_for_leader_epoch(
                    topic.topic,
                    partition.partition,
                    partition.current_leader_epoch,
                    partition.leader_epoch,
                )
            partitions.append(
                build(
                    partition_type,
                    error_code=found.error,
                    partition=partition.partition,
                    leader_epoch=found.leader_epoch,
                    end_offset=found.offset,
                )
            )
        topics.append(build(topic_type, topic=topic.topic, partitions=tuple(partitions)))
    return build(response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))
