"""The errors of ``odradek.ops``: one small tree under ``OpsError``, each naming its Kafka code.

- ``PlanError`` (invalid_replica_assignment): no plan can be made or read. Subclasses:
  ``PlanFormatError`` (a reassignment or topics JSON file Kafka's tool would refuse too),
  ``PlanMismatchError`` (the file names partitions or brokers the cluster does not have),
  ``PlacementError`` (the planner cannot place the replicas: too few brokers, mixed racks).
- ``ClusterRequestError``: the cluster refused a request; carries the broker's ``error_code``
  and message, and per partition the refusals (``refusals``: "topic-p" -> (code, message)).
- ``ReassignmentInProgressError`` (reassignment_in_progress): ``execute`` found reassignments
  already running and was not told to add to them.
- ``UnsupportedByClusterError`` (unsupported_version): the cluster does not serve an API the
  operation needs (a broker without AlterPartitionReassignments, say).
- ``ClusterUnreachableError`` (network_exception): no broker of the bootstrap list answered.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.errors import ErrorCode, OdradekError

__all__ = [
    "OpsError",
    "PlanError",
    "PlanFormatError",
    "PlanMismatchError",
    "PlacementError",
    "ClusterRequestError",
    "ReassignmentInProgressError",
    "UnsupportedByClusterError",
    "ClusterUnreachableError",
]


class OpsError(OdradekError):
    """Base of the cluster operations' errors."""


class PlanError(OpsError):
    error_code = ErrorCode.invalid_replica_assignment


class PlanFormatError(PlanError):
    """A JSON plan or topics file that is malformed."""


class PlanMismatchError(PlanError):
    """A plan that names partitions or brokers the cluster does not have."""


class PlacementError(PlanError):
    """The replicas cannot be placed on the brokers allowed."""


class ClusterRequestError(OpsError):
    """The cluster answered a request with an error code."""

    def __init__(
        self,
        message: str,
        error_code: ErrorCode = ErrorCode.unknown_server_error,
        refusals: Mapping[str, tuple[ErrorCode, str | None]] | None = None,
    ):
        super().__init__(message)
        self.error_code = error_code
        self.refusals = dict(refusals or {})


class ReassignmentInProgressError(OpsError):
    error_code = ErrorCode.reassignment_in_progress


class UnsupportedByClusterError(OpsError):
    error_code = ErrorCode.unsupported_version


class ClusterUnreachableError(OpsError):
    error_code = ErrorCode.network_exception
