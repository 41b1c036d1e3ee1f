"""CreateTopics (19): validate each topic and write it to ZooKeeper; the controller makes it live.

The answer waits (up to the request's ``timeout_ms``) until this broker's metadata has leaders
for the new partitions, as Kafka (``admin.topics`` has the rule). v5+ answers carry the partition
count, replication factor and every config value.

Authorization, as Kafka's ``handleCreateTopicsRequest``: CREATE on the cluster, or else on each
topic (TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", for the others, not created); the
partition count, replication factor and configs (v5+) are given only with DESCRIBE_CONFIGS on the
topic, else ``topic_config_error_code`` is TOPIC_AUTHORIZATION_FAILED and they are -1 and empty.

The client's ``controller_mutation_rate`` quota (``broker.mutation_quota``) is strict from v6
(a topic beyond an exhausted quota answers THROTTLING_QUOTA_EXCEEDED), permissive before; the
answer's ``throttle_time_ms`` is the quota's, less the time spent waiting for leaders. It is
counted here, on the broker that takes the request, because this broker decides and writes the
topic (as Kafka's ZooKeeper-mode broker does in ``ZkAdminManager``): the principal and client id
are known here and nowhere else (the controller only ever sees ZooKeeper).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta
from typing import Any

from odradek.broker.admin.topics import (
    CreateTopicResult,
    TopicAdmin,
    topic_id_to_uuid,
    wait_for_leaders,
)
from odradek.broker.admin.validation import NewTopic
from odradek.broker.authorization import authorize_cluster, filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.CREATE_TOPICS
STRICT_QUOTA_SINCE_VERSION = 6  # KIP-599: clients from here know THROTTLING_QUOTA_EXCEEDED


async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = [
        NewTopic(
            name=topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments=tuple((a.partition_index, tuple(a.broker_ids)) for a in topic.assignments),
            configs=tuple((c.name, c.value) for c in topic.configs),
        )
        for topic in request.topics
    ]
    counts = Counter(t.name for t in topics)
    if authorize_cluster(ctx, AclOperation.CREATE):
        creatable = set(counts)
    else:
        creatable = filter_authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, counts)
    described = filter_authorized(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, counts)
    # a name given twice is INVALID_REQUEST (TopicAdmin's answer) whoever asks, as in Kafka
    allowed = [t for t in topics if t.name in creatable or counts[t.name] > 1]
    admin = TopicAdmin(ctx.broker.zk, ctx.broker.config)
    quota = ctx.mutation_quota(STRICT_QUOTA_SINCE_VERSION)
    created = iter(
        await admin.create_topics(allowed, validate_only=request.validate_only, quota=quota)
    )
    results = [
        next(created)
        if t.name in creatable or counts[t.name] > 1
        else CreateTopicResult(
            t.name, ErrorCode.topic_authorization_failed, "Authorization failed."
        )
        for t in topics
    ]
    if not request.validate_only:
        # before the counts are hidden: the wait compares them with the metadata's
        timeout_ms = round(request.timeout.total_seconds() * 1000)
        results = await wait_for_leaders(ctx.broker.metadata, results, timeout_ms)
    results = [
        r
        if r.name in described
        else replace(r, num_partitions=-1, replication_factor=-1, configs=())
        for r in results
    ]

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "topics")
    config_type = _configs_element_type(topic_type)
    return build(
        response_type,
        throttle_time=timedelta(milliseconds=quota.throttle_ms()),
        topics=tuple(
            build(
                topic_type,
                name=r.name,
                topic_id=topic_id_to_uuid(r.topic_id),
                error_code=r.error,
                topic_config_error_code=ErrorCode.none
                if r.name in described
                else ErrorCode.topic_authorization_failed,
                error_message=r.message,
                num_partitions=r.num_partitions,
                replication_factor=r.replication_factor,
                configs=tuple(
                    build(
                        config_type,
                        name=c.name,
                        value=c.value,
                        read_only=c.read_only,
                        config_source=int(c.source),
                        is_sensitive=c.is_sensitive,
                    )
                    for c in r.configs
                )
                if config_type is not None
                else None,
            )
            for r in results
        ),
    )


def _configs_element_type(topic_type: type[Any]) -> type[Any] | None:
    """The class of ``configs`` entries (a nullable array, v5+), or None before v5."""
    configs = topic_type.__dataclass_fields__.get("configs")
    if configs is None:
        return None
    array = next(t for t in configs.type.__args__ if t is not type(None))
    return array.__args__[0]
