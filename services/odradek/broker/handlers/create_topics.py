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

Bounded work (issue 23): 1 MB names 77,000 topics. The request is read, authorized, decided
(``TopicAdmin.create_topics``: one listing of the existing topics, no read per topic) and
answered in time slices (``time_slices``); at most ``REQUEST_PARTITIONS_MAX`` partitions are
created (or validated) by one request, the topics past it answer POLICY_VIOLATION.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from odradek.broker.admin.topics import (
    CreateTopicResult,
    TopicAdmin,
    topic_id_to_uuid,
    wait_for_leaders,
)
from odradek.broker.admin.validation import NewTopic
from odradek.broker.authorization import (
    answer_permitted,
    authorize_cluster,
    filter_authorized_in_slices,
)
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import build, element_type
from odradek.broker.handlers.describe_configs import config_entry
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.CREATE_TOPICS
STRICT_QUOTA_SINCE_VERSION = 6  # KIP-599: clients from here know THROTTLING_QUOTA_EXCEEDED


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    topics = [
        NewTopic(
            name=topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments=tuple((a.partition_index, tuple(a.broker_ids)) for a in topic.assignments),
            configs=tuple((c.name, c.value) for c in topic.configs),
        )
        async for topic in sliced(request.topics, slices)
    ]
    counts: Counter[str] = Counter()
    async for t in sliced(topics, slices):
        counts[t.name] += 1
    if authorize_cluster(ctx, AclOperation.CREATE):
        creatable = set(counts)
    else:
        creatable = await filter_authorized_in_slices(
            ctx, AclOperation.CREATE, ResourceType.TOPIC, counts, slices
        )
    described = await filter_authorized_in_slices(
        ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, counts, slices
    )
    admin = TopicAdmin(ctx.broker.zk, ctx.broker.config)
    quota = ctx.mutation_quota(STRICT_QUOTA_SINCE_VERSION)
    results = await answer_permitted(
        topics,
        # a name given twice is INVALID_REQUEST (TopicAdmin's answer) whoever asks, as in Kafka
        lambda t: t.name in creatable or counts[t.name] > 1,
        lambda allowed: admin.create_topics(
            allowed, validate_only=request.validate_only, quota=quota, slices=slices
        ),
        lambda t: CreateTopicResult(
            t.name, ErrorCode.topic_authorization_failed, "Authorization failed."
        ),
        slices,
    )
    if not request.validate_only:
        # before the counts are hidden: the wait compares them with the metadata's
        timeout_ms = round(request.timeout.total_seconds() * 1000)
        results = await wait_for_leaders(ctx.broker.metadata, results, timeout_ms)

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    topic_type = element_type(response_type, "topics")
    config_type = _configs_element_type(topic_type)

    def answer(r: CreateTopicResult) -> Any:
        shown = r.name in described
        return build(
            topic_type,
            name=r.name,
            topic_id=topic_id_to_uuid(r.topic_id),
            error_code=r.error,
            topic_config_error_code=ErrorCode.none
            if shown
            else ErrorCode.topic_authorization_failed,
            error_message=r.message,
            num_partitions=r.num_partitions if shown else -1,
            replication_factor=r.replication_factor if shown else -1,
            configs=tuple(config_entry(config_type, c) for c in (r.configs if shown else ()))
            if config_type is not None
            else None,
        )

    return build(
        response_type,
        throttle_time=timedelta(milliseconds=quota.throttle_ms()),
        topics=tuple([answer(r) async for r in sliced(results, slices)]),
    )


def _configs_element_type(topic_type: type[Any]) -> type[Any] | None:
    """The class of ``configs`` entries (a nullable array, v5+), or None before v5."""
    configs = topic_type.__dataclass_fields__.get("configs")
    if configs is None:
        return None
    array = next(t for t in configs.type.__args__ if t is not type(None))
    return array.__args__[0]
