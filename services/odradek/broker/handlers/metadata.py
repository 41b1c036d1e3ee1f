"""Metadata (3): brokers, controller and topic partitions, from the broker's metadata cache.

Brokers are listed with their address on the listener the request came in on (Kafka's rule);
a broker without an endpoint on that listener is left out. The broker named controller is the
lowest one listed: the controller is its own process here, not a broker, but admin clients send
CreateTopics & co. to the node named controller, and any broker serves them.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.METADATA


async def handle(ctx: RequestContext, request: Any) -> Any:
    cache = ctx.broker.metadata
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    broker_type = element_type(response_type, "brokers")
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")

    if (
        request.topics is None or not request.topics and ctx.api_version == 0
    ):  # null: every topic (v1+); v0 sends an empty list for that
        names = sorted(cache.topics)
    else:
        names = [t.name for t in request.topics]

    topics = []
    for name in names:
        topic = cache.topic(name) if name is not None else None
        if topic is None:
            topics.append(
                build(
                    topic_type,
                    error_code=ErrorCode.unknown_topic_or_partition,
                    name=name,
                    topic_id=None,
                    is_internal=False,
                    partitions=(),
                    topic_authorized_operations=-2147483648,
                )
            )
            continue
        partitions = tuple(
            build(
                partition_type,
                error_code=(ErrorCode.none if p.leader >= 0 else ErrorCode.leader_not_available),
                partition_index=p.partition,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=p.replicas,
                isr_nodes=p.isr,
                offline_replicas=p.offline_replicas,
            )
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
        )
        topics.append(
            build(
                topic_type,
                error_code=ErrorCode.none,
                name=topic.name,
                topic_id=topic.topic_id,
                is_internal=topic.is_internal,
                partitions=partitions,
                topic_authorized_operations=-2147483648,
            )
        )
    listed = cache.brokers_on(ctx.listener.name)
    brokers = tuple(
        build(broker_type, node_id=b.broker_id, host=address.host, port=address.port, rack=b.rack)
        for b, address in listed
    )
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=cache.cluster_id,
        controller_id=min((b.broker_id for b, _ in listed), default=-1),
        topics=tuple(topics),
        cluster_authorized_operations=-2147483648,
    )
