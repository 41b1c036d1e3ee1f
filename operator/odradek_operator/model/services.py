"""Services: one headless Service per component (stable pod names, ready or not), the
``<cluster>-zookeeper-client`` Service (2181) and the ``<cluster>-bootstrap`` Service (the
brokers' client listeners' ports).

The headless Services publish not-ready addresses: a ZooKeeper server must resolve its peers
before they are ready (the ensemble forms only once they talk), and brokers and controllers are
named by their pods' DNS names while they start. The client Services route only to ready pods.

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from odradek_operator import names
from odradek_operator.model import meta, security
from odradek_operator.model.spec.cluster import ClusterSpec

Component = names.Component


def _ports(cluster: ClusterSpec, component: Component) -> list[dict[str, Any]]:
    def port(name: str, number: int) -> dict[str, Any]:
        return {"name": name, "port": number, "targetPort": name, "protocol": "TCP"}

    if component is Component.ZOOKEEPER:
        return [
            port("client", names.ZOOKEEPER_CLIENT_PORT),
            port("peer", names.ZOOKEEPER_PEER_PORT),
            port("election", names.ZOOKEEPER_ELECTION_PORT),
        ]
    if component is Component.CONTROLLER:
        return [
            port("controller", names.CONTROLLER_PORT),
            port("metrics", cluster.ports.metrics),
        ]
    return [
        *(port(name, number) for name, number in security.client_ports(cluster)),
        port("control-plane", cluster.ports.control_plane),
        port("internal", names.INTERNAL_PORT),
        port("metrics", cluster.ports.metrics),
    ]


def headless_service(cluster: ClusterSpec, component: Component) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta.object_meta(
            cluster, names.headless_service(cluster.name, component), component
        ),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": names.selector_labels(cluster.name, component),
            "ports": _ports(cluster, component),
        },
    }


def _client_service(
    cluster: ClusterSpec, name: str, component: Component, ports: list[tuple[str, int]]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta.object_meta(cluster, name, component),
        "spec": {
            "type": "ClusterIP",
            "selector": names.selector_labels(cluster.name, component),
            "ports": [
                {"name": port_name, "port": port, "targetPort": port_name, "protocol": "TCP"}
                for port_name, port in ports
            ],
        },
    }


def zookeeper_client_service(cluster: ClusterSpec) -> dict[str, Any]:
    name = names.zookeeper_client_service(cluster.name)
    ports = [("client", names.ZOOKEEPER_CLIENT_PORT)]
    return _client_service(cluster, name, Component.ZOOKEEPER, ports)


def bootstrap_service(cluster: ClusterSpec) -> dict[str, Any]:
    name = names.bootstrap_service(cluster.name)
    return _client_service(cluster, name, Component.BROKER, security.client_ports(cluster))
