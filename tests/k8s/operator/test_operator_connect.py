"""Connect on Kubernetes end to end: kopf in-process against the test API server, the kubelet
stand-in running an OdradekCluster (one broker) and an OdradekConnect of two real
``odradek connect distributed`` workers; an OdradekConnector (FileStreamSource) reconciled to
RUNNING through the workers' REST API with its status reported, paused, resumed and stopped
through the resource, a bad config and a failed task reported in status, and deletion deleting
the connector; an OdradekConnect with clusterRef gets the cluster's bootstrap Service."""

from __future__ import annotations

import copy
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.config.properties import parse_properties
from odradek_operator import names
from support.k8s_operator import OperatorThread, condition, operator_session, ready, wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(300)]

NAMESPACE = "connect-e2e"
READY_TIMEOUT_S = 90.0
STATE_TIMEOUT_S = 30.0
SMALL = {
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
}
CLUSTER = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekCluster",
    "metadata": {"name": "demo"},
    "spec": {
        "image": "odradek:test",
        "zookeeper": {"replicas": 1, "storage": {"size": "1Gi"}},
        "controllers": {"replicas": 1},
        "brokers": {
            "replicas": 1,
            "storage": {"volumes": [{"id": 0, "size": "1Gi"}]},
            "config": SMALL,
        },
    },
}
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


class World:
    def __init__(self, store, tmp: Path) -> None:
        self.store = store
        self.tmp = tmp

    def get(self, plural: str, name: str) -> dict | None:
        return self.store.try_get(plural, NAMESPACE, name)

    def create(self, plural: str, obj: dict) -> None:
        self.store.create(plural, NAMESPACE, copy.deepcopy(obj))

    def patch_spec(self, plural: str, name: str, spec: dict) -> None:
        self.store.patch(plural, NAMESPACE, name, {"spec": spec})

    def pods(self, selector: str) -> list[dict]:
        pods, _ = self.store.list("pods", NAMESPACE, selector)
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def bootstrap(self) -> str:
        brokers = self.pods("app.kubernetes.io/instance=demo,app.kubernetes.io/component=broker")
        return ",".join(f"{p['status']['podIP']}:9092" for p in brokers if p["status"].get("podIP"))

    def worker_url(self) -> str:
        workers = self.pods(f"{names.NAME_LABEL}=odradek-connect,{names.INSTANCE_LABEL}=sync")
        return f"http://{workers[0]['status']['podIP']}:8083"

    def rest(self, method: str, path: str) -> tuple[int, object]:
        request = urllib.request.Request(self.worker_url() + path, method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                body = answer.read()
                return answer.status, json.loads(body) if body else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


@pytest.fixture(scope="module")
def world(kube_api, kubeconfig, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("connect")
    with (
        operator_session(
            kube_api, kubeconfig, tmp / "kubelet", namespaces=[NAMESPACE], purge_namespace=NAMESPACE
        ) as session,
        OperatorThread(session.ctx, NAMESPACE),
    ):
        world = World(kube_api.store, tmp)
        world.create("odradekclusters", CLUSTER)
        yield world


def read_lines(bootstrap: str, topic: str, want: int, timeout_s: float = 20.0) -> list[str]:
    """The distinct values of ``topic`` in the order they first appear, once ``want`` of them
    are there (a source is at least once: a task moved by a rebalance may send a line again)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen: dict[str, None] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(seen) < want and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.setdefault(message.value().decode(), None)
    finally:
        consumer.close()
    return list(seen)


def test_connector_runs_pauses_resumes_reports_and_goes(world: World) -> None:
    started = time.monotonic()
    # librdkafka resolves names itself, past the stand-in's DNS: the workers get the broker pod's
    # address, known (and the workers started) as soon as the pod exists; a worker that finds no
    # broker yet exits and is restarted.
    bootstrap = wait_for(world.bootstrap, READY_TIMEOUT_S, "the broker pod's address", 0.2)
    world.create(
        "odradekconnects",
        {
            "apiVersion": "odradek.io/v1alpha1",
            "kind": "OdradekConnect",
            "metadata": {"name": "sync"},
            "spec": {
                "replicas": 2,
                "bootstrapServers": bootstrap,
                "image": "odradek:test",
                "config": WORKER_CONFIG,
            },
        },
    )
    # clusterRef: the bootstrap is the cluster's Service (no workers: their librdkafka could not
    # resolve it here).
    world.create(
        "odradekconnects",
        {
            "apiVersion": "odradek.io/v1alpha1",
            "kind": "OdradekConnect",
            "metadata": {"name": "by-ref"},
            "spec": {"replicas": 0, "clusterRef": "demo", "config": WORKER_CONFIG},
        },
    )
    wait_for(lambda: ready(world.get("odradekclusters", "demo")), READY_TIMEOUT_S, "cluster", 0.5)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("lines", 1, 1)])["lines"].result(timeout=30)
    print(f"cluster Ready after {time.monotonic() - started:.1f}s")
    wait_for(lambda: ready(world.get("odradekconnects", "sync")), READY_TIMEOUT_S, "workers", 0.5)
    wait_for(lambda: ready(world.get("odradekconnects", "by-ref")), 10, "by-ref", 0.3)
    by_ref = world.get("odradekconnects", "by-ref")
    assert by_ref["status"]["bootstrapServers"] == f"demo-bootstrap.{NAMESPACE}.svc:9092"
    config_map = world.store.try_get("configmaps", NAMESPACE, "by-ref-connect-config")
    props = parse_properties(config_map["data"]["connect-distributed.properties"])
    assert {p.key: p.value for p in props}["bootstrap.servers"] == by_ref["status"][
        "bootstrapServers"
    ]
    connect = world.get("odradekconnects", "sync")
    assert connect["status"]["readyReplicas"] == 2
    assert connect["status"]["url"] == f"http://sync-connect-api.{NAMESPACE}.svc:8083"
    print(f"workers Ready after {time.monotonic() - started:.1f}s")

    source = world.tmp / "input.txt"
    source.write_text("".join(f"line {i}\n" for i in range(5)))
    world.create(
        "odradekconnectors",
        {
            "apiVersion": "odradek.io/v1alpha1",
            "kind": "OdradekConnector",
            "metadata": {"name": "lines-source"},
            "spec": {
                "connectRef": "sync",
                "class": "FileStreamSource",
                "tasksMax": 1,
                "config": {"file": str(source), "topic": "lines"},
            },
        },
    )

    def connector_in(state: str):
        obj = world.get("odradekconnectors", "lines-source")
        if ready(obj) and obj["status"]["connectorStatus"]["state"] == state:
            return obj
        return None

    running = wait_for(lambda: connector_in("RUNNING"), STATE_TIMEOUT_S, "RUNNING", 0.3)
    (task,) = running["status"]["tasks"]
    assert task["id"] == 0 and task["state"] == "RUNNING" and task["worker"].endswith(":8083")
    assert running["status"]["type"] == "source"
    assert read_lines(bootstrap, "lines", 5) == [f"line {i}" for i in range(5)]

    world.patch_spec("odradekconnectors", "lines-source", {"state": "paused"})
    paused = wait_for(lambda: connector_in("PAUSED"), STATE_TIMEOUT_S, "PAUSED", 0.3)
    assert [t["state"] for t in paused["status"]["tasks"]] == ["PAUSED"]
    assert world.rest("GET", "/connectors/lines-source/status")[1]["connector"]["state"] == (
        "PAUSED"
    )
    world.patch_spec("odradekconnectors", "lines-source", {"state": "running"})
    wait_for(lambda: connector_in("RUNNING"), STATE_TIMEOUT_S, "RUNNING again", 0.3)
    with source.open("a") as f:
        f.write("line 5\n")
    assert read_lines(bootstrap, "lines", 6) == [f"line {i}" for i in range(6)]

    # A config the connector refuses: the status says why, in Kafka Connect's words. A task that
    # fails (its file is a directory): Ready false, with the exception's line.
    world.create(
        "odradekconnectors",
        {
            "apiVersion": "odradek.io/v1alpha1",
            "kind": "OdradekConnector",
            "metadata": {"name": "no-topic"},
            "spec": {"connectRef": "sync", "class": "FileStreamSource", "config": {}},
        },
    )
    world.create(
        "odradekconnectors",
        {
            "apiVersion": "odradek.io/v1alpha1",
            "kind": "OdradekConnector",
            "metadata": {"name": "broken"},
            "spec": {
                "connectRef": "sync",
                "class": "FileStreamSource",
                "config": {"file": str(world.tmp), "topic": "lines"},
            },
        },
    )

    def refused():
        error = condition(world.get("odradekconnectors", "no-topic"), "Error")
        return error if error.get("reason") == "InvalidConfig" else None

    error = wait_for(refused, STATE_TIMEOUT_S, "InvalidConfig", 0.3)
    assert error["status"] == "True" and "topic" in error["message"], error

    def failed():
        obj = world.get("odradekconnectors", "broken")
        return obj if condition(obj, "Ready").get("reason") == "TasksFailed" else None

    broken = wait_for(failed, STATE_TIMEOUT_S, "TasksFailed", 0.3)
    message = condition(broken, "Ready")["message"]
    assert "task 0 failed on" in message and "Is a directory" in message, message
    assert broken["status"]["tasks"][0]["state"] == "FAILED"
    assert condition(broken, "Error")["status"] == "True"

    world.patch_spec("odradekconnectors", "lines-source", {"state": "stopped"})
    stopped = wait_for(lambda: connector_in("STOPPED"), STATE_TIMEOUT_S, "STOPPED", 0.3)
    assert stopped["status"]["tasks"] == []

    # Deleting the resource deletes the connector (kopf's finalizer).
    world.store.delete("odradekconnectors", NAMESPACE, "lines-source")
    wait_for(
        lambda: world.get("odradekconnectors", "lines-source") is None,
        STATE_TIMEOUT_S,
        "resource gone",
        0.3,
    )
    status, connectors = world.rest("GET", "/connectors")
    assert status == 200 and "lines-source" not in connectors
    print(f"done after {time.monotonic() - started:.1f}s")
