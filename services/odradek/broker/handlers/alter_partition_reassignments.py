"""AlterPartitionReassignments (45, v0-1, KIP-455): forwarded to the active controller, which
decides it (``controller.reassignment``); refused whole when no controller answers.

Needs ALTER on the cluster (Kafka's ``handleAlterPartitionReassignmentsRequest``), asked here
before forwarding, as Kafka's ZooKeeper-mode broker: else the request, and every partition,
answer CLUSTER_AUTHORIZATION_FAILED and nothing reaches the controller.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import authorize_cluster
from odradek.broker.context import RequestContext
from odradek.broker.forwarding import forward
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return error_response(request, ErrorCode.cluster_authorization_failed)
    return await forward(
        ctx.broker.controller, request, lambda error, message: _refused(request, error, message)
    )


def error_response(request: Any, error: ErrorCode) -> Any:
    return _refused(request, error, None)


def _refused(request: Any, error: ErrorCode, message: str | None) -> Any:
    """Every partition of the request answered ``error``, and the request as a whole too."""
    response_type = schemas.response_schema(API_KEY, request.__version__)
    topic_type = element_type(response_type, "responses")
    partition_type = element_type(topic_type, "partitions")
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        allow_replication_factor_change=getattr(request, "allow_replication_factor_change", True),
        error_code=error,
        error_message=message,
        responses=tuple(
            topic_type(
                name=topic.name,
                partitions=tuple(
                    partition_type(
                        partition_index=p.partition_index, error_code=error, error_message=message
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )
