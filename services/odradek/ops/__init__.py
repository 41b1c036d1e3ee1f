"""Cluster operations as a library: drain a broker, rebalance, move topics, run and follow a
reassignment. The ``odradek reassign`` and ``odradek cluster`` commands and the Kubernetes
operator are clients of this package.

Layers (checked by import-linter: ``odradek.ops`` knows the wire protocol and Odradek's client,
never the broker's or the controller's internals):

- ``model``: ``ClusterView``, the cluster as Metadata shows it (pure data);
- ``plan``: ``Plan`` and kafka-reassign-partitions' JSON files (pure);
- ``planner``: ``plan_drain``, ``plan_rebalance``, ``plan_move`` (pure functions);
- ``cluster``: Metadata and DescribeLogDirs (async), over the admin client
  (``odradek.client.admin``, shared with Connect);
- ``throttles``, ``reassign``: throttles, ``execute``, ``status``, ``watch``, ``cancel`` (async);
- ``operations``: read + plan + size in one call per operation (async).

A typical drain::

    prepared = await prepare_drain(bootstrap, broker_id=4)
    await execute(bootstrap, prepared.plan, throttle_bytes_per_s=50_000_000)
    report = await watch(bootstrap, prepared.plan, timeout_s=3600)
    await elect_preferred_leaders(bootstrap, prepared.plan.targets())  # leaders as planned
"""

from odradek.client.errors import (
    ClusterRequestError,
    ClusterUnreachableError,
    UnsupportedByClusterError,
)
from odradek.ops.errors import (
    OpsError,
    PlacementError,
    PlanError,
    PlanFormatError,
    PlanMismatchError,
    ReassignmentInProgressError,
)
from odradek.ops.leaders import elect_preferred_leaders
from odradek.ops.model import BrokerInfo, ClusterView, PartitionInfo
from odradek.ops.operations import (
    PreparedPlan,
    prepare_drain,
    prepare_move,
    prepare_plan,
    prepare_rebalance,
)
from odradek.ops.plan import PartitionMove, Plan, parse_reassignment_json, parse_topics_to_move
from odradek.ops.planner import plan_drain, plan_move, plan_rebalance
from odradek.ops.reassign import (
    PartitionProgress,
    PartitionState,
    StatusReport,
    cancel,
    execute,
    list_reassignments,
    status,
    watch,
)

__all__ = [
    "elect_preferred_leaders",
    "BrokerInfo",
    "ClusterRequestError",
    "ClusterUnreachableError",
    "ClusterView",
    "OpsError",
    "PartitionInfo",
    "PartitionMove",
    "PartitionProgress",
    "PartitionState",
    "PlacementError",
    "Plan",
    "PlanError",
    "PlanFormatError",
    "PlanMismatchError",
    "PreparedPlan",
    "ReassignmentInProgressError",
    "StatusReport",
    "UnsupportedByClusterError",
    "cancel",
    "execute",
    "list_reassignments",
    "parse_reassignment_json",
    "parse_topics_to_move",
    "plan_drain",
    "plan_move",
    "plan_rebalance",
    "prepare_drain",
    "prepare_move",
    "prepare_plan",
    "prepare_rebalance",
    "status",
    "watch",
]
