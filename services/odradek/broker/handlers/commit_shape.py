"""What OffsetCommit (8) and TxnOffsetCommit (28) share: their requests name offsets by topic
and partition the same way, and their responses answer each partition with an error code.

``commits_of`` turns a request's topics into ``PartitionCommit``s; ``partition_errors_response``
answers every partition of the request: the error of the whole request (``failed``) if there
is one, else the partition's own, UNKNOWN_SERVER_ERROR for a partition the coordinator did not
answer (which would be a bug, not a silent success).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.groups.offsets import PartitionCommit
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

__all__ = ["commits_of", "partition_errors_response"]


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


def partition_errors_response(
    api_key: ApiKey,
    version: int,
    request: Any,
    errors: dict[tuple[str, int], ErrorCode],
    failed: ErrorCode,
) -> Any:
    response_type = schemas.response_schema(api_key, version)
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    topics = tuple(
        topic_type(
            name=topic.name,
            partitions=tuple(
                partition_type(
                    partition_index=p.partition_index,
                    error_code=failed
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
