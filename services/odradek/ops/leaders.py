"""Preferred leader election as a library call: leadership back to each partition's first
replica, which is where ``plan_drain`` and ``plan_rebalance`` put the leaders they balance.

A reassignment moves leadership only when the leader leaves the replicas (KIP-455); a plan that
spread preferred leaders by reordering replicas has done its job only once the preferred
replicas lead. ``elect_preferred_leaders`` asks for that with ElectLeaders (API 43, v1+: the
election type PREFERRED; any broker forwards it to the controller), for the partitions given.
Per partition, ELECTION_NOT_NEEDED counts as success (it already leads); other errors are
returned for the caller to report: a preferred replica out of the ISR (still catching up) gets
PREFERRED_LEADER_NOT_AVAILABLE and the controller's automatic rebalance will do it later.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from kio.schema.elect_leaders.v1.request import ElectLeadersRequest

from odradek.client.admin import ClusterClient, build, element_type
from odradek.client.errors import ClusterRequestError
from odradek.client.security import ClientSecurity
from odradek.cluster.election import ElectionType
from odradek.common.partitions import TopicPartition
from odradek.errors import ErrorCode
from odradek.ops.reassign import REQUEST_TIMEOUT_S

__all__ = ["elect_preferred_leaders"]

ELECT_LEADERS = ElectLeadersRequest.__api_key__  # 43
ELECT_LEADERS_MAX_VERSION = 2
PREFERRED = int(ElectionType.PREFERRED)  # 0
ALREADY_LEADING = ErrorCode.election_not_needed


async def elect_preferred_leaders(
    bootstrap: str,
    partitions: Iterable[TopicPartition],
    *,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> dict[TopicPartition, ErrorCode]:
    """Elect the preferred replica of each partition; the partitions it could not (and why)."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return {}

    def make(request_type: type) -> object:
        topic_type = element_type(request_type, "topic_partitions")
        return build(
            request_type,
            election_type=PREFERRED,
            topic_partitions=tuple(
                build(topic_type, topic=topic, partitions=tuple(indexes))
                for topic, indexes in by_topic.items()
            ),
            timeout=timedelta(seconds=request_timeout_s),
        )

    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        response = await client.send_any(ELECT_LEADERS, ELECT_LEADERS_MAX_VERSION, make)
    error = ErrorCode(getattr(response, "error_code", ErrorCode.none))
    if error != ErrorCode.none:
        raise ClusterRequestError(f"ElectLeaders refused: {error.name}", error)
    failed = {}
    for topic in response.replica_election_results:
        for result in topic.partition_result:
            code = ErrorCode(result.error_code)
            if code not in (ErrorCode.none, ALREADY_LEADING):
                failed[TopicPartition(str(topic.topic), int(result.partition_id))] = code
    return failed
