"""The operator's Prometheus metrics, in their own registry (served by ``serve``).

- ``odradek_operator_reconciliations_total{kind, result}``: passes by resource kind and result
  (``ok``, ``retry``, ``refused``, ``error``);
- ``odradek_operator_errors_total{kind, reason}``: passes that did not finish, by reason;
- ``odradek_operator_operations_in_progress{namespace, cluster, type}``: 1 while a cluster's
  operation (RollingRestart, ScaleUp, ScaleDown, AddVolume) runs, else 0.

prometheus-client's metrics are thread-safe.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

__all__ = ["ERRORS", "OPERATIONS", "RECONCILIATIONS", "REGISTRY", "record_operation", "serve"]

REGISTRY = CollectorRegistry()
RECONCILIATIONS = Counter(
    "odradek_operator_reconciliations",
    "Reconciliation passes by resource kind and result (ok, retry, refused, error).",
    ["kind", "result"],
    registry=REGISTRY,
)
ERRORS = Counter(
    "odradek_operator_errors",
    "Passes that did not finish, by resource kind and reason.",
    ["kind", "reason"],
    registry=REGISTRY,
)
OPERATIONS = Gauge(
    "odradek_operator_operations_in_progress",
    "1 while the cluster's operation of this type runs.",
    ["namespace", "cluster", "type"],
    registry=REGISTRY,
)
OPERATION_TYPES = ("RollingRestart", "ScaleUp", "ScaleDown", "AddVolume")


def record_operation(namespace: str, cluster: str, operation: dict | None) -> None:
    running = (operation or {}).get("type")
    for type_ in OPERATION_TYPES:
        OPERATIONS.labels(namespace, cluster, type_).set(1 if type_ == running else 0)


def serve(port: int, address: str = "0.0.0.0") -> None:
    """Serve /metrics on ``address:port`` from a daemon thread."""
    start_http_server(port, address, registry=REGISTRY)
