"""What OffsetCommit (8) and TxnOffsetCommit (28) share: their requests name offsets by topic
and partition the same way, and their responses answer each partition with an error code.

``commits_of`` turns a request's topics into ``PartitionCommit``s, one per partition (Kafka
writes a record per occurrence, so a partition named 55,000 times in 1 MB built and encoded
55,000 records on the loop, 0.9 s, to be refused as too large; here it is one record, the last
offset, which is what replaying Kafka's records would leave); ``partition_errors_response``
answers every partition of the request: the error of the whole request (``failed``) if there
is one, else the partition's own, UNKNOWN_SERVER_ERROR for a partition the coordinator did not
answer (which would be a bug, not a silent success). As Kafka's ``OffsetCommitResponse.Builder``
and ``TxnOffsetCommitResponse.Builder``, a topic named several times is answered once, with
every partition of each occurrence (333,000 empty topics: one answer); both go through the
request's arrays in time slices (``time_slices``).

``readable_commits`` is the topic check both make (Kafka: READ on each topic): the commits the
principal may make, and TOPIC_AUTHORIZATION_FAILED for the others, which win over any error of
the whole request (they were never sent to the coordinator).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

from odradek.broker.authorization import filter_authorized
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.errors import ErrorCode
from odradek.groups.offsets import PartitionCommit
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, run_at_once, run_sliced, sliced

__all__ = [
    "commits_of",
    "error_partitions_response",
    "partition_errors_response",
    "readable_commits",
]


async def commits_of(request: Any, slices: TimeSlices) -> list[PartitionCommit]:
    """The request's commits, one per partition: a partition named twice is committed once,
    with its last offset (what replaying every occurrence in order leaves). The answer names
    every occurrence, each with that partition's error, as before."""
    commits: dict[tuple[str, int], PartitionCommit] = {}
    async for topic in sliced(request.topics, slices):
        for p in topic.partitions:
            commits[(topic.name, p.partition_index)] = PartitionCommit(
                topic.name,
                p.partition_index,
                p.committed_offset,
                getattr(p, "committed_leader_epoch", -1),
                p.committed_metadata,
            )
            await slices.tick()
    return list(commits.values())


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


async def partition_errors_response(
    api_key: ApiKey,
    version: int,
    request: Any,
    errors: dict[tuple[str, int], ErrorCode],
    failed: ErrorCode,
    refused: Mapping[tuple[str, int], ErrorCode] | None = None,
    slices: TimeSlices | None = None,
) -> Any:
    """The answer, built in time slices."""
    steps = _answer(api_key, version, request, errors, failed, refused or {})
    return await run_sliced(steps, slices)


def error_partitions_response(api_key: ApiKey, version: int, request: Any, error: ErrorCode) -> Any:
    """The answer with ``error`` for every partition, in one go (``error_response``)."""
    return run_at_once(_answer(api_key, version, request, {}, error, {}))


def _answer(
    api_key: ApiKey,
    version: int,
    request: Any,
    errors: dict[tuple[str, int], ErrorCode],
    failed: ErrorCode,
    refused: Mapping[tuple[str, int], ErrorCode],
) -> Generator[None, None, Any]:
    """Builds the answer, pausing (``yield``) after each partition; returns it."""
    response_type = schemas.response_schema(api_key, version)
    topic_type = element_type(response_type, "topics")
    partition_type = element_type(topic_type, "partitions")
    by_topic: dict[str, list[Any]] = {}  # Kafka's Builder: one answer per topic name
    for topic in request.topics:
        answered = by_topic.setdefault(topic.name, [])
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            answered.append(
                partition_type(
                    partition_index=p.partition_index,
                    error_code=refused[tp]
                    if tp in refused
                    else failed
                    if failed != ErrorCode.none
                    else errors.get(tp, ErrorCode.unknown_server_error),
                )
            )
            yield
        yield
    topics = tuple(topic_type(name=name, partitions=tuple(ps)) for name, ps in by_topic.items())
    return build(response_type, throttle_time=NO_THROTTLE, topics=topics)
