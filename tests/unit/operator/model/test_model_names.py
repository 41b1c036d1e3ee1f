"""names.py gives the brief's names, labels, ids and paths for a cluster ``demo`` in ``data``."""

from __future__ import annotations

import pytest

from odradek_operator import names
from odradek_operator.names import Component


def test_object_names():
    assert [names.statefulset("demo", c) for c in Component] == [
        "demo-zookeeper",
        "demo-controller",
        "demo-broker",
    ]
    assert [names.headless_service("demo", c) for c in Component] == [
        "demo-zookeeper-nodes",
        "demo-controller-nodes",
        "demo-broker-nodes",
    ]
    assert [names.config_map("demo", c) for c in Component] == [
        "demo-zookeeper-config",
        "demo-controller-config",
        "demo-broker-config",
    ]
    assert names.zookeeper_client_service("demo") == "demo-zookeeper-client"
    assert names.bootstrap_service("demo") == "demo-bootstrap"
    assert names.pod_disruption_budget("demo", Component.BROKER) == "demo-broker"
    assert names.service_account("demo") == "demo-odradek"
    assert names.pod("demo", Component.BROKER, 2) == "demo-broker-2"
    assert names.broker_pvc("demo", 1, 2) == "data-1-demo-broker-2"
    assert names.zookeeper_pvc("demo", 0) == "data-demo-zookeeper-0"


def test_addresses():
    assert names.zookeeper_connect("demo", "data") == (
        "demo-zookeeper-client.data.svc.cluster.local:2181/odradek"
    )
    assert names.bootstrap_address("demo", "data", 9092) == "demo-bootstrap.data.svc:9092"
    assert names.pod_host("demo", Component.ZOOKEEPER, 1, "data") == (
        "demo-zookeeper-1.demo-zookeeper-nodes.data.svc.cluster.local"
    )


def test_ids_and_their_inverses():
    assert [names.broker_id(n) for n in range(3)] == [0, 1, 2]
    assert [names.controller_id(n) for n in range(2)] == [1001, 1002]
    assert names.controller_ordinal(1002) == 1
    assert [names.zookeeper_myid(n) for n in range(3)] == [1, 2, 3]
    assert names.ordinal_of("demo-broker-12") == 12
    with pytest.raises(ValueError):
        names.ordinal_of("demo-broker")


def test_log_dirs():
    assert names.volume_claim_template(1) == "data-1"
    assert names.log_dir_mount(1) == "/var/lib/odradek/data-1"
    assert names.log_dir(1) == "/var/lib/odradek/data-1/log"


def test_labels_and_selectors():
    assert names.labels("demo", Component.BROKER) == {
        "app.kubernetes.io/name": "odradek",
        "app.kubernetes.io/instance": "demo",
        "app.kubernetes.io/managed-by": "odradek-operator",
        "app.kubernetes.io/component": "broker",
    }
    assert names.selector("demo", Component.BROKER) == (
        "app.kubernetes.io/name=odradek,app.kubernetes.io/instance=demo,"
        "app.kubernetes.io/component=broker"
    )
    assert names.cluster_selector("demo") == (
        "app.kubernetes.io/name=odradek,app.kubernetes.io/instance=demo,"
        "app.kubernetes.io/managed-by=odradek-operator"
    )
    # A selector must match the pods' labels, which carry more.
    assert (
        names.selector_labels("demo", Component.BROKER).items()
        <= names.labels("demo", Component.BROKER).items()
    )
