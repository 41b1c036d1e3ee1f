"""The active controller's view of the cluster, loaded from ZooKeeper and kept in step with it.

ZooKeeper is the source of truth; this model is a cache that only the controller's event loop
changes, right after the matching ZooKeeper write succeeded. Invariants:

- every partition of a known topic has a state (leader, leader epoch, ISR) once initialised;
- a leader is either -1 (none: every replica in the ISR is down) or a live broker;
- a partition's leader epoch grows by one at every leader change, never otherwise;
- ``state_versions`` holds each state znode's version, for compare-and-set writes;
- ``broker_epochs`` holds each live broker's epoch (the czxid of its registration), the value
  every request to that broker carries;
- ``offline_replicas``: replicas of live brokers on failed log dirs; elections skip them;
- ``partition_states`` and ``replica_states`` are Kafka's state machines' views (``states``):
  a partition is Online exactly when its leader is live, New until its first leader and ISR are
  written; a replica on a live broker is New or Online, on a dead one Offline.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.controller.states import PartitionState as PartitionPhase
from odradek.controller.states import ReplicaState, StateTable
from odradek.zk.paths import BrokerInfo, TopicAssignment
from odradek.zk.paths import PartitionState as LeaderAndIsr

TopicPartition = tuple[str, int]
PartitionReplica = tuple[TopicPartition, int]  # Kafka's PartitionAndReplica
NO_LEADER = -1
LEADER_DURING_DELETE = -2  # UpdateMetadata's marker for a partition being deleted, as Kafka's


def topic_uuid(topic_id: str | None) -> uuid.UUID:
    """Kafka's base64 topic id (as stored in ZooKeeper) as the UUID the protocol carries."""
    if not topic_id:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


class BrokerRegistration(NamedTuple):
    """A live broker's ``/brokers/ids/<id>``: what it holds, and its czxid (the broker epoch)."""

    info: BrokerInfo
    epoch: int


@dataclass
class ClusterModel:
    epoch: int
    epoch_zk_version: int
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    state_versions: dict[TopicPartition, int] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    # Replicas on a failed log dir of a live broker (Kafka's ``replicasOnOfflineDirs``), as its
    # LeaderAndIsr answers said (KAFKA_STORAGE_ERROR); forgotten when the broker registers again.
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    partition_states: StateTable[TopicPartition, PartitionPhase] = field(
        default_factory=lambda: StateTable(PartitionPhase.NON_EXISTENT, "partition")
    )
    replica_states: StateTable[PartitionReplica, ReplicaState] = field(
        default_factory=lambda: StateTable(ReplicaState.NON_EXISTENT, "replica")
    )

    @property
    def live_broker_ids(self) -> set[int]:
        return set(self.brokers)

    def set_brokers(self, live: Mapping[int, BrokerRegistration]) -> None:
        self.brokers = {b: registration.info for b, registration in live.items()}
        self.broker_epochs = {b: registration.epoch for b, registration in live.items()}

    def live_replicas(self, tp: TopicPartition) -> set[int]:
        """The brokers whose replica of ``tp`` can serve: live, and not on a failed log dir
        (Kafka's ``isReplicaOnline``)."""
        return {b for b in self.brokers if tp not in self.offline_replicas.get(b, ())}

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(self.topics[tp[0]].partitions[tp[1]])

    def partitions(self, topic: str | None = None) -> Iterator[TopicPartition]:
        names = [topic] if topic is not None else sorted(self.topics)
        for name in names:
            for index in sorted(self.topics[name].partitions):
                yield (name, index)

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if broker_id in self.replicas(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, state in self.states.items() if state.leader == broker_id]

    def offline_partitions(self) -> list[TopicPartition]:
        live = self.live_broker_ids
        return [tp for tp, s in self.states.items() if s.leader not in live]

    def topic_id_names(self) -> dict[uuid.UUID, str]:
        """Each known topic's id (as the protocol carries it) to its name."""
        return {topic_uuid(a.topic_id): name for name, a in self.topics.items() if a.topic_id}
