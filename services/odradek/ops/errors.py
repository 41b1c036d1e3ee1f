"""The errors of ``odradek.ops``: one small tree under ``OpsError``, each naming its Kafka code.

``OpsError`` is the admin client's ``AdminError`` (``odradek.client.errors``) under the name
this library exports: one class, so ``except OpsError`` still catches what the client raises
(``ClusterRequestError``, ``UnsupportedByClusterError``, ``ClusterUnreachableError``, defined
there with the client). The operations' own:

- ``PlanError`` (invalid_replica_assignment): no plan can be made or read. Subclasses:
  ``PlanFormatError`` (a reassignment or topics JSON file Kafka's tool would refuse too),
  ``PlanMismatchError`` (the file names partitions or brokers the cluster does not have),
  ``PlacementError`` (the planner cannot place the replicas: too few brokers, mixed racks).
- ``ReassignmentInProgressError`` (reassignment_in_progress): ``execute`` found reassignments
  already running and was not told to add to them.
"""

from __future__ import annotations

from odradek.client.errors import AdminError
from odradek.errors import ErrorCode

__all__ = [
    "OpsError",
    "PlanError",
    "PlanFormatError",
    "PlanMismatchError",
    "PlacementError",
    "ReassignmentInProgressError",
]

# The public name of the tree's root for the ops' callers (the commands, the operator, users).
OpsError = AdminError


class PlanError(OpsError):
    error_code = ErrorCode.invalid_replica_assignment


class PlanFormatError(PlanError):
    """A JSON plan or topics file that is malformed."""


class PlanMismatchError(PlanError):
    """A plan that names partitions or brokers the cluster does not have."""


class PlacementError(PlanError):
    """The replicas cannot be placed on the brokers allowed."""


class ReassignmentInProgressError(OpsError):
    error_code = ErrorCode.reassignment_in_progress
