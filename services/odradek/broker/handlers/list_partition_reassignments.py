"""ListPartitionReassignments (46, v0, KIP-455): forwarded to the active controller, which
knows every reassignment in progress; refused when no controller answers.

Needs DESCRIBE on the cluster (Kafka's ``handleListPartitionReassignmentsRequest``), asked here
before forwarding: else CLUSTER_AUTHORIZATION_FAILED, and nothing reaches the controller.

What is forwarded is the request reduced to the partitions it names, each once (in time slices,
``time_slices``): topics named with no partition, repeated topics and repeated partitions change
nothing in Kafka's answer (the set of named partitions being reassigned), so they do not travel.
5M empty topic names (35 MB) reach the controller as an empty list; a request naming many
distinct partitions reaches it whole and the controller answers it in slices too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from odradek.broker.authorization import authorize_cluster
from odradek.broker.context import RequestContext
from odradek.broker.forwarding import forward
from odradek.broker.handlers.build import NO_THROTTLE, element_type
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return error_response(request, ErrorCode.cluster_authorization_failed)
    request = await _reduced(request)
    return await forward(
        ctx.broker.controller, request, lambda error, message: _refused(request, error, message)
    )


async def _reduced(request: Any) -> Any:
    """``request`` naming each of its partitions once, and no topic without partitions."""
    if request.topics is None:  # every reassignment: nothing to reduce
        return request
    slices = TimeSlices()
    named: dict[str, dict[int, None]] = {}
    async for topic in sliced(request.topics, slices):
        if topic.partition_indexes:
            indexes = named.setdefault(topic.name, {})
            async for index in sliced(topic.partition_indexes, slices):
                indexes[index] = None
    topic_type = element_type(type(request), "topics")
    topics = tuple(
        topic_type(name=name, partition_indexes=tuple(indexes)) for name, indexes in named.items()
    )
    return dataclasses.replace(request, topics=topics)


def error_response(request: Any, error: ErrorCode) -> Any:
    return _refused(request, error, None)


def _refused(request: Any, error: ErrorCode, message: str | None) -> Any:
    response_type = schemas.response_schema(API_KEY, request.__version__)
    return response_type(
        throttle_time=NO_THROTTLE, error_code=error, error_message=message, topics=()
    )
