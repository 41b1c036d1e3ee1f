"""The cluster as the operations see it: brokers with their racks, and each partition's replicas.

A ``ClusterView`` is a snapshot read from Metadata (``odradek.ops.cluster.read_cluster``) or
built by hand (``ClusterView.build``, for tests and for the operator's own model). Planning
(``odradek.ops.planner``) is a pure function of a view, so a plan is reproducible from the view
it was made from.

Invariants: a partition's ``replicas`` are its assignment in order, the first being the preferred
leader; no broker appears twice in one partition's replicas; ``leader`` is -1 when the partition
has none. Frozen values: safe to share between threads and tasks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from odradek.common.partitions import NO_LEADER, TopicPartition

__all__ = ["BrokerInfo", "PartitionInfo", "ClusterView"]


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    host: str = ""
    port: int = 0
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int = NO_LEADER
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if len(set(self.replicas)) != len(self.replicas):
            raise ValueError(f"{self.topic}-{self.partition}: duplicate replicas {self.replicas}")

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class ClusterView:
    """Brokers by id and partitions by ``TopicPartition``, as one Metadata answer showed them."""

    brokers: Mapping[int, BrokerInfo]
    partitions: Mapping[TopicPartition, PartitionInfo]
    controller_id: int = -1
    cluster_id: str | None = None
    _topics: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "brokers", MappingProxyType(dict(sorted(self.brokers.items()))))
        object.__setattr__(
            self, "partitions", MappingProxyType(dict(sorted(self.partitions.items())))
        )
        object.__setattr__(self, "_topics", tuple(sorted({tp.topic for tp in self.partitions})))

    @classmethod
    def build(
        cls,
        assignment: Mapping[TopicPartition | tuple[str, int], Iterable[int]],
        racks: Mapping[int, str | None] | Iterable[int],
    ) -> ClusterView:
        """A view from an assignment and the brokers (ids, or id -> rack); leaders preferred."""
        rack_of = dict(racks) if isinstance(racks, Mapping) else dict.fromkeys(racks)
        partitions = {}
        for key, replicas in assignment.items():
            tp = TopicPartition(*key)
            replicas = tuple(replicas)
            leader = replicas[0] if replicas else NO_LEADER
            partitions[tp] = PartitionInfo(tp.topic, tp.partition, replicas, leader, replicas)
        brokers = {b: BrokerInfo(b, rack=rack) for b, rack in rack_of.items()}
        return cls(brokers, partitions)

    @property
    def topics(self) -> tuple[str, ...]:
        return self._topics

    def rack_of(self) -> dict[int, str | None]:
        return {b.id: b.rack for b in self.brokers.values()}

    def assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {tp: p.replicas for tp, p in self.partitions.items()}

    def only_topics(self, topics: Iterable[str]) -> ClusterView:
        """The same brokers with only these topics' partitions."""
        wanted = set(topics)
        partitions = {tp: p for tp, p in self.partitions.items() if tp.topic in wanted}
        return ClusterView(self.brokers, partitions, self.controller_id, self.cluster_id)

    def replica_counts(self) -> Counter[int]:
        """Replicas per broker; every known broker is present, with 0 if it holds none."""
        counts: Counter[int] = Counter(dict.fromkeys(self.brokers, 0))
        for p in self.partitions.values():
            counts.update(p.replicas)
        return counts

    def preferred_leader_counts(self) -> Counter[int]:
        counts: Counter[int] = Counter(dict.fromkeys(self.brokers, 0))
        counts.update(p.replicas[0] for p in self.partitions.values() if p.replicas)
        return counts
