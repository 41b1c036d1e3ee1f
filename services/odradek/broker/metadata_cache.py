"""What this broker believes about the cluster: brokers, topics, partition leaders and ISRs.

The controller is the source of truth; it pushes its view (UpdateMetadata) to every broker, and
each broker answers Metadata requests from this cache, so answers from any broker agree within a
propagation delay. Updates replace whole entries (a topic's partitions, the live broker set), so a
reader never sees half an update.

Each live broker is kept with every endpoint it registered, by listener name: a Metadata answer
lists each broker's address on the listener the request came in on (Kafka's rule), so clients
on an external listener are sent to external addresses; and followers will look up leaders on
the inter-broker listener.

Runs on the broker's event loop only. ``wait_until`` lets a request wait (bounded) for the cache
to reach a state, as Kafka's purgatory does for CreateTopics (``DelayedCreatePartitions``): every
change wakes the waiters, which check their condition again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
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
        self._waiters: set[asyncio.Future[None]] = set()

    def update_brokers(self, brokers: list[LiveBroker]) -> None:
        self.brokers = {b.broker_id: b for b in brokers}
        self._changed()

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
        self._changed()

    def remove_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        self._changed()

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    async def wait_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Whether ``condition()`` held within ``timeout_s``: checked now and after each change."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not condition():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            changed = loop.create_future()
            self._waiters.add(changed)
            try:
                await asyncio.wait_for(changed, remaining)
            except TimeoutError:
                return condition()
            finally:
                self._waiters.discard(changed)
        return True

    def _changed(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
