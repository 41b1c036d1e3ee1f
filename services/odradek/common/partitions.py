"""A partition's name and the sentinels of leadership, as Kafka spells them.

``TopicPartition`` is a ``NamedTuple``, so it equals and hashes as the plain ``(topic, partition)``
tuple: code that builds either may look the other up in a dict. Connect's plugin API keeps its
own public ``odradek.connect.api.TopicPartition`` (a dataclass connectors see).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition", "NO_LEADER", "NO_EPOCH"]

NO_LEADER = -1  # LeaderAndIsr.NoLeader: no replica leads the partition
NO_EPOCH = -1  # LeaderAndIsr.NoEpoch (and RecordBatch.NO_PRODUCER_EPOCH): no epoch given, no check


class TopicPartition(NamedTuple):
    """A partition of a topic; sorts by topic, then partition; prints as ``<topic>-<partition>``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
