"""DeleteRecords: move a partition's log start offset forward, on its leader.

As Kafka's ``Partition.deleteRecordsOnLeader``: only the leader deletes (a partition the cluster
knows but this broker does not lead is NOT_LEADER_OR_FOLLOWER, so clients look for the leader;
one nobody knows is UNKNOWN_TOPIC_OR_PARTITION); a topic whose ``cleanup.policy`` lacks
``delete`` refuses (POLICY_VIOLATION); offset -1 means the high watermark; an offset beyond it
is OFFSET_OUT_OF_RANGE. The answer carries the new low watermark (the log start offset). With
one replica per partition the low watermark is the leader's, so there is nothing to wait for.

Runs on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from odradek.broker.admin.errors import PolicyViolationError, error_of
from odradek.broker.admin.leader_partition import hosted_leader
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.replica_manager import ReplicaManager
from odradek.errors import ErrorCode

__all__ = ["DeleteRecordsResult", "delete_one", "delete_records"]

INVALID_LOW_WATERMARK = -1


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult:
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    low_watermark: int = INVALID_LOW_WATERMARK
    message: str | None = None


def delete_records(
    replicas: ReplicaManager,
    metadata: MetadataCache,
    wanted: Sequence[tuple[str, int, int]],
) -> list[DeleteRecordsResult]:
    """Delete records below ``offset`` for each ``(topic, partition, offset)``, in order."""
    return [delete_one(replicas, metadata, *w) for w in wanted]


def delete_one(
    replicas: ReplicaManager, metadata: MetadataCache, topic: str, partition: int, offset: int
) -> DeleteRecordsResult:
    """Delete the records of ``topic``-``partition`` below ``offset``; its result."""
    try:
        _check_leader(replicas, metadata, topic, partition)
        found = replicas.delete_records(topic, partition, offset)
        low_watermark = found.offset if found.error == ErrorCode.none else INVALID_LOW_WATERMARK
        return DeleteRecordsResult(topic, partition, found.error, low_watermark)
    except Exception as e:
        code, message = error_of(e, f"deleting records of {topic}-{partition}")
        return DeleteRecordsResult(topic, partition, code, message=message)


def _check_leader(
    replicas: ReplicaManager, metadata: MetadataCache, topic: str, partition: int
) -> None:
    hosted = hosted_leader(replicas, metadata, topic, partition)
    if not hosted.log.config.delete:
        raise PolicyViolationError(
            f"Records of partition {topic}-{partition} can not be deleted due to the "
            "configured policy"
        )
