"""The partition an admin API acts on only at its leader (DeleteRecords, DescribeProducers).

``hosted_leader`` is Kafka's ``ReplicaManager.getPartitionOrException`` followed by the leader
check: a partition this broker does not host is NOT_LEADER_OR_FOLLOWER if the cluster knows it
(the client looks for its leader), else UNKNOWN_TOPIC_OR_PARTITION; a follower answers
NOT_LEADER_OR_FOLLOWER, naming the leader it knows. Each API adds its own checks after it.

Reads the replica manager and metadata cache only: call it on the broker's event loop.
"""

from __future__ import annotations

from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.partition import Partition
from odradek.broker.replica_manager import ReplicaManager
from odradek.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError

__all__ = ["hosted_leader"]


def hosted_leader(
    replicas: ReplicaManager, metadata: MetadataCache, topic: str, partition: int
) -> Partition:
    """The hosted ``topic``-``partition`` this broker leads, or the error Kafka answers."""
    hosted = replicas.partitions.get((topic, partition))
    if hosted is None:
        known = metadata.topic(topic)
        if known is not None and partition in known.partitions:
            raise NotLeaderOrFollowerError(
                f"broker {replicas.broker_id} does not lead {topic}-{partition}"
            )
        raise UnknownTopicOrPartitionError(f"unknown partition {topic}-{partition}")
    if not hosted.is_leader:
        raise NotLeaderOrFollowerError(
            f"broker {replicas.broker_id} does not lead {topic}-{partition} "
            f"(leader {hosted.state.leader})"
        )
    return hosted
