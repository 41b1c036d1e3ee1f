"""DeleteTopics (20): mark each topic for deletion in ZooKeeper; the controller deletes it.

v6 may name a topic by its id. With ``delete.topic.enable=false`` every topic gets
TOPIC_DELETION_DISABLED, or INVALID_REQUEST before v3 (older clients do not know that code).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.topics import TopicAdmin, TopicRef
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

API_KEY = ApiKey.DELETE_TOPICS
FIRST_VERSION_WITH_DELETION_DISABLED = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    if hasattr(request, "topics"):  # v6+
        refs = [
            TopicRef(t.name, t.topic_id if t.topic_id is not None and t.topic_id.int else None)
            for t in request.topics
        ]
    else:
        refs = [TopicRef(name) for name in request.topic_names]
    results = await TopicAdmin(ctx.broker.zk, ctx.broker.config).delete_topics(refs)

    old_client = ctx.api_version < FIRST_VERSION_WITH_DELETION_DISABLED
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    result_type = element_type(response_type, "responses")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        responses=tuple(
            build(
                result_type,
                name=r.name,
                topic_id=r.topic_id,
                error_code=ErrorCode.invalid_request
                if old_client and r.error == ErrorCode.topic_deletion_disabled
                else r.error,
                error_message=r.message,
            )
            for r in results
        ),
    )
