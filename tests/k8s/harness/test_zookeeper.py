"""A one-server ZooKeeper StatefulSet of the official image's name, as the operator builds it
(zoo.cfg in a ConfigMap at /conf, myid written by ``sh -c`` before ``zkServer.sh
start-foreground``), run by the kubelet stand-in on Debian's ZooKeeper."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from support.k8s.kubelet import KubeletStandIn
from support.k8s.zkshim import effective_config
from support.waiting import wait_until

pytestmark = pytest.mark.k8s

TIMEOUT_S = 60


def pod_env():
    def field(path):
        return {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}

    return [
        {
            "name": "POD_INDEX",
            "valueFrom": field("metadata.labels['apps.kubernetes.io/pod-index']"),
        },
        {"name": "POD_IP", "valueFrom": field("status.podIP")},
        {"name": "POD_NAME", "valueFrom": field("metadata.name")},
        {"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")},
    ]


def zookeeper(namespace):
    labels = {
        "app.kubernetes.io/name": "odradek",
        "app.kubernetes.io/instance": "demo",
        "app.kubernetes.io/component": "zookeeper",
    }
    host = f"demo-zookeeper-0.demo-zookeeper-nodes.{namespace}.svc.cluster.local"
    zoo_cfg = "\n".join(
        [
            "dataDir=/data",
            "tickTime=2000",
            "initLimit=10",
            "syncLimit=5",
            "standaloneEnabled=false",
            "reconfigEnabled=false",
            "4lw.commands.whitelist=srvr,ruok,mntr",
            "admin.enableServer=false",
            f"server.1={host}:2888:3888;{host}:2181",
        ]
    )
    client_port_open = {"tcpSocket": {"port": "client"}, "periodSeconds": 5, "timeoutSeconds": 1}
    container = {
        "name": "zookeeper",
        "image": "zookeeper:3.8",
        "command": [
            "sh",
            "-c",
            'expr "$POD_INDEX" + 1 > /data/myid && exec zkServer.sh start-foreground',
        ],
        "env": [*pod_env(), {"name": "ZOOCFGDIR", "value": "/conf"}],
        "ports": [
            {"name": "client", "containerPort": 2181},
            {"name": "peer", "containerPort": 2888},
            {"name": "election", "containerPort": 3888},
        ],
        "startupProbe": {**client_port_open, "failureThreshold": 60},
        "readinessProbe": {**client_port_open, "failureThreshold": 3},
        "livenessProbe": {**client_port_open, "periodSeconds": 10, "failureThreshold": 6},
        "volumeMounts": [
            {"name": "config", "mountPath": "/conf", "readOnly": True},
            {"name": "data", "mountPath": "/data"},
        ],
    }
    configmap = {
        "metadata": {"name": "demo-zookeeper-config", "labels": labels},
        "data": {"zoo.cfg": zoo_cfg + "\n"},
    }
    nodes = {
        "metadata": {"name": "demo-zookeeper-nodes", "labels": labels},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": labels,
            "ports": [{"name": "client", "port": 2181}, {"name": "peer", "port": 2888}],
        },
    }
    client = {
        "metadata": {"name": "demo-zookeeper-client", "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": "client", "port": 2181}]},
    }
    sts = {
        "metadata": {"name": "demo-zookeeper", "labels": labels},
        "spec": {
            "serviceName": "demo-zookeeper-nodes",
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": "demo-zookeeper-config"}}],
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data", "labels": labels},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }
    return configmap, nodes, client, sts


def four_letter_word(host: str, word: bytes) -> bytes:
    with socket.create_connection((host, 2181), timeout=5) as sock:
        sock.sendall(word)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


def test_effective_config_binds_the_pod_address():
    text = "clientPort=2181\nserver.1=zk-0.nodes:2888:3888;2181\n"
    out = effective_config(text, "127.0.9.9")
    assert "server.1=zk-0.nodes:2888:3888;zk-0.nodes:2181" in out
    assert "clientPortAddress=127.0.9.9" in out
    assert "clientPortAddress" not in effective_config("server.1=a:1:2;a:2181\n", "127.0.9.9")
    tls = effective_config("secureClientPort=2181\nserver.1=a:1:2\n", "127.0.9.9")
    assert "secureClientPortAddress=127.0.9.9" in tls.splitlines()
    assert "clientPortAddress=127.0.9.9" not in tls.splitlines()


def test_one_server_ensemble_becomes_ready(kube_api, namespace, tmp_path: Path):
    if not Path("/usr/share/java/zookeeper.jar").exists():
        pytest.skip("Debian's zookeeper package is not installed")
    store = kube_api.store
    configmap, nodes, client, sts = zookeeper(namespace)
    store.create("configmaps", namespace, configmap)
    store.create("services", namespace, nodes)
    store.create("services", namespace, client)
    store.create("statefulsets", namespace, sts)
    with KubeletStandIn(kube_api, tmp_path / "kubelet", namespaces=[namespace]) as kubelet:

        def ready():
            pod = store.try_get("pods", namespace, "demo-zookeeper-0")
            conditions = ((pod or {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        try:
            wait_until(ready, "ZooKeeper ready", TIMEOUT_S)
        except AssertionError:
            raise AssertionError(kubelet.log(f"{namespace}/demo-zookeeper-0")[-3000:]) from None
        assert (kubelet.pvc_dir(namespace, "data-demo-zookeeper-0") / "myid").read_text() == "1\n"
        # tcpSocket readiness passes once the port is open, before the server serves
        host = f"demo-zookeeper-client.{namespace}.svc.cluster.local"
        with kubelet.resolver():

            def serving():
                try:
                    reply = four_letter_word(host, b"srvr")
                except OSError:
                    return None
                return reply if b"Mode: " in reply else None

            reply = wait_until(serving, "ZooKeeper serving", TIMEOUT_S)
        assert b"Zookeeper version" in reply
        assert not kubelet.errors, kubelet.errors[-1]
