"""What this broker believes about the cluster: brokers, topics, partition leaders and ISRs.

The controller is the source of truth; it pushes its view (UpdateMetadata) to every broker, and
each broker answers Metadata requests from this cache, so answers from any broker agree within a
propagation delay. Updates replace whole entries (a topic's partitions, the live broker set), so a
reader never sees half an update.

Each live broker is kept with every endpoint it registered, by listener name: a Metadata answer
lists each broker's address on the listener the request came in on (Kafka's rule), so clients
on an external listener are sent to external addresses; and followers will look up leaders on
the inter-broker listener.

Runs on the broker's event loop only.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.config.endpoints import HostPort


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A live broker: its id, its address on each of its listeners (never mutated), its rack."""

    broker_id: int
    endpoints: Mapping[str, HostPort]
    rack: str | None = None

    def endpoint(self, listener_name: str) -> HostPort | None:
        return self.endpoints.get(listener_name)


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
        self.brokers: dict[int, LiveBroker] = {}
        self.topics: dict[str, TopicMetadata] = {}

    def update_brokers(self, brokers: list[LiveBroker]) -> None:
        self.brokers = {b.broker_id: b for b in brokers}

    def brokers_on(self, listener_name: str) -> list[tuple[LiveBroker, HostPort]]:
        """Live brokers with an endpoint on ``listener_name`` and that endpoint, by id.

        A broker without one is left out, as Kafka's ``getAliveBrokerNodes(listenerName)``.
        """
        found = []
        for broker_id in sorted(self.brokers):
            broker = self.brokers[broker_id]
            address = broker.endpoint(listener_name)
            if address is not None:
                found.append((broker, address))
        return found

    def update_topic(self, topic: TopicMetadata) -> None:
        self.topics[topic.name] = topic

    def remove_topic(self, name: str) -> None:
        self.topics.pop(name, None)

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)
