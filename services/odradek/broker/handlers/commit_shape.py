"""What OffsetCommit (8) and TxnOffsetCommit (28) share: their requests name offsets by topic
and partition the same way, and their responses answer each partition with an error code.

``commits_of`` turns a request's topics into ``PartitionCommit``s; ``partition_errors_response``
answers every partition of the request: the error of the whole request (``failed``) if there
is one, else the partition's own, UNKNOWN_SERVER_ERROR for a partition the coordinator did not
answer (which would be a bug, not a silent success).

``readable_commits`` is the topic check both make (Kafka: READ on each topic): the commits the
principal may make, and TOPIC_AUTHORIZATION_FAILED for the others, which win over any error of
the whole request (they were never sent to the coordinator).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.broker.authorization import filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.groups.offsets import PartitionCommit
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType

__all__ = ["commits_of", "partition_errors_response", "readable_commits"]


def commits_of(request: Any) -> list[PartitionCommit]:
    return [
        PartitionCommit(
            topic.name,
            p.partition_index,
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata,
        )
        for topic in request.topics
        for p in topic.partitions
    ]


def readable_commits(
    ctx: RequestContext, commits: list[PartitionCommit]
) -> tuple[list[PartitionCommit], dict[tuple[str, int], ErrorCode]]:
    readable = filter_authorized(
        ctx, AclOperation.READ, ResourceType.TOPIC, (c.topic for c in commits)
    )
    refused = {
        (c.topic, c.partition): ErrorCode.topic_authorization_failed
        for c in commits
        if c.topic not in readable
    }
    return [c for c in commits if c.topic in readable], refused


def partition_errors_response(
    api_key: ApiKey,
    version: int,
    request: Any,
    errors: dict[tuple[str, int], ErrorCode],
    failed: ErrorCode,
    refused: Mapping[tuple[str, int], ErrorCode] | None = None,
) -> Any:
    refused = refused or {}
    response_type = schemas.response_schema(api_key, version)
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    topics = tuple(
        topic_type(
            name=topic.name,
            partitions=tuple(
                partition_type(
                    partition_index=p.partition_index,
                    error_code=refused[(topic.name, p.partition_index)]
                    if (topic.name, p.partition_index) in refused
                    else failed
                    if failed != ErrorCode.none
                    else errors.get(
                        (topic.name, p.partition_index), ErrorCode.unknown_server_error
                    ),
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return build(response_type, throttle_time=NO_THROTTLE, topics=topics)
