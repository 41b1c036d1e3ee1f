"""docs/kubernetes.md runs as written: the chart installed (helm template, every object applied,
the operator's Deployment run by the kubelet stand-in), manifests/cluster-minimal.yaml and
manifests/topics.yaml applied with kubectl, records produced and consumed, the cluster scaled
with `kubectl scale`, two operator replicas electing one active through kopf peering and failing
over, `kubectl delete` keeping the claims, and manifests/cluster-jbod.yaml running as written.

One API server and one stand-in for the module; the tests run in order and share the cluster."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from support.chart import CHART, MANIFESTS, helm
from support.k8s.apiserver import ApiServerThread
from support.k8s.kubelet import VENV_BIN, KubeletStandIn
from support.k8s_operator import condition, wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(300)]

NAMESPACE = "odradek"  # the docs' namespace: `--namespace odradek --create-namespace`
RELEASE = "odradek"
READY_TIMEOUT_S = 90.0
# Each step of the walkthrough: seconds when the machine is quiet, more when two test files run
# side by side (make test).
WAIT_S = 60


class Walkthrough:
    def __init__(self, server: ApiServerThread, kubelet: KubeletStandIn, workdir: Path) -> None:
        self.server = server
        self.store = server.store
        self.kubelet = kubelet
        self.workdir = workdir

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        """The real kubectl on the test API server (no protobuf there: --validate=false)."""
        env = {
            **os.environ,
            "KUBECONFIG": str(self.server.kubeconfig),
            "KUBECACHEDIR": str(self.workdir / "kubectl-cache"),
        }
        done = subprocess.run(
            [str(VENV_BIN / "kubectl"), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def helm_install(self, *values: str) -> list[dict]:
        """`helm upgrade --install odradek charts/odradek --namespace odradek --create-namespace`
        as `helm template` (CRDs included, as install does) + `kubectl apply`."""
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--include-crds"]
        for value in values:
            args += ["--set", value]
        done = helm(*args)
        assert done.returncode == 0, done.stderr
        # --create-namespace (kubectl's typed `create namespace` sends protobuf: apply instead)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        self.kubectl("apply", "--validate=false", "-f", "-", stdin=json.dumps(namespace))
        self.kubectl("apply", "--validate=false", "-f", "-", stdin=done.stdout)
        return [d for d in yaml.safe_load_all(done.stdout) if d]

    def get(self, plural: str, name: str) -> dict | None:
        return self.store.try_get(plural, NAMESPACE, name)

    def operator_pods(self) -> list[str]:
        pods, _ = self.store.list("pods", NAMESPACE, "app.kubernetes.io/name=odradek-operator")
        return sorted(
            p["metadata"]["name"]
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and p.get("status", {}).get("phase") == "Running"
        )

    def cluster_ready(self, name: str = "demo") -> bool:
        cluster = self.get("odradekclusters", name)
        return (
            condition(cluster, "Ready").get("status") == "True"
            and cluster["status"].get("observedGeneration") == cluster["metadata"]["generation"]
            and cluster["status"]["operation"]["type"] == "Idle"
        )

    def broker_ip(self, ordinal: int = 0) -> str:
        return self.kubelet.pod_ip(f"{NAMESPACE}/demo-broker-{ordinal}")


def _operator_image_installed() -> bool:
    return (VENV_BIN / "odradek-operator").exists() and (VENV_BIN / "kubectl").exists()


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    if not _operator_image_installed():
        pytest.skip("odradek-operator or kubectl missing from the venv")
    workdir = tmp_path_factory.mktemp("walkthrough")
    server = ApiServerThread(workdir / "kubeconfig")  # no CRDs: the chart registers them
    with server:
        kubelet = KubeletStandIn(server, workdir / "kubelet").start()
        try:
            yield Walkthrough(server, kubelet, workdir)
        finally:
            kubelet.stop()


def test_1_helm_install_runs_the_operator_deployment(walk):
    started = time.monotonic()
    objs = walk.helm_install()
    kinds = {o["kind"] for o in objs}
    assert {"CustomResourceDefinition", "Deployment", "ServiceAccount", "Role"} <= kinds
    assert walk.store.kind_of("odradek.io/v1alpha1", "OdradekCluster").scale is not None
    (pod,) = wait_for(walk.operator_pods, WAIT_S, "the operator's pod running")
    assert re.fullmatch(r"odradek-[0-9a-f]{10}-[a-z0-9]{5}", pod), pod
    argv = walk.kubelet.log(f"{NAMESPACE}/{pod}").splitlines()[0]
    assert "odradek-operator" in argv and "'--namespace', 'odradek'" in argv
    # the stand-in's substitute for the service account's credentials
    pid = walk.kubelet.pid(f"{NAMESPACE}/{pod}")
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert (
        f"KUBECONFIG={walk.workdir}/kubelet/pods/{NAMESPACE}/{pod}/kubeconfig".encode() in environ
    )
    deployment = wait_for(
        lambda: (
            (d := walk.get("deployments", RELEASE))
            and d.get("status", {}).get("readyReplicas") == 1
            and d
        ),
        WAIT_S,
        "the Deployment ready",
    )
    assert deployment["status"]["updatedReplicas"] == 1
    print(f"operator running after {time.monotonic() - started:.1f}s")


def test_2_cluster_and_topics_as_in_the_docs(walk):
    started = time.monotonic()
    walk.kubectl(
        "-n", NAMESPACE, "apply", "--validate=false", "-f", str(MANIFESTS / "cluster-minimal.yaml")
    )
    walk.kubectl("-n", NAMESPACE, "apply", "--validate=false", "-f", str(MANIFESTS / "topics.yaml"))
    wait_for(
        walk.cluster_ready,
        READY_TIMEOUT_S,
        "cluster Ready",
        0.5,
    )
    print(f"cluster Ready after {time.monotonic() - started:.1f}s")
    cluster = walk.get("odradekclusters", "demo")
    assert cluster["status"]["brokerIds"] == [0, 1, 2]
    assert cluster["status"]["bootstrap"] == "demo-bootstrap.odradek.svc:9092"
    for name in ("orders", "customers", "payments-events"):
        wait_for(
            lambda name=name: (
                condition(walk.get("odradektopics", name), "Ready").get("status") == "True"
            ),
            WAIT_S,
            f"topic {name} Ready",
        )
    topics = walk.kubectl("-n", NAMESPACE, "get", "odt", "-o", "json")
    assert {t["metadata"]["name"] for t in json.loads(topics)["items"]} == {
        "orders",
        "customers",
        "payments-events",
    }
    print(f"topics Ready after {time.monotonic() - started:.1f}s")

    bootstrap = f"{walk.broker_ip(0)}:9092"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("orders", key=str(i).encode(), value=f"order-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "walkthrough",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["orders"])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 30
        while len(seen) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
    finally:
        consumer.close()
    assert seen == {f"order-{i}".encode() for i in range(10)}
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert "Payments_Events" in metadata.topics


def test_3_kubectl_scale_adds_a_broker_that_takes_partitions(walk):
    started = time.monotonic()
    walk.kubectl("-n", NAMESPACE, "scale", "odc/demo", "--replicas=4")
    wait_for(
        lambda: (
            walk.get("odradekclusters", "demo")["status"].get("brokerIds") == [0, 1, 2, 3]
            and walk.cluster_ready()
        ),
        READY_TIMEOUT_S,
        "the cluster Ready with 4 brokers",
        0.5,
    )
    admin = AdminClient({"bootstrap.servers": f"{walk.broker_ip(0)}:9092"})
    metadata = admin.list_topics(timeout=10)
    on_new = [
        (t, p)
        for t, topic in metadata.topics.items()
        for p, partition in topic.partitions.items()
        if 3 in partition.replicas
    ]
    assert on_new, "broker 3 holds no replica"
    print(f"scaled to 4 after {time.monotonic() - started:.1f}s, broker 3 has {len(on_new)}")


def test_4_two_operator_replicas_elect_one_and_fail_over(walk):
    started = time.monotonic()
    walk.helm_install("operator.replicas=2")
    pods = wait_for(lambda: len(p := walk.operator_pods()) == 2 and p, WAIT_S, "two operator pods")
    # kopf's identity is the pod's name (POD_ID); the highest priority is the active replica
    peers = wait_for(
        lambda: (
            set(status := (walk.get("kopfpeerings", "odradek") or {}).get("status") or {})
            == set(pods)
            and status
        ),
        WAIT_S,
        "both replicas in the KopfPeering",
    )
    assert len({peer["priority"] for peer in peers.values()}) == 2, peers
    active = max(pods, key=lambda pod: peers[pod]["priority"])
    (standby,) = set(pods) - {active}

    def since_start(pod: str) -> str:
        """The log of the pod's current container (the file keeps earlier runs)."""
        return walk.kubelet.log(f"{NAMESPACE}/{pod}").rsplit("--- ", 1)[-1]

    def active_now(pod: str) -> bool:
        """kopf starts paused, resumes when no live peer outranks it, pauses when one appears
        (a replica that joins first works alone until an older one joins)."""
        log = since_start(pod)
        return log.rfind("Resuming operations") > log.rfind("Pausing operations")

    wait_for(
        lambda: active_now(active) and not active_now(standby),
        WAIT_S,
        "one active replica, the other paused",
    )
    print(f"one active replica after {time.monotonic() - started:.1f}s")

    # pausing stops new work, not handlers already running: a standby that worked alone first may
    # finish a few after its pause (seen in CI), so wait until its log stops growing (but for the
    # access log of its liveness probe, a line a second)
    def work_logged(pod: str) -> str:
        return "\n".join(
            line for line in since_start(pod).splitlines() if "aiohttp.access" not in line
        )

    last = {"log": work_logged(standby), "at": time.monotonic()}

    def standby_quiet() -> bool:
        log = work_logged(standby)
        if log != last["log"]:
            last.update(log=log, at=time.monotonic())
        return time.monotonic() - last["at"] >= 2.0

    wait_for(standby_quiet, WAIT_S, "the paused replica's running handlers finished")
    mark = {pod: since_start(pod).count("Handler 'topic_changed' succeeded") for pod in pods}
    set_config(walk, "customers", {"retention.ms": "3600000"})
    wait_for(
        lambda: since_start(active).count("Handler 'topic_changed' succeeded") > mark[active],
        10,
        "the active replica's handler",
    )
    assert since_start(standby).count("Handler 'topic_changed' succeeded") == mark[standby]

    # a clean exit (SIGTERM) removes the active one from the KopfPeering: the standby resumes
    walk.kubelet.kill(f"{NAMESPACE}/{active}", signal.SIGTERM)
    wait_for(lambda: active_now(standby), WAIT_S, "the standby takes over")
    set_config(walk, "orders", {"retention.ms": "86400000"})
    # the first replica comes back (restartPolicy Always) younger, so it stays paused
    again = wait_for(
        lambda: (
            (status := walk.get("kopfpeerings", "odradek")["status"]).get(active)
            and status[active]["priority"] != peers[active]["priority"]
            and status
        ),
        WAIT_S,
        "the restarted replica back in the KopfPeering",
    )
    assert again[active]["priority"] < again[standby]["priority"]
    assert "Handler '" not in since_start(active)
    print(f"peering failover after {time.monotonic() - started:.1f}s")


def set_config(walk: Walkthrough, topic: str, config: dict[str, str]) -> None:
    """`kubectl patch odt <topic>` and wait until the topic's status reports the config."""
    patch = json.dumps({"spec": {"config": config}})
    walk.kubectl("-n", NAMESPACE, "patch", "odt", topic, "--type=merge", "-p", patch)
    wait_for(
        lambda: (
            (walk.get("odradektopics", topic)["status"].get("config") or {}).items()
            >= config.items()
        ),
        WAIT_S,
        f"topic {topic}'s config {config} reconciled",
    )


def test_5_delete_keeps_the_claims_and_the_jbod_cluster_runs(walk):
    started = time.monotonic()
    walk.kubectl("-n", NAMESPACE, "delete", "odc", "demo", f"--timeout={WAIT_S}s")

    # everything it owns is deleted; brokers stopping all at once find no broker to hand their
    # leaderships to, so they use up their grace period: the test does not wait for that
    def demo_objects() -> list[str]:
        return [
            f"{plural}/{o['metadata']['name']}"
            for plural in ("statefulsets", "services", "configmaps", "poddisruptionbudgets", "pods")
            for o in walk.store.list(plural, NAMESPACE)[0]
            if o["metadata"]["name"].startswith("demo-")
            and not (plural == "pods" and o["metadata"].get("deletionTimestamp"))
        ]

    wait_for(lambda: not demo_objects(), WAIT_S, "the demo cluster's objects deleted")
    claims, _ = walk.store.list("persistentvolumeclaims", NAMESPACE)
    kept = {c["metadata"]["name"] for c in claims}
    assert {f"data-0-demo-broker-{i}" for i in range(4)} <= kept
    print(f"demo deleted after {time.monotonic() - started:.1f}s")

    # its brokers' rack needs the operator to read nodes, as its comment says
    walk.helm_install("operator.replicas=2", "rbac.readNodes=true")
    walk.kubectl(
        "-n", NAMESPACE, "apply", "--validate=false", "-f", str(MANIFESTS / "cluster-jbod.yaml")
    )
    wait_for(lambda: walk.cluster_ready("jbod"), READY_TIMEOUT_S, "the jbod cluster Ready", 0.5)
    cluster = walk.get("odradekclusters", "jbod")
    assert cluster["status"]["brokerIds"] == [0, 1, 2]
    claims, _ = walk.store.list("persistentvolumeclaims", NAMESPACE)
    names = {c["metadata"]["name"] for c in claims}
    assert {f"data-{v}-jbod-broker-{i}" for v in (0, 1) for i in range(3)} <= names
    ip = walk.kubelet.pod_ip(f"{NAMESPACE}/jbod-broker-0")
    admin = AdminClient({"bootstrap.servers": f"{ip}:9092"})  # kept: the future needs it
    nodes = admin.describe_cluster(request_timeout=10).result(15).nodes
    assert {node.rack for node in nodes} == {"standin-zone"}  # the stand-in node's zone label
    print(f"jbod Ready after {time.monotonic() - started:.1f}s")
