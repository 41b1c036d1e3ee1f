"""Drain, rebalance and topic moves against a live cluster: read it, plan, size the plan.

The one entry per operation that the CLI and the Kubernetes operator share: each reads the
cluster (Metadata), plans with ``odradek.ops.planner`` and measures what the plan copies
(DescribeLogDirs of the brokers holding the moving partitions), returning a ``PreparedPlan``.
Running it is ``odradek.ops.reassign.execute`` / ``watch`` / ``cancel``; nothing here changes
the cluster.

A cluster without DescribeLogDirs still gets a plan: its byte counts are None (unknown).
Async, one task per call; each call opens and closes its own connections.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.client.admin import ClusterClient
from odradek.client.errors import UnsupportedByClusterError
from odradek.client.security import ClientSecurity
from odradek.common.partitions import TopicPartition
from odradek.ops.cluster import partition_sizes, read_cluster, replica_sizes
from odradek.ops.model import ClusterView
from odradek.ops.plan import Plan
from odradek.ops.planner import plan_drain, plan_move, plan_rebalance
from odradek.ops.reassign import REQUEST_TIMEOUT_S

__all__ = ["PreparedPlan", "prepare_drain", "prepare_rebalance", "prepare_move", "prepare_plan"]


@dataclass(frozen=True)
class PreparedPlan:
    view: ClusterView  # the cluster the plan was made from
    plan: Plan
    partition_bytes: dict[TopicPartition, int] | None  # None: the cluster gave no sizes

    @property
    def bytes_to_move(self) -> int | None:
        if self.partition_bytes is None:
            return None
        return self.plan.bytes_to_move(self.partition_bytes)


async def prepare_drain(
    bootstrap: str,
    broker_id: int,
    *,
    rack_aware: bool = True,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> PreparedPlan:
    """The plan that empties ``broker_id`` (``planner.plan_drain``)."""
    return await _prepare(
        bootstrap,
        lambda view: plan_drain(view, broker_id, rack_aware=rack_aware),
        request_timeout_s,
        security,
    )


async def prepare_rebalance(
    bootstrap: str,
    *,
    rack_aware: bool = True,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> PreparedPlan:
    """The plan that evens out replicas and preferred leaders (``planner.plan_rebalance``)."""
    return await _prepare(
        bootstrap,
        lambda view: plan_rebalance(view, rack_aware=rack_aware),
        request_timeout_s,
        security,
    )


async def prepare_move(
    bootstrap: str,
    topics: Iterable[str],
    broker_ids: Iterable[int],
    *,
    rack_aware: bool = True,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> PreparedPlan:
    """The plan that puts ``topics`` on ``broker_ids`` (``planner.plan_move``)."""
    topics, broker_ids = list(topics), list(broker_ids)
    return await _prepare(
        bootstrap,
        lambda view: plan_move(view, topics, broker_ids, rack_aware=rack_aware),
        request_timeout_s,
        security,
    )


async def prepare_plan(
    bootstrap: str,
    reassignment_json: str,
    *,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> PreparedPlan:
    """A plan from a kafka-reassign-partitions JSON file, against the cluster as it is now."""
    return await _prepare(
        bootstrap, lambda view: Plan.from_json(reassignment_json, view), request_timeout_s, security
    )


async def _prepare(
    bootstrap: str, make, request_timeout_s: float, security: ClientSecurity | None
) -> PreparedPlan:
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        view = await read_cluster(client)
        plan = make(view)
        moving = {b for move in plan if move.adding for b in view.partitions[move.tp].replicas}
        try:
            sizes = await replica_sizes(client, moving & set(view.brokers))
        except UnsupportedByClusterError:
            return PreparedPlan(view, plan, None)
        return PreparedPlan(view, plan, partition_sizes(view, sizes))
