"""CreatePartitions (37): add partitions to topics by rewriting their assignment in ZooKeeper."""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.topics import NewPartitions, TopicAdmin
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.CREATE_PARTITIONS


async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [
        NewPartitions(
            topic.name,
            topic.count,
            None
            if topic.assignments is None
            else tuple(tuple(a.broker_ids) for a in topic.assignments),
        )
        for topic in request.topics
    ]
    admin = TopicAdmin(ctx.broker.zk, ctx.broker.config)
    results = await admin.create_partitions(wanted, validate_only=request.validate_only)

    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    result_type = element_type(response_type, "results")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(result_type, name=r.name, error_code=r.error, error_message=r.message)
            for r in results
        ),
    )
