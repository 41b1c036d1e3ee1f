"""The cluster pass: objects applied in order and owned, status conditions, refusals read from
the live StatefulSets, the operation replaced whole in status."""

from __future__ import annotations

import asyncio

import pytest

from odradek_operator.model import zookeeper, zookeeper_tls
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.names import Component
from odradek_operator.reconcile.certificates import pod_hash
from odradek_operator.reconcile.cluster import ClusterContext, reconcile_cluster, write_status
from odradek_operator.reconcile.status import Refused, Retry
from support.operator_doubles import FakeAdmin, FakeKube, pod, view

BODY = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekCluster",
    "metadata": {"name": "demo", "namespace": "ns", "uid": "u1", "generation": 2},
    "spec": {
        "zookeeper": {"replicas": 1},
        "controllers": {"replicas": 1},
        "brokers": {"replicas": 3},
    },
}


def world():
    kube = FakeKube()
    kube.put(BODY)
    admin = FakeAdmin(view({("t", 0): (0, 1, 2)}, range(3)))
    return kube, ClusterContext(kube, lambda bootstrap: admin, "odradek:test")


def conditions(kube):
    status = kube.find("OdradekCluster", "demo")["status"]
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_first_pass_creates_everything_and_waits_for_pods():
    kube, ctx = world()
    with pytest.raises(Retry) as retry:
        asyncio.run(reconcile_cluster(ctx, BODY))
    assert retry.value.reason == "PodsNotReady"
    created = [a[1] for a in kube.actions if a[0] == "create"]
    assert created.index("StatefulSet") > created.index("ConfigMap")
    names = [a[2] for a in kube.actions if a[0] == "create" and a[1] == "StatefulSet"]
    assert names == ["demo-zookeeper", "demo-controller", "demo-broker"]
    assert conditions(kube)["Reconciling"] == ("True", "PodsNotReady")
    assert conditions(kube)["Ready"][0] == "False"


def test_ready_when_every_pod_is():
    kube, ctx = world()
    with pytest.raises(Retry):
        asyncio.run(reconcile_cluster(ctx, BODY))
    for sts, n, component in (
        ("demo-zookeeper", 1, "zookeeper"),
        ("demo-controller", 1, "controller"),
        ("demo-broker", 3, "broker"),
    ):
        template = kube.find("StatefulSet", sts)["spec"]["template"]["metadata"]["annotations"]
        for i in range(n):
            kube.put(
                pod(
                    f"{sts}-{i}",
                    component=component,
                    config_hash=template["odradek.io/config-hash"],
                )
            )
    status = asyncio.run(reconcile_cluster(ctx, kube.find("OdradekCluster", "demo")))
    assert conditions(kube)["Ready"] == ("True", "AllPodsReady")
    assert status["brokerIds"] == [0, 1, 2] and status["observedGeneration"] == 2
    assert status["bootstrap"] == "demo-bootstrap.ns.svc:9092"


def test_zookeeper_resize_is_refused_from_the_live_statefulset():
    kube, ctx = world()
    with pytest.raises(Retry):
        asyncio.run(reconcile_cluster(ctx, BODY))
    bigger = {**BODY, "spec": {**BODY["spec"], "zookeeper": {"replicas": 3}}}
    with pytest.raises(Refused) as refused:
        asyncio.run(reconcile_cluster(ctx, bigger))
    assert refused.value.reason == "ZooKeeperResizeRefused"
    assert conditions(kube)["Error"] == ("True", "ZooKeeperResizeRefused")
    assert conditions(kube)["Ready"] == ("False", "ZooKeeperResizeRefused")  # not applied
    assert kube.find("StatefulSet", "demo-zookeeper")["spec"]["replicas"] == 1


@pytest.mark.parametrize("secured_first", [False, True])
def test_a_zookeeper_alone_says_whether_the_running_cluster_is_secured(secured_first):
    """A pass that stopped after ZooKeeper: its ensemble never turns between plaintext and TLS
    (the peers of a half-rolled ensemble could not form a quorum)."""
    tls = [{"name": "tls", "port": 9092, "tls": True}]
    plain = BODY
    secured = {**BODY, "spec": {**BODY["spec"], "listeners": tls}}
    first, then = (secured, plain) if secured_first else (plain, secured)
    kube, ctx = world()
    running = zookeeper.statefulset(ClusterSpec.from_resource(first))
    assert zookeeper_tls.serves_tls(running) == secured_first
    before = kube.put(running)
    with pytest.raises(Refused) as refused:
        asyncio.run(reconcile_cluster(ctx, then))
    assert refused.value.reason == "SecurityChangeRefused"
    assert "ZooKeeper" in str(refused.value) and "spec.listeners" in str(refused.value)
    assert conditions(kube)["Ready"] == ("False", "SecurityChangeRefused")
    assert kube.find("StatefulSet", "demo-zookeeper") == before  # nothing applied
    assert kube.find("StatefulSet", "demo-broker") is None


def test_invalid_spec_is_an_error_condition():
    kube, ctx = world()
    bad = {**BODY, "spec": {**BODY["spec"], "brokers": {"replicas": -1}}}
    with pytest.raises(Refused) as refused:
        asyncio.run(reconcile_cluster(ctx, bad))
    assert refused.value.reason == "InvalidSpec"
    assert conditions(kube)["Error"] == ("True", "InvalidSpec")


def test_operation_is_replaced_whole():
    kube, _ = world()
    body = {**BODY, "status": {"operation": {"type": "ScaleUp", "rebalanced": True}}}
    kube.put(body)
    asyncio.run(write_status(kube, body, {"operation": {"type": "Idle"}}))
    assert kube.find("OdradekCluster", "demo")["status"]["operation"] == {"type": "Idle"}


# --- secured clusters (issue 24) ----------------------------------------------------------------

SECURED = {
    **BODY,
    "spec": {
        **BODY["spec"],
        "listeners": [
            {"name": "tls", "port": 9092, "tls": True, "authentication": {"type": "tls"}}
        ],
    },
}


def test_a_secured_pass_makes_the_certificates_before_the_pods_that_mount_them():
    kube, _ = world()
    kube.put(SECURED)
    seen = []
    admin = FakeAdmin(view({("t", 0): (0, 1, 2)}, range(3)))

    def admin_for(bootstrap, tls=None):
        seen.append((bootstrap, tls))
        return admin

    ctx = ClusterContext(kube, admin_for, "odradek:test")
    with pytest.raises(Retry):
        asyncio.run(reconcile_cluster(ctx, SECURED))
    created = [(a[1], a[2]) for a in kube.actions if a[0] == "create"]
    secrets_made = [n for k, n in created if k == "Secret"]
    assert secrets_made == [
        "demo-cluster-ca",
        "demo-cluster-ca-cert",
        "demo-clients-ca",
        "demo-clients-ca-cert",
        "demo-broker-certs",
        "demo-controller-certs",
        "demo-zookeeper-certs",
        "demo-zookeeper-client-certs",
        "demo-operator-certs",
    ]
    assert created.index(("Secret", "demo-broker-certs")) < created.index(
        ("StatefulSet", "demo-broker")
    )
    secret = kube.find("Secret", "demo-broker-certs")
    template = kube.find("StatefulSet", "demo-broker")["spec"]["template"]["metadata"]
    key = "odradek.io/certificates-hash"
    zk_client = kube.find("Secret", "demo-zookeeper-client-certs")["metadata"]["annotations"][key]
    # the brokers mount their Secret and the ZooKeeper client identity: the hash covers both
    assert template["annotations"][key] == pod_hash(
        Component.BROKER, secret["metadata"]["annotations"][key], zk_client
    )
    assert secret["metadata"]["ownerReferences"][0]["name"] == "demo"
    status = kube.find("OdradekCluster", "demo")["status"]
    assert {e["certificate"] for e in status["certificates"]} >= {"cluster-ca", "broker"}
    # A second pass writes no Secret: nothing is due.
    kube.actions.clear()
    with pytest.raises(Retry):
        asyncio.run(reconcile_cluster(ctx, kube.find("OdradekCluster", "demo")))
    assert not [a for a in kube.actions if a[1] == "Secret" and a[0] != "get"]


def test_a_running_plaintext_cluster_is_not_secured_in_place():
    kube, ctx = world()
    with pytest.raises(Retry):
        asyncio.run(reconcile_cluster(ctx, BODY))  # the plaintext StatefulSets exist now
    secured = {**SECURED, "metadata": {**SECURED["metadata"], "generation": 3}}
    with pytest.raises(Refused) as refused:
        asyncio.run(reconcile_cluster(ctx, secured))
    assert refused.value.reason == "SecurityChangeRefused"
    assert kube.find("Secret", "demo-cluster-ca") is None


def test_network_policies_come_before_the_pods_and_go_when_turned_off():
    kube, ctx = world()
    with pytest.raises(Retry):
        asyncio.run(reconcile_cluster(ctx, BODY))
    created = [(a[1], a[2]) for a in kube.actions if a[0] == "create"]
    for component in ("zookeeper", "controller", "broker"):
        policy = ("NetworkPolicy", f"demo-{component}-network-policy")
        assert created.index(policy) < created.index(("StatefulSet", f"demo-{component}"))
    # someone else's policy of a name the operator would use is left alone
    kube.put(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "demo-broker-network-policy", "namespace": "ns"},
            "spec": {},
        }
    )
    off = {**BODY, "spec": {**BODY["spec"], "networkPolicies": False}}
    with pytest.raises(Retry):
        asyncio.run(reconcile_cluster(ctx, off))
    assert sorted(kube.deleted("NetworkPolicy")) == [
        "demo-controller-network-policy",
        "demo-zookeeper-network-policy",
    ]
    assert kube.find("NetworkPolicy", "demo-broker-network-policy") is not None
