"""What this broker believes about the cluster: brokers, topics, partition leaders and ISRs.

The controller is the source of truth; it pushes its view (UpdateMetadata) to every broker, and
each broker answers Metadata requests from this cache, so answers from any broker agree within a
propagation delay. Updates replace whole entries (a topic's partitions, the live broker set), so a
reader never sees half an update.

Runs on the broker's event loop only.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    is_internal: bool = False


class MetadataCache:
    def __init__(self, cluster_id: str | None = None):
        self.cluster_id = cluster_id
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, TopicMetadata] = {}

    def update_brokers(self, brokers: list[BrokerEndpoint]) -> None:
        self.brokers = {b.broker_id: b for b in brokers}

    @property
    def controller_id(self) -> int:
        """What Metadata names as controller: the lowest live broker id (-1 if none).

        The controller is its own process here, not a broker, but admin clients send
        CreateTopics & co. to the node named controller; any broker serves them.
        """
        return min(self.brokers, default=-1)

    def update_topic(self, topic: TopicMetadata) -> None:
        self.topics[topic.name] = topic

    def remove_topic(self, name: str) -> None:
        self.topics.pop(name, None)

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)
