"""Room for new replicas on each broker: its replica budget less the replicas assigned to it.

Every live broker registers the replicas it can host (``max_broker_partitions`` in
``/brokers/ids/<id>``, from its open-files limit: ``broker.replica_budget``); the replicas it
hosts are counted from every partition's assignment (its full replica set while it moves: a
replica being added or removed holds its files too). Two requests add replicas and check here
before anything is written: CreateTopics/CreatePartitions on the broker that takes them
(``broker.admin.replica_capacity``, POLICY_VIOLATION) and AlterPartitionReassignments on the
controller (``controller.reassignment``, INVALID_REPLICA_ASSIGNMENT).

A broker that registers no budget (an older registration) has unbounded room. Replicas granted
earlier in the same request are ``add``-ed, so one request cannot overshoot by splitting its
replicas over several topics or partitions. Pure and not thread-safe: one instance per request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

__all__ = ["ReplicaRoom"]


class ReplicaRoom:
    """Live brokers' replica budgets and the replicas assigned to them; see the docstring."""

    def __init__(self, budgets: Mapping[int, int | None], hosted: Mapping[int, int]):
        self.budgets = dict(budgets)  # live broker id -> budget (None: unbounded)
        self.hosted = Counter({b: hosted.get(b, 0) for b in self.budgets})

    def remaining(self, broker_id: int) -> int | None:
        """How many more replicas ``broker_id`` can host; None: unbounded (or not live)."""
        budget = self.budgets.get(broker_id)
        return None if budget is None else max(budget - self.hosted[broker_id], 0)

    def add_replicas(self, brokers: Iterable[int]) -> None:
        """Count one more replica on each of ``brokers`` (granted by this request)."""
        self.hosted.update(brokers)

    def describe(self) -> str:
        """Each live broker's hosted replicas against its budget, for an error message."""
        return ", ".join(
            f"broker {b}: {self.hosted[b]} of {'unbounded' if budget is None else budget}"
            for b, budget in sorted(self.budgets.items())
        )
