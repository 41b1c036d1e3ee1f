"""The pods' ServiceAccount and the PodDisruptionBudgets.

The ServiceAccount ``<cluster>-odradek`` has no role: Odradek's pods never call the Kubernetes
API, and their token is not mounted. The budgets allow one voluntary disruption at a time for
ZooKeeper (a majority stays) and for brokers (with replication factor 3 and min.insync.replicas
2, writes go on); the operator's own restarts delete pods and are not bound by them. Controllers
get none: one is active, the others wait, and losing any one is an election away.

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from odradek_operator import names
from odradek_operator.model import meta
from odradek_operator.model.spec.cluster import ClusterSpec

MAX_UNAVAILABLE = 1


def service_account(cluster: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta.object_meta(cluster, names.service_account(cluster.name)),
        "automountServiceAccountToken": False,
    }


def pod_disruption_budget(cluster: ClusterSpec, component: names.Component) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta.object_meta(
            cluster, names.pod_disruption_budget(cluster.name, component), component
        ),
        "spec": {
            "maxUnavailable": MAX_UNAVAILABLE,
            "selector": {"matchLabels": names.selector_labels(cluster.name, component)},
        },
    }
