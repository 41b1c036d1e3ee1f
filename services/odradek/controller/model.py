"""The active controller's view of the cluster, loaded from ZooKeeper and kept in step with it.

ZooKeeper is the source of truth; this model is a cache that only the controller's event loop
changes, right after the matching ZooKeeper write succeeded. Invariants:

- every partition of a known topic has a state (leader, leader epoch, ISR) once initialised;
- a leader is either -1 (none: every replica in the ISR is down) or a live broker;
- a partition's leader epoch grows by one at every leader change, never otherwise;
- ``state_versions`` holds each state znode's version, for compare-and-set writes;
- ``broker_epochs`` holds each live broker's epoch (the czxid of its registration), the value
  every request to that broker carries;
- ``topics`` holds each partition's full replica set RS; while a partition is reassigned
  (KIP-455) that is the target replicas followed by the original ones, with ``adding_replicas``
  and ``removing_replicas`` saying which are which (``reassignment``);
- ``offline_replicas``: replicas of live brokers on failed log dirs; elections skip them;
- ``partition_states`` and ``replica_states`` are Kafka's state machines' views (``states``):
  a partition is Online exactly when its leader is live, New until its first leader and ISR are
  written; a replica on a live broker is New or Online, on a dead one Offline;
- ``shutting_down`` (Kafka's ``shuttingDownBrokerIds``) holds the live brokers that asked for a
  controlled shutdown with their current broker epoch; a broker leaves it when it deregisters or
  registers again (a new epoch). ``live_broker_ids`` excludes them (Kafka's ``liveBrokerIds``), so
  no election makes one a leader and no ISR change adds one; ``brokers`` still lists them (they
  serve until they stop, and still get the controller's requests).
"""

from __future__ import annotations

import base64
import functools
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.common.partitions import TopicPartition
from odradek.controller.states import PartitionState as PartitionPhase
from odradek.controller.states import ReplicaState, StateTable
from odradek.zk.paths import BrokerInfo, TopicAssignment
from odradek.zk.paths import PartitionState as LeaderAndIsr

PartitionReplica = tuple[TopicPartition, int]  # Kafka's PartitionAndReplica
LEADER_DURING_DELETE = -2  # UpdateMetadata's marker for a partition being deleted, as Kafka's
TOPIC_UUIDS_CACHED = 1 << 16


@functools.lru_cache(maxsize=TOPIC_UUIDS_CACHED)
def topic_uuid(topic_id: str | None) -> uuid.UUID:
    """Kafka's base64 topic id (as stored in ZooKeeper) as the UUID the protocol carries.

    Cached: every LeaderAndIsr and UpdateMetadata partition carries its topic's id, and
    decoding it (base64, then ``uuid.UUID``) once per partition per request was a tenth of the
    controller's time with thousands of partitions."""
    if not topic_id:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """One partition's replicas as Kafka's controller holds them (its ``ReplicaAssignment``):
    the full set RS and, while it is reassigned, which of them are being added (AR) and removed
    (RR). The original replicas are RS - AR, the target ones RS - RR."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: tuple[int, ...]) -> ReplicaAssignment:
        """Kafka's ``reassignTo``: RS = TRS then the rest of ORS, AR = RS - ORS, RR = RS - TRS.
        A new target for a partition already moving starts from its original replicas, so
        ``reassign_to(origin)`` is a cancellation (nothing added or removed)."""
        origin = self.origin
        replicas = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(
            replicas,
            tuple(r for r in replicas if r not in origin),
            tuple(r for r in replicas if r not in target),
        )


def with_assignments(
    topic: TopicAssignment, changes: Mapping[int, ReplicaAssignment]
) -> TopicAssignment:
    """``topic`` with the partitions of ``changes`` replaced (their adding and removing replicas
    too; empty ones are dropped, as the znode lists only partitions being reassigned)."""
    partitions = dict(topic.partitions)
    adding = dict(topic.adding_replicas)
    removing = dict(topic.removing_replicas)
    for index, assignment in changes.items():
        partitions[index] = assignment.replicas
        adding[index] = assignment.adding
        removing[index] = assignment.removing
    return TopicAssignment(partitions, topic.topic_id, adding, removing)


class TopicTable(dict[str, TopicAssignment]):
    """``ClusterModel.topics``: each topic's assignment by name, also indexed by topic id.

    AlterPartition names its partitions by topic id, so the controller looks one up per
    partition it is asked about; ``by_id`` answers that without a scan of every topic (with
    thousands of topics the scan made one AlterPartition quadratic). Every write goes through
    the methods below, which keep ``by_id`` in step; a topic's id never changes while it lives.
    """

    def __init__(self, topics: Mapping[str, TopicAssignment] | None = None):
        super().__init__()
        self.by_id: dict[uuid.UUID, str] = {}
        self.update(topics or {})

    def __setitem__(self, name: str, assignment: TopicAssignment) -> None:
        self._unindex(name)
        super().__setitem__(name, assignment)
        if assignment.topic_id:
            self.by_id[topic_uuid(assignment.topic_id)] = name

    def __delitem__(self, name: str) -> None:
        self._unindex(name)
        super().__delitem__(name)

    def pop(self, name: str, *default: TopicAssignment | None) -> TopicAssignment | None:
        self._unindex(name)
        return super().pop(name, *default)

    def popitem(self) -> tuple[str, TopicAssignment]:
        name, assignment = super().popitem()
        self._unindex_assignment(assignment)
        return name, assignment

    def setdefault(self, name: str, default: TopicAssignment) -> TopicAssignment:  # type: ignore[override]
        if name not in self:
            self[name] = default
        return self[name]

    def update(self, *others: Mapping[str, TopicAssignment], **named: TopicAssignment) -> None:  # type: ignore[override]
        for other in (*others, named):
            for name, assignment in other.items():
                self[name] = assignment

    def clear(self) -> None:
        super().clear()
        self.by_id.clear()

    def _unindex(self, name: str) -> None:
        old = self.get(name)
        if old is not None:
            self._unindex_assignment(old)

    def _unindex_assignment(self, assignment: TopicAssignment) -> None:
        if assignment.topic_id:
            self.by_id.pop(topic_uuid(assignment.topic_id), None)


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
    topics: TopicTable = field(default_factory=TopicTable)
    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    state_versions: dict[TopicPartition, int] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    shutting_down: set[int] = field(default_factory=set)
    # Replicas on a failed log dir of a live broker (Kafka's ``replicasOnOfflineDirs``), as its
    # LeaderAndIsr answers said (KAFKA_STORAGE_ERROR); forgotten when the broker registers again.
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    partition_states: StateTable[TopicPartition, PartitionPhase] = field(
        default_factory=lambda: StateTable(PartitionPhase.NON_EXISTENT, "partition")
    )
    replica_states: StateTable[PartitionReplica, ReplicaState] = field(
        default_factory=lambda: StateTable(ReplicaState.NON_EXISTENT, "replica")
    )

    def __post_init__(self) -> None:
        if not isinstance(self.topics, TopicTable):
            self.topics = TopicTable(self.topics)

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers that may lead and join ISRs: registered and not shutting down."""
        return set(self.brokers) - self.shutting_down

    def set_brokers(self, live: Mapping[int, BrokerRegistration]) -> None:
        # A shutting-down broker that left, or came back with a new epoch, is no longer one.
        self.shutting_down = {
            b
            for b in self.shutting_down
            if b in live and live[b].epoch == self.broker_epochs.get(b)
        }
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

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        topic = self.topics[tp[0]]
        return ReplicaAssignment(
            tuple(topic.partitions[tp[1]]),
            tuple(topic.adding_replicas.get(tp[1], ())),
            tuple(topic.removing_replicas.get(tp[1], ())),
        )

    def is_reassigning(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is being reassigned (KIP-455: its assignment has adding or removing
        replicas); operations that move leaders or replicas on their own leave it alone."""
        assignment = self.topics.get(tp[0])
        return assignment is not None and (
            tp[1] in assignment.adding_replicas or tp[1] in assignment.removing_replicas
        )

    def reassigning_partitions(self) -> list[TopicPartition]:
        """Every partition being reassigned, in topic and partition order."""
        return [tp for tp in self.partitions() if self.is_reassigning(tp)]

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if broker_id in self.replicas(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, state in self.states.items() if state.leader == broker_id]

    def offline_partitions(self) -> list[TopicPartition]:
        live = set(self.brokers)  # a shutting-down leader still serves its partitions
        return [tp for tp, s in self.states.items() if s.leader not in live]

    def topic_id_names(self) -> Mapping[uuid.UUID, str]:
        """Each known topic's id (as the protocol carries it) to its name (read-only)."""
        return self.topics.by_id
