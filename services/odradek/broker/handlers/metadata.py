"""Metadata (3): brokers, controller and topic partitions, from the broker's metadata cache.

Brokers are listed with their address on the listener the request came in on (Kafka's rule);
a broker without an endpoint on that listener is left out. The broker named controller is the
lowest one listed: the controller is its own process here, not a broker, but admin clients send
CreateTopics & co. to the node named controller, and any broker serves them.

Topics are named, or (v12+) given by topic id, as Kafka 3.x's ``handleTopicMetadataRequest``:
an id the broker does not know is UNKNOWN_TOPIC_ID, with a null name. Versions 10 and 11 carry
the fields but may not use them: a null name or a topic id there makes the whole request
INVALID_REQUEST, answered as Kafka's ``MetadataRequest.getErrorResponse`` answers it (each topic
with the error, a null name as "", no brokers).

A named topic the broker does not know is UNKNOWN_TOPIC_OR_PARTITION (clients retry: it may be
on its way), but INVALID_TOPIC_EXCEPTION if no topic can have that name (Kafka's
``Topic.validate``), so a producer to ``bad topic!`` fails at once.

With ``auto.create.topics.enable`` (Kafka's default, true) a Metadata request that allows it
(v4+ ``allow_auto_topic_creation``; every request before v4) creates the valid, non-internal
topics it names and does not find, with ``num.partitions`` and ``default.replication.factor``,
and answers LEADER_NOT_AVAILABLE for them until they have leaders (``TopicAdmin``'s
``auto_create_topics`` has the rule and the bound per request).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.errors import InvalidTopicError
from odradek.broker.admin.topics import TopicAdmin
from odradek.broker.admin.validation import validate_topic_name
from odradek.broker.context import RequestContext
from odradek.broker.controller_requests import INTERNAL_TOPICS
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.METADATA
TOPIC_IDS_VERSION = 12  # the first version whose requests may name topics by id
AUTO_CREATE_FLAG_VERSION = 4  # before it, every Metadata request allows auto-creation (Kafka)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cache = ctx.broker.metadata
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    broker_type = element_type(response_type, "brokers")
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")

    if (
        request.topics is None or not request.topics and ctx.api_version == 0
    ):  # null: every topic (v1+); v0 sends an empty list for that
        wanted = [(name, None) for name in sorted(cache.topics)]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in request.topics]
        if ctx.api_version < TOPIC_IDS_VERSION and any(
            name is None or topic_id is not None for name, topic_id in wanted
        ):
            return _invalid_request(response_type, topic_type, wanted)

    created = await _auto_create(ctx, request, cache, wanted)
    topics = []
    for name, topic_id in wanted:
        if topic_id is not None:
            topic = cache.topic_by_id(topic_id)
            if topic is None:
                topics.append(_unknown(topic_type, ErrorCode.unknown_topic_id, None, topic_id))
                continue
        else:
            topic = cache.topic(name) if name is not None else None
        if topic is None:
            error = created.get(name) if name is not None else None
            topics.append(_unknown(topic_type, error or _missing_error(name), name, None))
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


async def _auto_create(
    ctx: RequestContext, request: Any, cache: Any, wanted: list[tuple[str | None, Any]]
) -> dict[str, ErrorCode]:
    """Named topics this broker does not know, auto-created if the broker and client allow it."""
    config = ctx.broker.config
    allowed = ctx.api_version < AUTO_CREATE_FLAG_VERSION or request.allow_auto_topic_creation
    if config is None or not config.auto_create_topics_enable or not allowed:
        return {}
    missing = [
        name
        for name, topic_id in wanted
        if topic_id is None
        and name is not None
        and cache.topic(name) is None
        and name not in INTERNAL_TOPICS
        and _missing_error(name) == ErrorCode.unknown_topic_or_partition
    ]
    if not missing:
        return {}
    return await TopicAdmin(ctx.broker.zk, config).auto_create_topics(missing)


def _missing_error(name: str | None) -> ErrorCode:
    """A named topic this broker does not know: INVALID_TOPIC_EXCEPTION if no topic can have
    that name (clients fail at once), else UNKNOWN_TOPIC_OR_PARTITION (they retry), as Kafka's
    ``getTopicMetadata``."""
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


def _unknown(topic_type: type[Any], error: ErrorCode, name: str | None, topic_id: Any) -> Any:
    return build(
        topic_type,
        error_code=error,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=-2147483648,
    )


def _invalid_request(
    response_type: type[Any], topic_type: type[Any], wanted: list[tuple[str | None, Any]]
) -> Any:
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        brokers=(),
        cluster_id=None,
        controller_id=-1,
        topics=tuple(
            _unknown(topic_type, ErrorCode.invalid_request, name or "", topic_id)
            for name, topic_id in wanted
        ),
        cluster_authorized_operations=-2147483648,
    )
