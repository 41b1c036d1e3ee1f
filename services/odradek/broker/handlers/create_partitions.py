"""CreatePartitions (37): add partitions to topics by rewriting their assignment in ZooKeeper.

Each topic needs ALTER (Kafka's ``handleCreatePartitionsRequest``): else it answers
TOPIC_AUTHORIZATION_FAILED and is left as it is (a topic named twice is INVALID_REQUEST first).

The partitions added count against the client's ``controller_mutation_rate`` quota
(``broker.mutation_quota``; ``handlers.create_topics`` says why here): strict from v3,
permissive before; the answer's ``throttle_time_ms`` is the quota's.

Bounded work (issue 23): 1 MB names 100,000 topics; they are read, authorized, decided
(``TopicAdmin.create_partitions``: the existing topics listed once, a topic that does not exist
answered without a ZooKeeper read of its own) and answered in time slices (``time_slices``).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from odradek.broker.admin.topics import CreatePartitionsResult, NewPartitions, TopicAdmin
from odradek.broker.authorization import answer_permitted, filter_authorized_in_slices
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.CREATE_PARTITIONS
STRICT_QUOTA_SINCE_VERSION = 3  # KIP-599


async def handle(ctx: RequestContext, request: Any) -> Any:
    slices = TimeSlices()
    wanted = [
        NewPartitions(
            topic.name,
            topic.count,
            None
            if topic.assignments is None
            else tuple(tuple(a.broker_ids) for a in topic.assignments),
        )
        async for topic in sliced(request.topics, slices)
    ]
    counts: Counter[str] = Counter()
    async for w in sliced(wanted, slices):
        counts[w.topic] += 1
    alterable = await filter_authorized_in_slices(
        ctx, AclOperation.ALTER, ResourceType.TOPIC, counts, slices
    )
    admin = TopicAdmin(ctx.broker.zk, ctx.broker.config)
    quota = ctx.mutation_quota(STRICT_QUOTA_SINCE_VERSION)
    results = await answer_permitted(
        wanted,
        lambda w: w.topic in alterable or counts[w.topic] > 1,
        lambda allowed: admin.create_partitions(
            allowed, validate_only=request.validate_only, quota=quota, slices=slices
        ),
        lambda w: CreatePartitionsResult(
            w.topic, ErrorCode.topic_authorization_failed, "The topic authorization is failed."
        ),
        slices,
    )

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    result_type = element_type(response_type, "results")
    return build(
        response_type,
        throttle_time=timedelta(milliseconds=quota.throttle_ms()),
        results=tuple(
            [
                build(result_type, name=r.name, error_code=r.error, error_message=r.message)
                async for r in sliced(results, slices)
            ]
        ),
    )
