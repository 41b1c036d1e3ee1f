"""CreateTopics (19): validate each topic and write it to ZooKeeper; the controller makes it live.

The answer waits (up to the request's ``timeout_ms``) until this broker's metadata has leaders
for the new partitions, as Kafka (``admin.topics`` has the rule). v5+ answers carry the partition
count, replication factor and every config value.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.topics import TopicAdmin, topic_id_to_uuid, wait_for_leaders
from odradek.broker.admin.validation import NewTopic
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.CREATE_TOPICS


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
    admin = TopicAdmin(ctx.broker.zk, ctx.broker.config)
    results = await admin.create_topics(topics, validate_only=request.validate_only)
    if not request.validate_only:
        timeout_ms = round(request.timeout.total_seconds() * 1000)
        results = await wait_for_leaders(ctx.broker.metadata, results, timeout_ms)

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "topics")
    config_type = _configs_element_type(topic_type)
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                topic_type,
                name=r.name,
                topic_id=topic_id_to_uuid(r.topic_id),
                error_code=r.error,
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
