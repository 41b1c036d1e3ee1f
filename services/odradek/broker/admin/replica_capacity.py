"""Whether the cluster can hold a topic's new replicas: each broker's budget against its replicas.

Each live broker's room (its registered budget less the replicas every topic's assignment,
``/brokers/topics/*``, gives it) is ``replica_room.ReplicaRoom``'s, which the controller's
reassignment check shares; this module adds CreateTopics' rules. CreateTopics and
CreatePartitions check their new replicas here after validation and **before** anything is
written; a refusal is POLICY_VIOLATION, as Kafka answers a topic its policy rejects:

- the new replicas must fit in the sum of the live brokers' remaining budgets;
- and each broker named by the assignment (manual, or the one placement chose) must have room
  for its share, so no broker is asked past its own limit.

One request also adds at most ``REQUEST_PARTITIONS_MAX`` partitions, as Kafka caps it.
Topics planned earlier in the same request are ``add``-ed, so one request cannot overshoot by
splitting its replicas over several topics. Pure and not thread-safe: one instance per request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from odradek.broker.admin.errors import PolicyViolationError
from odradek.replica_room import ReplicaRoom

__all__ = ["REQUEST_PARTITIONS_MAX", "ReplicaCapacity"]

# New partitions in one CreateTopics or CreatePartitions request, all topics together: Kafka's
# cap (its controller's MAX_RECORDS_PER_USER_OP, applied in ZooKeeper mode too since 3.9); the
# topic that would pass it is refused, with Kafka's message.
REQUEST_PARTITIONS_MAX = 10_000


class ReplicaCapacity(ReplicaRoom):
    """The room for a CreateTopics or CreatePartitions request's replicas; see the docstring."""

    def __init__(self, budgets: Mapping[int, int | None], hosted: Mapping[int, int]):
        super().__init__(budgets, hosted)
        self.request_partitions = 0  # new partitions of this request's topics, added so far

    def check_size(self, topic: str, partitions: int, replicas: int) -> None:
        """Raise PolicyViolationError if ``partitions`` new partitions of ``replicas`` replicas
        in all pass the request's cap or the cluster's room, wherever they are placed: checked
        before a topic is placed (``validation.placeable_size``), as placement costs more."""
        if self.request_partitions + partitions > REQUEST_PARTITIONS_MAX:
            raise PolicyViolationError(
                f"Excessively large number of partitions per request: topic '{topic}' would "
                f"bring it to {self.request_partitions + partitions}, past "
                f"{REQUEST_PARTITIONS_MAX}."
            )
        remaining = [self.remaining(b) for b in self.budgets]
        if all(r is not None for r in remaining):
            room = sum(r for r in remaining if r is not None)
            if replicas > room:
                raise PolicyViolationError(
                    f"Topic '{topic}' needs {replicas} replicas but the cluster's brokers can "
                    f"host only {room} more ({self.describe()}); the replica budget of each "
                    f"broker comes from its open-files limit (max.broker.partitions)."
                )

    def check(self, topic: str, assignment: Mapping[int, Sequence[int]]) -> None:
        """Raise PolicyViolationError if ``assignment``'s replicas do not fit (nothing counted)."""
        wanted = Counter(b for replicas in assignment.values() for b in replicas)
        self.check_size(topic, len(assignment), sum(wanted.values()))
        remaining = {b: self.remaining(b) for b in self.budgets}
        for broker_id, count in sorted(wanted.items()):
            room_b = remaining.get(broker_id)
            if room_b is not None and count > room_b:
                raise PolicyViolationError(
                    f"Topic '{topic}' puts {count} replicas on broker {broker_id}, which can host "
                    f"only {room_b} more ({self.describe()}; max.broker.partitions)."
                )

    def add(self, assignment: Mapping[int, Sequence[int]]) -> None:
        """Count ``assignment``'s replicas as hosted (a topic of the same request, planned)."""
        self.add_replicas(b for replicas in assignment.values() for b in replicas)
        self.request_partitions += len(assignment)
