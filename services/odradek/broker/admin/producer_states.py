"""DescribeProducers: the active producers of partitions this broker leads (KIP-664).

As Kafka's ``ReplicaManager.activeProducerState``: a partition this broker does not host is
NOT_LEADER_OR_FOLLOWER if the cluster knows it (the client looks for its leader), else
UNKNOWN_TOPIC_OR_PARTITION; a follower answers NOT_LEADER_OR_FOLLOWER; an offline log
KAFKA_STORAGE_ERROR. On the leader, every producer its log's producer state holds: id, epoch,
last sequence, last timestamp, the coordinator epoch of its last marker, and the first offset
of its open transaction (-1: none), which ``odradek transactions abort`` and
``find-hanging`` read.

Runs on the broker's event loop; the producer state is copied under the log's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from odradek.broker.admin.errors import error_of
from odradek.broker.admin.leader_partition import hosted_leader
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.replica_manager import ReplicaManager
from odradek.errors import ErrorCode, KafkaStorageError
from odradek.storage.producer_state import ActiveProducer

__all__ = ["PartitionProducers", "describe_producers"]


@dataclass(frozen=True, slots=True)
class PartitionProducers:
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    producers: tuple[ActiveProducer, ...] = field(default=())


def describe_producers(
    replicas: ReplicaManager, metadata: MetadataCache, wanted: Sequence[tuple[str, int]]
) -> list[PartitionProducers]:
    """The active producers of each ``(topic, partition)``, in request order."""
    results = []
    for topic, partition in wanted:
        try:
            producers = _leader_log(replicas, metadata, topic, partition).active_producers()
            ordered = tuple(producers[pid] for pid in sorted(producers))
            results.append(PartitionProducers(topic, partition, producers=ordered))
        except Exception as e:
            code, message = error_of(e, f"describing the producers of {topic}-{partition}")
            results.append(PartitionProducers(topic, partition, code, message))
    return results


def _leader_log(replicas: ReplicaManager, metadata: MetadataCache, topic: str, partition: int):
    hosted = hosted_leader(replicas, metadata, topic, partition)
    if hosted.log.offline:
        raise KafkaStorageError(f"the log of {topic}-{partition} is offline")
    return hosted.log
