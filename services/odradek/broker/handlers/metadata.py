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
``auto_create_topics`` has the rule and the bound per request). Their partitions count against
the client's ``controller_mutation_rate`` quota, permissively and without throttling the Metadata
answer (Kafka's ``newPermissiveQuotaFor`` in ``handleTopicMetadataRequest``, whose throttle it
drops): a client creating topics that way drains the same bucket as its CreateTopics.

Authorization, as Kafka's ``handleTopicMetadataRequest``: a topic the principal may not DESCRIBE
is left out of an all-topics answer, and answered TOPIC_AUTHORIZATION_FAILED when named (with its
name and no topic id; asked by id, with its id and a null name), before the broker looks whether
it exists. Auto-creating a topic needs CREATE on the cluster or on the topic; without it the
topic answers TOPIC_AUTHORIZATION_FAILED. ``include_cluster_authorized_operations`` (v8-10) gives
the cluster's authorized-operations bitfield if DESCRIBE on the cluster is allowed, else 0;
``include_topic_authorized_operations`` (v8+) gives each described topic's; both are
-2147483648 when not asked.

Bounded work: each topic named is answered once, however often it is named (Kafka answers the
set of topics asked for), and the topics in time slices (``time_slices``).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.errors import InvalidTopicError
from odradek.broker.admin.topics import TopicAdmin
from odradek.broker.admin.validation import validate_topic_name
from odradek.broker.authorization import (
    OPERATIONS_NOT_ASKED,
    authorize_cluster,
    authorized_operations,
    filter_authorized,
)
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.common.topics import INTERNAL_TOPICS
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.time_slices import sliced

API_KEY = ApiKey.METADATA
TOPIC_IDS_VERSION = 12  # the first version whose requests may name topics by id
AUTO_CREATE_FLAG_VERSION = 4  # before it, every Metadata request allows auto-creation (Kafka)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cache = ctx.broker.metadata
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    broker_type = element_type(response_type, "brokers")
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")

    all_topics = request.topics is None or not request.topics and ctx.api_version == 0
    if all_topics:  # null: every topic (v1+); v0 sends an empty list for that
        names = sorted(cache.topics)
        describable = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        wanted = [(name, None) for name in names if name in describable]
    else:
        # Each topic once, as Kafka (``metadataRequest.topics.asScala.toSet``): a request
        # naming one topic a million times is answered with it once.
        wanted = list(dict.fromkeys((t.name, getattr(t, "topic_id", None)) for t in request.topics))
        if ctx.api_version < TOPIC_IDS_VERSION and any(
            name is None or topic_id is not None for name, topic_id in wanted
        ):
            return _invalid_request(response_type, topic_type, wanted)
        describable = filter_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, _known_names(cache, wanted)
        )

    created, not_creatable = await _auto_create(ctx, request, cache, wanted, describable)
    topic_operations = getattr(request, "include_topic_authorized_operations", False)
    topics = []
    async for name, topic_id in sliced(wanted):
        if topic_id is not None:
            topic = cache.topic_by_id(topic_id)
            if topic is None:
                topics.append(_unknown(topic_type, ErrorCode.unknown_topic_id, None, topic_id))
                continue
            if topic.name not in describable:  # topic ids are not secret: Kafka names the id
                refused = ErrorCode.topic_authorization_failed
                topics.append(_unknown(topic_type, refused, None, topic_id))
                continue
        elif name is not None and name not in describable or name in not_creatable:
            topics.append(_unknown(topic_type, ErrorCode.topic_authorization_failed, name, None))
            continue
        else:
            topic = cache.topic(name) if name is not None else None
        operations = OPERATIONS_NOT_ASKED
        described = topic.name if topic is not None else name
        if topic_operations and described is not None:
            operations = authorized_operations(ctx, ResourceType.TOPIC, described)
        if topic is None:
            error = created.get(name) if name is not None else None
            topics.append(
                _unknown(topic_type, error or _missing_error(name), name, None, operations)
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
                topic_authorized_operations=operations,
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
        cluster_authorized_operations=_cluster_operations(ctx, request),
    )


def _known_names(cache: Any, wanted: list[tuple[str | None, Any]]) -> list[str]:
    """The names of the topics asked for, by name or by a known id."""
    names = []
    for name, topic_id in wanted:
        if topic_id is not None:
            topic = cache.topic_by_id(topic_id)
            if topic is not None:
                names.append(topic.name)
        elif name is not None:
            names.append(name)
    return names


def _cluster_operations(ctx: RequestContext, request: Any) -> int:
    """Metadata v8-10 may ask the cluster's authorized operations (v11+: DescribeCluster)."""
    if not getattr(request, "include_cluster_authorized_operations", False):
        return OPERATIONS_NOT_ASKED
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)


async def _auto_create(
    ctx: RequestContext,
    request: Any,
    cache: Any,
    wanted: list[tuple[str | None, Any]],
    describable: set[str],
) -> tuple[dict[str, ErrorCode], set[str]]:
    """Named, describable topics this broker does not know, auto-created if the broker and
    client allow it: (their creation errors, the names the principal may not create)."""
    config = ctx.broker.config
    allowed = ctx.api_version < AUTO_CREATE_FLAG_VERSION or request.allow_auto_topic_creation
    if config is None or not config.auto_create_topics_enable or not allowed:
        return {}, set()
    absent = [
        name
        for name, topic_id in wanted
        if topic_id is None and name in describable and cache.topic(name) is None
    ]
    not_creatable: set[str] = set()
    if absent and not authorize_cluster(ctx, AclOperation.CREATE):
        creatable = filter_authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, absent)
        not_creatable = set(absent) - creatable
    missing = [
        name
        for name in absent
        if name not in not_creatable
        and name not in INTERNAL_TOPICS
        and _missing_error(name) == ErrorCode.unknown_topic_or_partition
    ]
    if not missing:
        return {}, not_creatable
    quota = ctx.mutation_quota(None)
    return await TopicAdmin(ctx.broker.zk, config).auto_create_topics(missing, quota), not_creatable


def _missing_error(name: str | None) -> ErrorCode:
    """A named topic this broker does not know: INVALID_TOPIC_EXCEPTION if no topic can have
    that name (clients fail at once), else UNKNOWN_TOPIC_OR_PARTITION (they retry), as Kafka's
    ``getTopicMetadata``."""
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


def _unknown(
    topic_type: type[Any],
    error: ErrorCode,
    name: str | None,
    topic_id: Any,
    operations: int = OPERATIONS_NOT_ASKED,
) -> Any:
    return build(
        topic_type,
        error_code=error,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=operations,
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
        cluster_authorized_operations=OPERATIONS_NOT_ASKED,
    )
