"""docs/kubernetes.md runs as written on a secured cluster: the chart installed (helm template,
every object applied, the operator's Deployment run by the kubelet stand-in); the commands of
sections 2, 3, 3a, 3b and 5, read from the page and run with the real kubectl: the secured
manifests/cluster-minimal.yaml (SCRAM and mTLS listeners, the ACL authorizer), its topics, its
users, the client pods of manifests/client.yaml producing and consuming with orders-app's
Secret (`odradek --command-config`), `kubectl scale`; then two operator replicas electing one
active through kopf peering and failing over, `kubectl delete` keeping the claims, and
manifests/cluster-jbod.yaml running as written.

One API server and one stand-in for the module; the tests run in order and share the cluster."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaError, TopicAuthorizationFailedError

from odradek.client.admin import ClusterClient, build
from odradek.client.security import SaslAuthenticationError, client_security
from odradek.commands.client_properties import translate
from odradek.ops.errors import OpsError
from odradek_operator import names
from odradek_operator.reconcile.admin import AdminTls
from support.chart import CHART, MANIFESTS, ROOT, helm
from support.k8s.apiserver import ApiServerThread
from support.k8s.kubelet import VENV_BIN, KubeletStandIn
from support.k8s_operator import condition, wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

NAMESPACE = "odradek"  # the docs' namespace: `--namespace odradek --create-namespace`
RELEASE = "odradek"
READY_TIMEOUT_S = 180.0  # a secured cluster: CAs, certificates, TLS everywhere
# Each step of the walkthrough: seconds when the machine is quiet, more when two test files run
# side by side (make test).
WAIT_S = 60
DOCS = ROOT / "docs" / "kubernetes.md"
DOCS_COMMAND_TIMEOUT_S = 330  # above the docs' longest `kubectl wait --timeout=300s`
# The test API server serves no OpenAPI document, which `kubectl apply` fetches to validate
# client-side: the docs' kubectl is this wrapper, adding --validate=false to apply and nothing
# else (the test server validates no schema either: tests/chart checks every manifest offline).
KUBECTL_WRAPPER = """#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = apply ]; then exec {kubectl} "$@" --validate=false; fi
done
exec {kubectl} "$@"
"""


def docs_commands(heading: str) -> list[str]:
    """The commands of the ```sh blocks (at the left margin) of docs/kubernetes.md's section
    whose heading starts with ``heading``, up to the next heading; a line ending in a backslash
    continues on the next. Blocks inside list items (indented) are examples, not steps."""
    commands: list[str] = []
    fence: str | None = None
    inside = False
    pending = ""
    for line in DOCS.read_text().splitlines():
        if fence is None and line.startswith("```"):
            fence = line[3:].strip()
            continue
        if fence is not None:
            if line.startswith("```"):
                fence = None
            elif inside and fence == "sh" and line.strip() and not line.startswith("#"):
                if line.endswith("\\"):
                    pending += line[:-1].rstrip() + " "
                else:
                    commands.append(pending + line)
                    pending = ""
            continue
        if re.match(r"#{1,4} ", line):
            if inside:
                break
            inside = line.lstrip("#").strip().startswith(heading)
    assert commands, f"no sh commands in the section {heading!r} of {DOCS}"
    return commands


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

    def run_docs(self, heading: str) -> list[str]:
        """Run the commands of a section of docs/kubernetes.md as written, from the checkout's
        root (where `manifests/` is), with sh; each must succeed. Their outputs, in order."""
        wrapper = self.workdir / "bin" / "kubectl"
        if not wrapper.exists():
            wrapper.parent.mkdir(exist_ok=True)
            wrapper.write_text(KUBECTL_WRAPPER.format(kubectl=VENV_BIN / "kubectl"))
            wrapper.chmod(0o755)
        env = {
            **os.environ,
            "PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}",
            "KUBECONFIG": str(self.server.kubeconfig),
            "KUBECACHEDIR": str(self.workdir / "kubectl-cache"),
        }
        outputs = []
        for command in docs_commands(heading):
            assert command.startswith("kubectl "), f"not a step this test can run: {command}"
            started = time.monotonic()
            done = subprocess.run(
                ["sh", "-c", command],
                cwd=ROOT,
                capture_output=True,
                text=True,
                env=env,
                timeout=DOCS_COMMAND_TIMEOUT_S,
            )
            assert done.returncode == 0, f"{command}: {done.stderr}"
            print(f"$ {command}  ({time.monotonic() - started:.1f}s)\n{done.stdout}")
            outputs.append(done.stdout)
        return outputs

    def secret(self, name: str) -> dict[str, str]:
        obj = self.get("secrets", name) or {}
        return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}

    def super_admin(self) -> KafkaAdminClient:
        """The cluster as its super user sees it: the operator's certificate on broker 0's
        INTERNAL listener (use inside ``kubelet.resolver()``: brokers advertise DNS names)."""
        certs = self.secret(names.operator_certs_secret("demo"))
        tls = AdminTls.of(certs["operator.pem"], certs["ca.crt"])
        return KafkaAdminClient(
            bootstrap_servers=f"{broker_host(0)}:{names.INTERNAL_PORT}",
            security_protocol="SSL",
            ssl_context=tls.ssl_context(),
            request_timeout_ms=15000,
        )

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


def broker_host(ordinal: int) -> str:
    return names.pod_host("demo", names.Component.BROKER, ordinal, NAMESPACE)


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


def test_2_secured_cluster_and_topics_as_in_the_docs(walk):
    started = time.monotonic()
    # the page shows the manifest it applies
    shown = DOCS.read_text().split("```yaml\n# manifests/cluster-minimal.yaml\n", 1)[1]
    manifest = yaml.safe_load((MANIFESTS / "cluster-minimal.yaml").read_text())
    assert yaml.safe_load(shown.split("```", 1)[0]) == manifest
    assert {listener["name"] for listener in manifest["spec"]["listeners"]} == {"scram", "tls"}
    walk.run_docs("2. Declare a cluster")
    wait_for(walk.cluster_ready, READY_TIMEOUT_S, "cluster Ready", 0.5)
    print(f"cluster Ready after {time.monotonic() - started:.1f}s")
    cluster = walk.get("odradekclusters", "demo")
    assert cluster["status"]["brokerIds"] == [0, 1, 2]
    assert cluster["status"]["bootstrap"] == "demo-bootstrap.odradek.svc:9092"
    assert walk.secret("demo-cluster-ca-cert")["ca.crt"].startswith("-----BEGIN CERTIFICATE")

    walk.run_docs("3. Declare topics")
    for name in ("orders", "customers", "payments-events"):
        assert condition(walk.get("odradektopics", name), "Ready").get("status") == "True"
    topics = walk.kubectl("-n", NAMESPACE, "get", "odt", "-o", "json")
    assert {t["metadata"]["name"] for t in json.loads(topics)["items"]} == {
        "orders",
        "customers",
        "payments-events",
    }
    print(f"topics Ready after {time.monotonic() - started:.1f}s")
    with walk.kubelet.resolver():
        admin = walk.super_admin()
        try:
            assert {"orders", "customers", "Payments_Events"} <= set(admin.list_topics())
        finally:
            admin.close()
        # no way in without TLS: the client port speaks nothing else
        with pytest.raises(KafkaError):  # the bootstrap times out or the connection drops
            KafkaAdminClient(
                bootstrap_servers=f"{broker_host(0)}:9092",
                request_timeout_ms=3000,
                bootstrap_timeout_ms=5000,
            ).close()


def test_3_users_and_a_client_pod_with_a_users_secret(walk):
    started = time.monotonic()
    outputs = walk.run_docs("3a. Users")
    password = outputs[-1]  # `get secret orders-app ... | base64 -d`
    assert re.fullmatch(r"[A-Za-z0-9]{32}", password), password
    for user in ("orders-app", "reporting", "billing"):
        assert condition(walk.get("odradekusers", user), "Ready").get("status") == "True"
    secret = walk.secret("orders-app")
    assert secret["password"] == password
    assert secret["ca.crt"] == walk.secret("demo-cluster-ca-cert")["ca.crt"]
    print(f"users Ready after {time.monotonic() - started:.1f}s")

    *_, logs = walk.run_docs("3b. A client")
    records = [line.split("\t") for line in logs.splitlines() if line.startswith("Partition:")]
    assert sorted(key for _, _, key, _ in records) == sorted(f"order-{n}" for n in range(100))
    for pod in ("orders-producer", "orders-consumer"):
        argv = walk.kubelet.log(f"{NAMESPACE}/{pod}").splitlines()[0]
        assert "'--command-config'" in argv and "/client.properties'" in argv, argv
    print(f"a client produced and consumed after {time.monotonic() - started:.1f}s")

    # what the page says is refused: orders-app on another topic, a wrong password
    settings = translate(
        secret["client.properties"].replace(
            "/etc/odradek/user/ca.crt", str(walk.workdir / "ca.crt")
        )
    ).librdkafka
    (walk.workdir / "ca.crt").write_text(secret["ca.crt"])

    def producer(password: str) -> KafkaProducer:
        return KafkaProducer(
            bootstrap_servers=f"{broker_host(0)}:9092",
            security_protocol=settings["security.protocol"],
            sasl_mechanism=settings["sasl.mechanism"],
            sasl_plain_username=settings["sasl.username"],
            sasl_plain_password=password,
            ssl_cafile=settings["ssl.ca.location"],
            acks="all",
            max_block_ms=15000,
            request_timeout_ms=15000,
        )

    with walk.kubelet.resolver():
        allowed = producer(settings["sasl.password"])
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                allowed.send("customers", b"not yours").get(timeout=30)
        finally:
            allowed.close(timeout=5)
        # odradek's own client, as the CLI's --command-config gives it: the right password
        # authenticates, a wrong one is refused
        assert asyncio.run(authentication_error(settings)) is None
        wrong = {**settings, "sasl.password": "not-the-password"}
        assert "SASL authentication failed" in (asyncio.run(authentication_error(wrong)) or "")


async def authentication_error(settings: dict[str, str]) -> str | None:
    """None when librdkafka-style ``settings`` authenticate on broker 0's SCRAM listener."""
    try:
        async with ClusterClient(f"{broker_host(0)}:9092", security=client_security(settings)) as c:
            await c.send_any(3, 1, lambda t: build(t, topics=None))  # Metadata
    except (SaslAuthenticationError, OpsError) as e:  # ops wraps it: ClusterUnreachableError
        return str(e)
    return None


def test_4_kubectl_scale_adds_a_broker_that_takes_partitions(walk):
    started = time.monotonic()
    walk.run_docs("5. Scale")
    wait_for(
        lambda: (
            walk.get("odradekclusters", "demo")["status"].get("brokerIds") == [0, 1, 2, 3]
            and walk.cluster_ready()
        ),
        READY_TIMEOUT_S,
        "the cluster Ready with 4 brokers",
        0.5,
    )
    with walk.kubelet.resolver():
        admin = walk.super_admin()
        try:
            described = admin.describe_topics()
        finally:
            admin.close()
    on_new = [
        (topic["name"], partition["partition_index"])  # Kafka's Metadata field names
        for topic in described
        for partition in topic["partitions"]
        if 3 in partition["replica_nodes"]
    ]
    assert on_new, "broker 3 holds no replica"
    print(f"scaled to 4 after {time.monotonic() - started:.1f}s, broker 3 has {len(on_new)}")


def test_5_two_operator_replicas_elect_one_and_fail_over(walk):
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


def test_6_delete_keeps_the_claims_and_the_jbod_cluster_runs(walk):
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
