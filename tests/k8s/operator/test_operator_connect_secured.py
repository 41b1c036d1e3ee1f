"""Connect on a secured cluster end to end: kopf in-process against the test API server, the
kubelet stand-in running a secured OdradekCluster (SCRAM-SHA-512 and mTLS listeners over TLS,
the ACL authorizer, ZooKeeper over TLS) and OdradekConnects whose ``spec.authentication`` names
an OdradekUser's Secret. A SCRAM worker (the password by env var, never in the ConfigMap, the
pod spec or its arguments) and a tls worker (the user's certificate) each run a FileStreamSource
whose records land, with no more than the ACLs docs/kubernetes.md lists for a worker; a
connector writing where the user's ACLs do not reach fails with the broker's refusal."""

from __future__ import annotations

import base64
import copy
import json
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from odradek_operator import names
from odradek_operator.model.connect_security import PASSWORD_ENV
from odradek_operator.reconcile.admin import AdminTls
from support.k8s.kubelet import KubeletStandIn
from support.k8s_operator import (
    MTLS_PORT,
    SCRAM_PORT,
    OperatorThread,
    condition,
    operator_session,
    ready,
    secured_one_broker_cluster,
    wait_for,
)

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

NAMESPACE = "connect-secured"
READY_TIMEOUT_S = 180.0
WAIT_S = 60.0
CLUSTER = secured_one_broker_cluster("sec", **{"offsets.topic.num.partitions": 3})
BROKER_HOST = names.pod_host("sec", names.Component.BROKER, 0, NAMESPACE)
WORKER_CONFIG = {
    "config.storage.replication.factor": 1,
    "offset.storage.replication.factor": 1,
    "status.storage.replication.factor": 1,
    "offset.storage.partitions": 2,
    "status.storage.partitions": 1,
    "offset.flush.interval.ms": 500,
    "scheduled.rebalance.max.delay.ms": 0,
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.storage.StringConverter",
}


def worker_acls(connect: str, topic: str) -> list[dict]:
    """What a worker's user needs (docs/kubernetes.md, section 8): its group, its internal
    topics (created by the worker at its start, their cleanup policy checked), the topic its
    source connector writes, and idempotent writes (the workers' producers are idempotent)."""
    group = f"{connect}-connect"
    return [
        {"resource": {"type": "group", "name": group}, "operations": ["Read"]},
        {
            "resource": {"type": "topic", "name": f"{group}-", "patternType": "prefix"},
            "operations": ["Create", "Describe", "DescribeConfigs", "Read", "Write"],
        },
        {"resource": {"type": "topic", "name": topic}, "operations": ["Describe", "Write"]},
        {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
    ]


def user(name: str, authentication: str, acls: list[dict]) -> dict:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekUser",
        "metadata": {"name": name, "labels": {"odradek.io/cluster": "sec"}},
        "spec": {
            "authentication": {"type": authentication},
            "authorization": {"type": "simple", "acls": acls},
        },
    }


def connect(name: str, authentication: dict, **spec) -> dict:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekConnect",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "clusterRef": "sec",
            "image": "odradek:test",
            "config": WORKER_CONFIG,
            "authentication": authentication,
            **spec,
        },
    }


def source(name: str, connect_name: str, file: Path, topic: str) -> dict:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekConnector",
        "metadata": {"name": name},
        "spec": {
            "connectRef": connect_name,
            "class": "FileStreamSource",
            "tasksMax": 1,
            "config": {"file": str(file), "topic": topic},
        },
    }


class World:
    def __init__(self, store, kubelet: KubeletStandIn, tmp: Path) -> None:
        self.store = store
        self.kubelet = kubelet
        self.tmp = tmp

    def get(self, plural: str, name: str) -> dict | None:
        return self.store.try_get(plural, NAMESPACE, name)

    def create(self, plural: str, obj: dict) -> None:
        self.store.create(plural, NAMESPACE, copy.deepcopy(obj))

    def secret(self, name: str) -> dict[str, str]:
        obj = self.get("secrets", name) or {}
        return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}

    def cluster_settled(self) -> str | None:
        cluster = self.get("odradekclusters", "sec")
        if condition(cluster, "Ready").get("status") == "True":
            return "Ready"
        error = condition(cluster, "Error")
        return error.get("message") if error.get("status") == "True" else None

    def super_user_tls(self):
        """The operator's certificate: the cluster's super user, on INTERNAL."""
        data = self.secret(names.operator_certs_secret("sec"))
        return AdminTls.of(data["operator.pem"], data["ca.crt"]).ssl_context()

    def workers(self, connect_name: str) -> list[dict]:
        selector = f"{names.NAME_LABEL}=odradek-connect,{names.INSTANCE_LABEL}={connect_name}"
        pods, _ = self.store.list("pods", NAMESPACE, selector)
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def connector_state(self, name: str, state: str) -> dict | None:
        obj = self.get("odradekconnectors", name)
        if ready(obj) and obj["status"]["connectorStatus"]["state"] == state:
            return obj
        return None

    def read_lines(self, topic: str, want: int, timeout_s: float = 30.0) -> list[str]:
        """The distinct values of ``topic``, read by the super user, once ``want`` are there."""
        consumer = KafkaConsumer(
            bootstrap_servers=f"{BROKER_HOST}:{names.INTERNAL_PORT}",
            security_protocol="SSL",
            ssl_context=self.super_user_tls(),
            enable_auto_commit=False,
            consumer_timeout_ms=1000,
        )
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        seen: dict[str, None] = {}
        deadline = time.monotonic() + timeout_s
        try:
            while len(seen) < want and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=500).values():
                    for record in batch:
                        seen.setdefault(record.value.decode(), None)
        finally:
            consumer.close()
        return list(seen)


@pytest.fixture(scope="module")
def world(kube_api, kubeconfig, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("connect-secured")
    with (
        operator_session(
            kube_api, kubeconfig, tmp / "kubelet", namespaces=[NAMESPACE], purge_namespace=NAMESPACE
        ) as session,
        session.kubelet.resolver(),  # the broker's name, for the operator and kafka-python here
        OperatorThread(session.ctx, NAMESPACE),
    ):
        state = World(kube_api.store, session.kubelet, tmp)
        state.create("odradekclusters", CLUSTER)
        settled = wait_for(state.cluster_settled, READY_TIMEOUT_S, "secured cluster", 0.5)
        assert settled == "Ready", settled
        admin = KafkaAdminClient(
            bootstrap_servers=f"{BROKER_HOST}:{names.INTERNAL_PORT}",
            security_protocol="SSL",
            ssl_context=state.super_user_tls(),
        )
        try:
            admin.create_topics([NewTopic(t, 1, 1) for t in ("lines", "certs", "forbidden")])
        finally:
            admin.close()
        yield state


def test_a_scram_worker_runs_a_source_with_its_users_acls(world: World) -> None:
    started = time.monotonic()
    world.create("odradekusers", user("connect", "scram-sha-512", worker_acls("sync", "lines")))
    wait_for(lambda: ready(world.get("odradekusers", "connect")), WAIT_S, "user connect", 0.3)
    password = world.secret("connect")["password"]
    world.create(
        "odradekconnects",
        connect(
            "sync",
            {
                "type": "scram-sha-512",
                "username": "connect",
                "passwordSecret": {"secretName": "connect", "password": "password"},
            },
        ),
    )
    sync = wait_for(lambda: ready(world.get("odradekconnects", "sync")), READY_TIMEOUT_S, "sync")
    sync = world.get("odradekconnects", "sync")
    assert sync["status"]["securityProtocol"] == "SASL_SSL"
    assert sync["status"]["bootstrapServers"] == f"sec-bootstrap.{NAMESPACE}.svc:{SCRAM_PORT}"
    print(f"SCRAM worker ready after {time.monotonic() - started:.1f}s")

    # The password is in the user's Secret only: not in the ConfigMap, the Deployment or the
    # worker's arguments; the pod takes it by env var from that Secret.
    config_map = world.get("configmaps", "sync-connect-config")
    assert password not in json.dumps(config_map)
    assert f"${{odradekenv:{PASSWORD_ENV}}}" in json.dumps(config_map)
    deployment = world.get("deployments", "sync-connect")
    assert password not in json.dumps(deployment)
    (pod,) = world.workers("sync")
    assert password not in json.dumps(pod)
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env[PASSWORD_ENV]["valueFrom"]["secretKeyRef"] == {"name": "connect", "key": "password"}
    pid = world.kubelet.pid(f"{NAMESPACE}/{pod['metadata']['name']}")
    assert pid is not None
    assert password.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()

    input_file = world.tmp / "lines.txt"
    input_file.write_text("".join(f"line {i}\n" for i in range(5)))
    world.create("odradekconnectors", source("lines-source", "sync", input_file, "lines"))
    wait_for(lambda: world.connector_state("lines-source", "RUNNING"), WAIT_S, "RUNNING", 0.3)
    assert world.read_lines("lines", 5) == [f"line {i}" for i in range(5)]
    print(f"records landed after {time.monotonic() - started:.1f}s")

    # The worker's principal is the user's: a topic its ACLs do not name is refused.
    denied = world.tmp / "denied.txt"
    denied.write_text("nope\n")
    world.create("odradekconnectors", source("denied-source", "sync", denied, "forbidden"))

    def failed():
        obj = world.get("odradekconnectors", "denied-source")
        return obj if condition(obj, "Ready").get("reason") == "TasksFailed" else None

    message = condition(wait_for(failed, WAIT_S, "TasksFailed", 0.3), "Ready")["message"]
    assert "authoriz" in message.lower(), message
    assert world.read_lines("forbidden", 1, timeout_s=2) == []


def test_a_tls_worker_runs_a_source_with_its_certificate(world: World) -> None:
    started = time.monotonic()
    world.create("odradekusers", user("connect-tls", "tls", worker_acls("mtls", "certs")))
    wait_for(lambda: ready(world.get("odradekusers", "connect-tls")), WAIT_S, "connect-tls", 0.3)
    trusted = [{"secretName": names.cluster_ca_cert_secret("sec"), "certificate": "ca.crt"}]
    world.create(
        "odradekconnects",
        connect(
            "mtls",
            {
                "type": "tls",
                "certificateAndKey": {
                    "secretName": "connect-tls",
                    "certificate": "user.crt",
                    "key": "user.key",
                },
            },
            tls={"trustedCertificates": trusted},
        ),
    )
    wait_for(lambda: ready(world.get("odradekconnects", "mtls")), READY_TIMEOUT_S, "mtls")
    mtls = world.get("odradekconnects", "mtls")
    assert mtls["status"]["securityProtocol"] == "SSL"
    assert mtls["status"]["bootstrapServers"] == f"sec-bootstrap.{NAMESPACE}.svc:{MTLS_PORT}"
    input_file = world.tmp / "certs.txt"
    input_file.write_text("".join(f"cert {i}\n" for i in range(3)))
    world.create("odradekconnectors", source("certs-source", "mtls", input_file, "certs"))
    wait_for(lambda: world.connector_state("certs-source", "RUNNING"), WAIT_S, "RUNNING", 0.3)
    assert world.read_lines("certs", 3) == [f"cert {i}" for i in range(3)]
    print(f"tls worker's records landed after {time.monotonic() - started:.1f}s")
