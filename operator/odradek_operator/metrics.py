"""The operator's Prometheus metrics, in their own registry (served by ``serve``).

- ``odradek_operator_reconciliations_total{kind, result}``: passes by resource kind and result
  (``ok``, ``retry``, ``refused``, ``error``);
- ``odradek_operator_errors_total{kind, reason}``: passes that did not finish, by reason;
- ``odradek_operator_operations_in_progress{namespace, cluster, type}``: 1 while a cluster's
  operation (RollingRestart, ScaleUp, ScaleDown, AddVolume) runs, else 0;
- ``odradek_operator_certificate_expiry_timestamp_seconds{cluster, namespace, certificate}``:
  when each certificate a secured cluster's operator keeps expires (``cluster-ca``,
  ``clients-ca``, ``broker``, ``controller``, ``zookeeper``: the earliest of its pods', and
  ``operator``), Unix seconds; alert on it minus ``time()``.

prometheus-client's metrics are thread-safe.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

__all__ = [
    "CERTIFICATE_EXPIRY",
    "ERRORS",
    "OPERATIONS",
    "RECONCILIATIONS",
    "REGISTRY",
    "record_certificates",
    "record_operation",
    "serve",
]

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
CERTIFICATE_EXPIRY = Gauge(
    "odradek_operator_certificate_expiry_timestamp_seconds",
    "When the certificate expires (Unix seconds); for a component, its earliest pod's.",
    ["cluster", "namespace", "certificate"],
    registry=REGISTRY,
)


def record_certificates(namespace: str, cluster: str, expiries: dict[str, float]) -> None:
    for certificate, timestamp in expiries.items():
        CERTIFICATE_EXPIRY.labels(cluster, namespace, certificate).set(timestamp)


def record_operation(namespace: str, cluster: str, operation: dict | None) -> None:
    running = (operation or {}).get("type")
    for type_ in OPERATION_TYPES:
        OPERATIONS.labels(namespace, cluster, type_).set(1 if type_ == running else 0)


def serve(port: int, address: str = "0.0.0.0") -> None:
    """Serve /metrics on ``address:port`` from a daemon thread."""
    start_http_server(port, address, registry=REGISTRY)
