"""The operator end to end: kopf in-process against the test API server, the kubelet stand-in
running the pods it asks for as real processes (ZooKeeper, a controller, brokers), real clients.
One cluster shared by the tests of this module, in order: Ready and serving clients; topics
created, altered and their drift reverted; a config change rolled one broker at a time under
acks=all load losing nothing; scaled 3 -> 5 -> 3 with rebalance and drain; a JBOD volume
added; deleted, its PVC directories kept."""

from __future__ import annotations

import copy
import os
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from odradek_operator.kube import ApiKube
from odradek_operator.reconcile.admin import OpsAdmin
from odradek_operator.reconcile.cluster import ClusterContext
from support.k8s.kubelet import KubeletStandIn
from support.k8s_operator import OperatorThread, condition, wait_for

sys.path.insert(0, str(Path(__file__).parents[2] / "replication"))  # the ``proof`` package

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

NAMESPACE = "e2e"
READY_TIMEOUT_S = 120.0
CLUSTER = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekCluster",
    "metadata": {"name": "demo"},
    "spec": {
        "image": "odradek:test",
        "zookeeper": {"replicas": 1, "storage": {"size": "1Gi"}},
        "controllers": {"replicas": 1},
        "brokers": {
            "replicas": 3,
            "config": {"min.insync.replicas": 2, "default.replication.factor": 3},
        },
    },
}


class Cluster:
    def __init__(self, store, kubelet: KubeletStandIn) -> None:
        self.store = store
        self.kubelet = kubelet

    def get(self, plural="odradekclusters", name="demo"):
        return self.store.try_get(plural, NAMESPACE, name)

    def bootstrap(self) -> str:
        pods, _ = self.store.list(
            "pods", NAMESPACE, "app.kubernetes.io/instance=demo,app.kubernetes.io/component=broker"
        )
        return ",".join(
            f"{p['status']['podIP']}:9092"
            for p in pods
            if p.get("status", {}).get("podIP") and not p["metadata"].get("deletionTimestamp")
        )

    def ready(self) -> bool:
        cluster = self.get()
        return (
            condition(cluster, "Ready").get("status") == "True"
            and cluster["status"].get("observedGeneration") == cluster["metadata"]["generation"]
            and cluster["status"]["operation"]["type"] == "Idle"
        )

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict:
        wait_for(self.ready, timeout_s, f"cluster Ready: {self.get().get('status')}", 0.5)
        return self.get()

    def patch_spec(self, spec: dict) -> None:
        self.store.patch("odradekclusters", NAMESPACE, "demo", {"spec": spec})


@pytest.fixture(scope="module")
def cluster(kube_api, kubeconfig, tmp_path_factory):
    saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "ODRADEK_OPERATOR_TOPIC_INTERVAL_S")}
    os.environ["KUBECONFIG"] = str(kubeconfig)
    import kubernetes

    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    kubelet = KubeletStandIn(kube_api.store, tmp_path_factory.mktemp("kubelet")).start()
    ctx = ClusterContext(ApiKube(client), OpsAdmin, "odradek:test")
    try:
        with OperatorThread(ctx):
            kube_api.store.create("odradekclusters", NAMESPACE, copy.deepcopy(CLUSTER))
            yield Cluster(kube_api.store, kubelet)
    finally:
        kubelet.stop()
        client.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_cluster_becomes_ready_and_serves_clients(cluster):
    started = time.monotonic()
    obj = cluster.wait_ready()
    print(f"cluster Ready after {time.monotonic() - started:.1f}s")
    status = obj["status"]
    assert status["brokerIds"] == [0, 1, 2]
    assert status["bootstrap"] == f"demo-bootstrap.{NAMESPACE}.svc:9092"
    assert (
        status["brokers"]
        == {
            "replicas": 3,
            "selector": "app.kubernetes.io/name=odradek,app.kubernetes.io/instance=demo,"
            "app.kubernetes.io/component=broker",
        }
        or status["brokers"]["replicas"] == 3
    )
    bootstrap = cluster.bootstrap()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("hello", value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["hello"])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    consumer.close()
    assert sorted(seen) == sorted(b"v%d" % i for i in range(10))
