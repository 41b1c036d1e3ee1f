"""The NetworkPolicies of a cluster: who may reach which port of each component's pods.

One policy per component, ``<cluster>-<component>-network-policy`` (as Strimzi's
``<cluster>-network-policy-kafka``), selecting that component's pods by
``names.selector_labels`` and restricting ingress only (egress stays open, as Strimzi's):

============  ======================================  ==========================================
component     port                                    from
============  ======================================  ==========================================
zookeeper     2181 (clients)                          brokers, controllers
zookeeper     2888, 3888 (quorum, election)           ZooKeeper's pods
controller    9093 (the controller's listener)        brokers, controllers, the operator
controller    metrics (admin: /metrics, /healthz)     anywhere (Prometheus, the kubelet)
broker        CONTROL_PLANE, INTERNAL (9094)          brokers, controllers, the operator
broker        the client listener                     anywhere, or ``networkPolicyPeers``
broker        metrics                                 anywhere
============  ======================================  ==========================================

"The operator" is any pod labelled ``odradek.io/kind: cluster-operator`` (the chart puts it on
the operator's pods) in the operator's namespace (``namespaceSelector`` on the label
``kubernetes.io/metadata.name`` Kubernetes sets on every Namespace), or in any namespace when
the operator does not know its own (``POD_NAMESPACE`` unset: run outside a pod). When the client
listener is narrowed by its ``spec.listeners[].networkPolicyPeers``, the operator is let in
too: it reads metadata and drives reassignments through that listener.

A port not listed in any rule of a policy that selects a pod is closed to every peer, so a
listener added to the pods without a rule here would be unreachable: tests/unit check that the
ports of the pods and of the rules are the same. Only a cluster with ``spec.networkPolicies``
(the default) gets them; the reconciler deletes the ones it made when that turns false.

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from odradek_operator import names
from odradek_operator.model import meta
from odradek_operator.model.spec.cluster import ClusterSpec

Component = names.Component
API_VERSION = "networking.k8s.io/v1"
KIND = "NetworkPolicy"


def pods_of(cluster: ClusterSpec, component: Component) -> dict[str, Any]:
    """A peer: the pods of one component of this cluster (in its namespace)."""
    return {"podSelector": {"matchLabels": names.selector_labels(cluster.name, component)}}


def operator_peer(operator_namespace: str | None) -> dict[str, Any]:
    """A peer: the operator's pods, in its namespace (any namespace if not known)."""
    namespaces: dict[str, Any] = (
        {"matchLabels": {names.NAMESPACE_NAME_LABEL: operator_namespace}}
        if operator_namespace
        else {}
    )
    return {
        "podSelector": {"matchLabels": {names.OPERATOR_KIND_LABEL: names.OPERATOR_KIND}},
        "namespaceSelector": namespaces,
    }


def _ports(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def _rule(ports: list[dict[str, Any]], peers: list[dict[str, Any]] | None) -> dict[str, Any]:
    """An ingress rule; ``peers`` None: from anywhere (no ``from``)."""
    rule: dict[str, Any] = {"ports": ports}
    if peers is not None:
        rule["from"] = peers
    return rule


def _policy(
    cluster: ClusterSpec, component: Component, rules: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": meta.object_meta(
            cluster, names.network_policy(cluster.name, component), component
        ),
        "spec": {
            "podSelector": {"matchLabels": names.selector_labels(cluster.name, component)},
            "policyTypes": ["Ingress"],
            "ingress": rules,
        },
    }


def zookeeper(cluster: ClusterSpec) -> dict[str, Any]:
    clients = [pods_of(cluster, Component.BROKER), pods_of(cluster, Component.CONTROLLER)]
    quorum = [pods_of(cluster, Component.ZOOKEEPER)]
    return _policy(
        cluster,
        Component.ZOOKEEPER,
        [
            _rule(_ports(names.ZOOKEEPER_CLIENT_PORT), clients),
            _rule(_ports(names.ZOOKEEPER_PEER_PORT, names.ZOOKEEPER_ELECTION_PORT), quorum),
        ],
    )


def _cluster_peers(cluster: ClusterSpec, operator_namespace: str | None) -> list[dict[str, Any]]:
    return [
        pods_of(cluster, Component.BROKER),
        pods_of(cluster, Component.CONTROLLER),
        operator_peer(operator_namespace),
    ]


def controller(cluster: ClusterSpec, operator_namespace: str | None) -> dict[str, Any]:
    return _policy(
        cluster,
        Component.CONTROLLER,
        [
            _rule(_ports(names.CONTROLLER_PORT), _cluster_peers(cluster, operator_namespace)),
            _rule(_ports(cluster.ports.metrics), None),
        ],
    )


def client_listeners(cluster: ClusterSpec) -> list[tuple[int, tuple[Any, ...] | None]]:
    """Each client listener's port and ``networkPolicyPeers`` (None: from anywhere)."""
    return [(listener.port, listener.network_policy_peers) for listener in cluster.listeners]


def broker(cluster: ClusterSpec, operator_namespace: str | None) -> dict[str, Any]:
    ports = cluster.ports
    clients = []
    for port, peers in client_listeners(cluster):
        allowed = None
        if peers is not None:
            allowed = [*(dict(p) for p in peers), operator_peer(operator_namespace)]
        clients.append(_rule(_ports(port), allowed))
    return _policy(
        cluster,
        Component.BROKER,
        [
            _rule(
                _ports(ports.control_plane, names.INTERNAL_PORT),
                _cluster_peers(cluster, operator_namespace),
            ),
            *clients,
            _rule(_ports(ports.metrics), None),
        ],
    )


def network_policies(
    cluster: ClusterSpec, operator_namespace: str | None
) -> dict[Component, dict[str, Any]]:
    """Each component's policy; empty when ``spec.networkPolicies`` is false."""
    if not cluster.network_policies:
        return {}
    return {
        Component.ZOOKEEPER: zookeeper(cluster),
        Component.CONTROLLER: controller(cluster, operator_namespace),
        Component.BROKER: broker(cluster, operator_namespace),
    }
