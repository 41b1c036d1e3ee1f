"""Racks: a scheduled broker pod gets its node's topology label as the odradek.io/rack
annotation, once; a node without the label makes the pass wait with a message naming it."""

from __future__ import annotations

import asyncio
import copy

import pytest

from odradek_operator.reconcile.cluster import ClusterContext, reconcile_cluster
from odradek_operator.reconcile.racks import annotate_racks
from odradek_operator.reconcile.status import Retry
from support.operator_doubles import FakeAdmin, FakeKube, pod, view

ZONE = "topology.kubernetes.io/zone"


def node(name: str, **labels: str) -> dict:
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": labels}}


def scheduled(name: str, node_name: str | None, **kwargs) -> dict:
    p = pod(name, **kwargs)
    if node_name is not None:
        p["spec"] = {"nodeName": node_name}
    return p


def annotations(kube: FakeKube, name: str) -> dict:
    return kube.find("Pod", name)["metadata"].get("annotations") or {}


def test_scheduled_pods_get_their_nodes_label_once():
    kube = FakeKube()
    kube.put(node("n1", **{ZONE: "zone-a"}))
    kube.put(node("n2", **{ZONE: "zone-b"}))
    kube.put(scheduled("demo-broker-0", "n1"))
    kube.put(scheduled("demo-broker-1", "n2"))
    kube.put(scheduled("demo-broker-2", None))  # not scheduled yet
    assert asyncio.run(annotate_racks(kube, "ns", "demo", ZONE)) == []
    assert annotations(kube, "demo-broker-0")["odradek.io/rack"] == "zone-a"
    assert annotations(kube, "demo-broker-1")["odradek.io/rack"] == "zone-b"
    assert "odradek.io/rack" not in annotations(kube, "demo-broker-2")
    patches = len([a for a in kube.actions if a[0] == "patch"])
    asyncio.run(annotate_racks(kube, "ns", "demo", ZONE))
    assert len([a for a in kube.actions if a[0] == "patch"]) == patches  # once per pod


def test_a_node_without_the_label_is_reported_and_its_pod_left_alone():
    kube = FakeKube()
    kube.put(node("bare"))
    kube.put(scheduled("demo-broker-0", "bare"))
    kube.put(scheduled("demo-broker-1", "gone"))
    waiting = asyncio.run(annotate_racks(kube, "ns", "demo", ZONE))
    assert waiting == [
        f"pod demo-broker-0: node bare has no label {ZONE}, so its broker has no rack "
        "(spec.brokers.rack) and waits",
        "pod demo-broker-1: node gone is gone, so its broker has no rack "
        "(spec.brokers.rack) and waits",
    ]
    assert "odradek.io/rack" not in annotations(kube, "demo-broker-0")


def test_the_cluster_pass_annotates_and_waits_with_a_clear_status():
    body = {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekCluster",
        "metadata": {"name": "demo", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {
            "zookeeper": {"replicas": 1},
            "controllers": {"replicas": 1},
            "brokers": {"replicas": 1, "rack": {"topologyKey": ZONE}, "config": {
                "default.replication.factor": 1, "min.insync.replicas": 1,
                "offsets.topic.replication.factor": 1,
                "transaction.state.log.replication.factor": 1,
                "transaction.state.log.min.isr": 1,
            }},
        },
    }  # fmt: skip
    kube = FakeKube()
    kube.put(body)
    kube.put(node("bare"))
    kube.put(scheduled("demo-broker-0", "bare", ready=False))
    admin = FakeAdmin(view({}, range(1)))
    ctx = ClusterContext(kube, lambda bootstrap: admin, "odradek:test")
    with pytest.raises(Retry) as retry:
        asyncio.run(reconcile_cluster(ctx, copy.deepcopy(body)))
    assert retry.value.reason == "NodeLabelMissing"
    status = kube.find("OdradekCluster", "demo")["status"]
    (ready,) = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert f"node bare has no label {ZONE}" in ready["message"]
    kube.put(node("bare", **{ZONE: "zone-a"}))
    with pytest.raises(Retry) as retry:
        asyncio.run(reconcile_cluster(ctx, kube.find("OdradekCluster", "demo")))
    assert retry.value.reason != "NodeLabelMissing"
    assert annotations(kube, "demo-broker-0")["odradek.io/rack"] == "zone-a"
