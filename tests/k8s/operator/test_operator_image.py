"""The operator's pods run from the built image: the kubelet stand-in in image mode runs the
controller and brokers the operator asks for with ``buildah run`` (the image's files, its user,
volumes mounted at their real paths, cluster DNS inside), the cluster becomes Ready and a real
client produces and consumes through it; a deleted broker pod shuts down on SIGTERM and its
container is removed, and nothing of the image is left running or stored at the end."""

from __future__ import annotations

import copy
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.cluster import replication_defaults
from odradek_operator.kube import ApiKube
from odradek_operator.reconcile.admin import OpsAdmin
from odradek_operator.reconcile.cluster import ClusterContext
from support.buildah import BUILD_TIMEOUT_S, image_or_skip
from support.k8s.kubelet import KubeletStandIn
from support.k8s_operator import OperatorThread, condition, wait_for

# The build (about 3 minutes cold, seconds warm) is shared with tests/image in one session.
pytestmark = [pytest.mark.k8s, pytest.mark.image, pytest.mark.timeout(BUILD_TIMEOUT_S + 180)]

BROKERS = 2  # replication factor 2, min.insync.replicas 1 (replication_defaults)
IMAGE_UID = 10001
READY_TIMEOUT_S = 120.0
CLIENT_TIMEOUT_S = 30.0
RECORDS = [(f"key-{i}".encode(), f"value-{i}".encode()) for i in range(10)]
SELECTOR = "app.kubernetes.io/instance=demo,app.kubernetes.io/component={}"


@pytest.fixture(scope="module")
def odradek_image() -> str:
    return image_or_skip()


@pytest.fixture
def operator_env(kubeconfig: Path) -> Iterator[None]:
    saved = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(kubeconfig)  # kopf's login
    yield
    if saved is None:
        os.environ.pop("KUBECONFIG", None)
    else:
        os.environ["KUBECONFIG"] = saved


def _cluster(image: str) -> dict:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekCluster",
        "metadata": {"name": "demo"},
        "spec": {
            "image": image,
            "zookeeper": {"replicas": 1, "storage": {"size": "1Gi"}},
            "controllers": {"replicas": 1},
            "brokers": {"replicas": BROKERS, "config": replication_defaults(BROKERS)},
        },
    }


def _pods(store, namespace: str, component: str) -> list[dict]:
    pods, _ = store.list("pods", namespace, SELECTOR.format(component))
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _from_the_image(pid: int) -> None:
    """``pid`` runs the image's files (its root is the container's, not the host's) as the
    image's user."""
    root = os.readlink(f"/proc/{pid}/root")
    assert root != "/", f"{pid} runs in the host's root"
    assert Path(f"/proc/{pid}/root/opt/odradek/bin/odradek").exists()
    uids = next(
        line.split()[1:]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("Uid:")
    )
    assert {int(u) for u in uids} == {IMAGE_UID}


def _uid(store, namespace: str, name: str) -> str | None:
    pod = store.try_get("pods", namespace, name)
    return None if pod is None else pod["metadata"]["uid"]


def _ready_pod(store, namespace: str, name: str) -> dict | None:
    pod = store.try_get("pods", namespace, name)
    return pod if condition(pod, "Ready").get("status") == "True" else None


def _alive(pid: int) -> bool:
    """Running, stopped or sleeping: not gone, nor a zombie its parent has yet to reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def _produce_and_consume(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, BROKERS)])[topic].result(timeout=CLIENT_TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for key, value in RECORDS:
        producer.produce(topic, value=value, key=key)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "image-pods"})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        consumed: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(consumed) < len(RECORDS) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumed.append((message.key(), message.value()))
    finally:
        consumer.close()
    return consumed


def test_the_operators_cluster_runs_from_the_image(
    odradek_image: str, kube_api, kubeconfig: Path, namespace: str, tmp_path: Path, operator_env
) -> None:
    import kubernetes

    started = time.monotonic()
    store = kube_api.store
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    kubelet = KubeletStandIn(
        store, tmp_path / "kubelet", namespaces=[namespace], odradek_image=odradek_image
    )
    assert kubelet.image_mode is not None
    ctx = ClusterContext(ApiKube(client), OpsAdmin, odradek_image)
    pids: list[int] = []
    try:
        kubelet.start()
        with OperatorThread(ctx, namespace):
            store.create("odradekclusters", namespace, copy.deepcopy(_cluster(odradek_image)))

            def ready() -> bool:
                obj = store.try_get("odradekclusters", namespace, "demo")
                return condition(obj, "Ready").get("status") == "True"

            wait_for(ready, READY_TIMEOUT_S, f"Ready; kubelet errors: {kubelet.errors[-1:]}", 0.5)
            print(f"\ncluster Ready after {time.monotonic() - started:.1f} s")

            # The Odradek pods run from the image, one buildah container each; ZooKeeper does not.
            odradek_pods = _pods(store, namespace, "controller") + _pods(store, namespace, "broker")
            assert len(odradek_pods) == 1 + BROKERS
            for pod in odradek_pods:
                name = f"{namespace}/{pod['metadata']['name']}"
                pid = kubelet.pid(name)
                assert pid is not None, name
                _from_the_image(pid)
                pids.append(pid)
                (status,) = pod["status"]["containerStatuses"]
                assert status["containerID"].startswith(f"buildah://{kubelet.image_mode.prefix}")
            assert len(kubelet.image_mode.containers()) == 1 + BROKERS

            brokers = _pods(store, namespace, "broker")
            bootstrap = ",".join(f"{p['status']['podIP']}:9092" for p in brokers)
            assert _produce_and_consume(bootstrap, "from-the-image") == RECORDS
            # The records are on broker 0's PVC directory, written by the image's user.
            data = kubelet.pvc_dir(namespace, "data-0-demo-broker-0")
            segments = list((data / "log").glob("from-the-image-0/*.log"))
            assert segments and all(s.stat().st_uid == IMAGE_UID for s in segments)

            # A fault: SIGKILL to broker 0's command, restarted in the same container. A deleted
            # pod: SIGTERM to broker 1's command (a controlled shutdown, exit 0), its container
            # removed, the StatefulSet's new pod in a container of its own.
            old = {p["metadata"]["name"]: p for p in brokers}
            killed_pid = kubelet.pid(f"{namespace}/demo-broker-0")
            kubelet.kill(f"{namespace}/demo-broker-0", signal.SIGKILL)
            store.delete("pods", namespace, "demo-broker-1")
            log = kubelet.workdir / "pods" / namespace / "demo-broker-1" / "broker.log"
            old_uid = old["demo-broker-1"]["metadata"]["uid"]
            wait_for(
                lambda: _uid(store, namespace, "demo-broker-1") not in (None, old_uid),
                60,
                "demo-broker-1 deleted and made again",
            )
            first_run = log.read_text().split("\n--- ")[0]
            assert "shutting down (controlled)" in first_run, first_run[-2000:]
            assert "subprocess exited" not in first_run, first_run[-2000:]  # buildah: non-zero
            container_of = {
                name: pod["status"]["containerStatuses"][0]["containerID"]
                for name, pod in old.items()
            }
            assert container_of["demo-broker-1"].removeprefix("buildah://") not in (
                kubelet.image_mode.containers()
            )
            restarted = wait_for(
                lambda: (
                    (pod := _ready_pod(store, namespace, "demo-broker-0"))
                    and pod["status"]["containerStatuses"][0]["restartCount"] == 1
                    and pod
                ),
                READY_TIMEOUT_S,
                "demo-broker-0 restarted and Ready",
            )
            (status,) = restarted["status"]["containerStatuses"]
            assert status["containerID"] == container_of["demo-broker-0"]
            wait_for(
                lambda: _ready_pod(store, namespace, "demo-broker-1"),
                READY_TIMEOUT_S,
                "the new demo-broker-1 Ready",
            )
            for name in old:
                pid = kubelet.pid(f"{namespace}/{name}")
                assert pid is not None and pid not in pids and pid != killed_pid
                _from_the_image(pid)
                pids.append(pid)
            assert len(kubelet.image_mode.containers()) == 1 + BROKERS
    finally:
        kubelet.stop()
        client.close()
    assert kubelet.image_mode.containers() == []
    assert not [pid for pid in pids if _alive(pid)]
    assert not kubelet.errors, kubelet.errors[-1]
    print(f"test took {time.monotonic() - started:.1f} s")
