"""AlterPartitionReassignments (45, v0-1, KIP-455): forwarded to the active controller, which
decides it (``controller.reassignment``); refused whole when no controller answers.

Needs ALTER on the cluster (Kafka's ``handleAlterPartitionReassignmentsRequest``), asked here
before forwarding, as Kafka's ZooKeeper-mode broker: else the request, and every partition,
answer CLUSTER_AUTHORIZATION_FAILED and nothing reaches the controller. Those refusals name each
partition, built in time slices (``time_slices``): 1 MB names 166,000.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from odradek.broker.authorization import authorize_cluster
from odradek.broker.context import RequestContext
from odradek.broker.forwarding import forward
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS


class _Refused(NamedTuple):
    """No controller answered: (error, message), for every partition."""

    error: ErrorCode
    message: str | None


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return await _refused_in_slices(request, ErrorCode.cluster_authorization_failed, None)
    answer = await forward(ctx.broker.controller, request, _Refused)
    if isinstance(answer, _Refused):
        return await _refused_in_slices(request, answer.error, answer.message)
    return answer


def error_response(request: Any, error: ErrorCode) -> Any:
    return _refused(request, error, None)


def _refused(request: Any, error: ErrorCode, message: str | None) -> Any:
    """Every partition of the request answered ``error``, and the request as a whole too."""
    response_type, topic_type, partition_type = _types(request)
    responses = tuple(
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
    )
    return _response(request, response_type, error, message, responses)


async def _refused_in_slices(request: Any, error: ErrorCode, message: str | None) -> Any:
    """``_refused`` in time slices (``time_slices``): 1 MB names 166,000 partitions."""
    slices = TimeSlices()
    response_type, topic_type, partition_type = _types(request)
    responses = []
    async for topic in sliced(request.topics, slices):
        partitions = [
            partition_type(
                partition_index=p.partition_index, error_code=error, error_message=message
            )
            async for p in sliced(topic.partitions, slices)
        ]
        responses.append(topic_type(name=topic.name, partitions=tuple(partitions)))
    return _response(request, response_type, error, message, tuple(responses))


def _types(request: Any) -> tuple[Any, Any, Any]:
    response_type = schemas.response_schema(API_KEY, request.__version__)
    topic_type = element_type(response_type, "responses")
    return response_type, topic_type, element_type(topic_type, "partitions")


def _response(
    request: Any, response_type: Any, error: ErrorCode, message: str | None, responses: tuple
) -> Any:
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        allow_replication_factor_change=getattr(request, "allow_replication_factor_change", True),
        error_code=error,
        error_message=message,
        responses=responses,
    )
