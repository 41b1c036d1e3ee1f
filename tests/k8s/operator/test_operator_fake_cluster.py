"""The operator's kopf handlers against the test API server with a fake admin API and pods put
in by hand: objects created and owned, status from Reconciling to Ready, a topic created, a
scale-down below a replication factor refused in status, no crash loop."""

from __future__ import annotations

import copy

import pytest

from odradek_operator.kube import ApiKube
from odradek_operator.reconcile.cluster import ClusterContext
from support.k8s_operator import OperatorThread, condition, wait_for
from support.operator_doubles import FakeAdmin, view

pytestmark = pytest.mark.k8s

CLUSTER = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekCluster",
    "metadata": {"name": "demo"},
    "spec": {
        "zookeeper": {"replicas": 1},
        "controllers": {"replicas": 1},
        "brokers": {
            "replicas": 3,
            "config": {
                "min.insync.replicas": 1,
                "default.replication.factor": 2,
                "offsets.topic.replication.factor": 2,
                "transaction.state.log.replication.factor": 2,
            },
        },
    },
}


def ready_pods_for(store, namespace):
    """Play the StatefulSet controller and kubelet: one ready pod per replica."""
    statefulsets, _ = store.list("statefulsets", namespace)
    for sts in statefulsets:
        template = copy.deepcopy(sts["spec"]["template"])
        for ordinal in range(sts["spec"]["replicas"]):
            name = f"{sts['metadata']['name']}-{ordinal}"
            if store.try_get("pods", namespace, name):
                continue
            meta = template["metadata"]
            labels = {**meta.get("labels", {}), "apps.kubernetes.io/pod-index": str(ordinal)}
            pod = store.create(
                "pods",
                namespace,
                {
                    "metadata": {
                        "name": name,
                        "labels": labels,
                        "annotations": meta.get("annotations", {}),
                    },
                    "spec": template["spec"],
                },
            )
            pod["status"] = {
                "podIP": f"127.0.9.{ordinal + 1}",
                "conditions": [{"type": "Ready", "status": "True"}],
            }
            store.replace("pods", namespace, name, pod, subresource="status")


def test_cluster_ready_topic_created_scale_down_refused(
    kube_api, kubeconfig, kube_client, namespace, monkeypatch
):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    store = kube_api.store
    admin = FakeAdmin(view({("__consumer_offsets", 0): (0, 1, 2)}, range(3)))
    ctx = ClusterContext(ApiKube(kube_client), lambda bootstrap: admin, "odradek:test")
    store.create("odradekclusters", namespace, copy.deepcopy(CLUSTER))
    with OperatorThread(ctx, namespace):
        wait_for(
            lambda: store.try_get("statefulsets", namespace, "demo-broker"),
            20,
            "the brokers' StatefulSet",
        )
        cluster = wait_for(
            lambda: condition(store.try_get("odradekclusters", namespace, "demo"), "Reconciling"),
            20,
            "a Reconciling condition",
        )
        assert cluster["reason"] == "PodsNotReady"
        sts = store.get("statefulsets", namespace, "demo-broker")
        owner = sts["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("OdradekCluster", "demo")
        assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == "odradek:test"

        ready_pods_for(store, namespace)
        ready = wait_for(
            lambda: (
                condition(store.try_get("odradekclusters", namespace, "demo"), "Ready").get(
                    "status"
                )
                == "True"
            ),
            30,
            "Ready",
        )
        assert ready
        assert store.get("odradekclusters", namespace, "demo")["spec"]["zookeeper"] == {
            "replicas": 1
        }
        status = store.get("odradekclusters", namespace, "demo")["status"]
        assert status["brokerIds"] == [0, 1, 2]
        assert status["bootstrap"] == f"demo-bootstrap.{namespace}.svc:9092"
        assert status["operation"]["type"] == "Idle"
        assert status["brokers"]["replicas"] == 3

        store.create(
            "odradektopics",
            namespace,
            {
                "metadata": {"name": "orders"},
                "spec": {
                    "cluster": "demo",
                    "partitions": 3,
                    "replicationFactor": 3,
                    "config": {"retention.ms": 60000},
                },
            },
        )
        wait_for(
            lambda: (
                condition(store.try_get("odradektopics", namespace, "orders"), "Ready").get(
                    "status"
                )
                == "True"
            ),
            20,
            "the topic Ready",
        )
        assert ("create_topic", "orders", 3, 3, {"retention.ms": "60000"}) in admin.calls
        topic = store.get("odradektopics", namespace, "orders")
        assert topic["status"]["partitions"] == 3
        assert topic["metadata"]["finalizers"]  # kopf's, for the delete handler

        store.patch("odradekclusters", namespace, "demo", {"spec": {"brokers": {"replicas": 2}}})
        error = wait_for(
            lambda: (
                condition(store.try_get("odradekclusters", namespace, "demo"), "Error").get(
                    "status"
                )
                == "True"
                and condition(store.get("odradekclusters", namespace, "demo"), "Error")
            ),
            20,
            "the scale-down refused",
        )
        assert error["reason"] == "ScaleDownBelowReplicationFactor"
        assert store.get("statefulsets", namespace, "demo-broker")["spec"]["replicas"] == 3

        store.delete("odradektopics", namespace, "orders")
        wait_for(
            lambda: store.try_get("odradektopics", namespace, "orders") is None,
            20,
            "the topic's finalizer released",
        )
        assert ("delete_topic", "orders") in admin.calls
