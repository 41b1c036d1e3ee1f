"""spark-submit in cluster mode against the test Kubernetes API server: the kubelet stand-in runs
the driver and executor pods (the odradek-spark image's entrypoint, as local processes), the
executors produce to the real 3-broker cluster, and every API call the submitter and the driver
make is allowed by the chart's Roles; the pod templates reach the pods Spark creates."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from odradek.local.cluster import ClusterState
from support.chart import CI_VALUES, by_kind, render
from support.k8s.apiserver import ApiServerThread, AuditRecord
from support.k8s.kubelet import KubeletStandIn

pytestmark = [pytest.mark.spark, pytest.mark.k8s, pytest.mark.integration]

APP = Path(__file__).with_name("k8s_submit_app.py")
IMAGE = "localhost/odradek-spark:0.1.0"
NAMESPACE = "odradek"  # the namespace render() installs the chart in
RELEASE = "odradek"
SUBMITTER_TOKEN = "spark-submit-token"  # the stand-in's pods present "odradek-test-token"
DRIVER_TOKEN = "odradek-test-token"
RECORDS = 200
SUBMIT_TIMEOUT_S = 300
CONSUME_TIMEOUT_S = 60
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def granted(objs: list[dict[str, Any]], role: str) -> set[tuple[str, str, str]]:
    (obj,) = [o for o in by_kind(objs, "Role") if o["metadata"]["name"] == role]
    return {
        (verb, group, resource)
        for rule in obj["rules"]
        for verb in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def consume_count(bootstrap: str, topic: str, expected: int) -> dict[bytes, bytes]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-check",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    records: dict[bytes, bytes] = {}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(records) < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                assert message.error() is None, message.error()
                records[message.key()] = message.value()
    finally:
        consumer.close()
    return records


def test_spark_submit_cluster_mode(
    spark_cluster: ClusterState, unique: Any, tmp_path: Path
) -> None:
    import confluent_kafka.admin

    topic = unique("k8s")
    admin = confluent_kafka.admin.AdminClient(
        {"bootstrap.servers": spark_cluster.bootstrap_servers}
    )
    created = admin.create_topics([confluent_kafka.admin.NewTopic(topic, 2, 3)])
    created[topic].result(30)

    chart = render(CI_VALUES / "spark-values.yaml")
    records: list[AuditRecord] = []
    api = ApiServerThread(tmp_path / "kubeconfig", audit=records.append).start()
    try:
        api.store.create("namespaces", None, {"metadata": {"name": NAMESPACE}})
        for obj in chart:
            if obj["metadata"]["name"].startswith(f"{RELEASE}-spark"):
                api.store.create(obj["kind"].lower() + "s", NAMESPACE, obj)
        # The templates as manifests/spark-job.yaml mounts them from the chart's ConfigMap.
        (templates,) = [
            o
            for o in by_kind(chart, "ConfigMap")
            if o["metadata"]["name"].endswith("-spark-pod-templates")
        ]
        for name, text in templates["data"].items():
            (tmp_path / name).write_text(text)
        with KubeletStandIn(api, tmp_path / "kubelet", namespaces=[NAMESPACE]):
            done = submit(api.url, tmp_path, spark_cluster.bootstrap_servers, topic)
            logs = sorted((tmp_path / "kubelet" / "pods" / NAMESPACE).glob("*-driver/*.log"))
            driver_logs = "".join(path.read_text(errors="replace") for path in logs)
            assert done.returncode == 0, done.stdout[-4000:] + driver_logs[-4000:]
        assert f"produced {RECORDS}" in driver_logs, driver_logs[-4000:]
    finally:
        api.stop()

    produced = consume_count(spark_cluster.bootstrap_servers, topic, RECORDS)
    assert produced == {f"k{i}".encode(): f"v{i}".encode() for i in range(RECORDS)}

    # What spark-submit sent: the driver pod, with the chart's account and the driver template.
    creates = {r.resource: [] for r in records}
    for r in records:
        if r.verb == "create":
            creates[r.resource].append(r)
    (driver,) = [r.body for r in creates["pods"] if r.token == SUBMITTER_TOKEN]
    spec = driver["spec"]
    assert spec["serviceAccountName"] == f"{RELEASE}-spark"
    assert driver["metadata"]["labels"]["app.kubernetes.io/component"] == "spark-driver"
    assert spec["securityContext"]["runAsUser"] == 10001
    (container,) = spec["containers"]
    assert container["image"] == IMAGE
    assert container["args"][0] == "driver"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # ...and the executors the driver made, from the executor template: no API token.
    executors = [r.body for r in creates["pods"] if r.token == DRIVER_TOKEN]
    assert len(executors) == 1
    (executor,) = executors
    assert executor["spec"]["automountServiceAccountToken"] is False
    assert executor["metadata"]["labels"]["app.kubernetes.io/component"] == "spark-executor"
    (container,) = executor["spec"]["containers"]
    assert container["args"] == ["executor"]
    java_opts = [e["value"] for e in container["env"] if e["name"].startswith("SPARK_JAVA_OPT_")]
    assert set(QUICK_JVM.split()) <= set(java_opts)

    # Least privilege that suffices: every call was within the chart's Roles; executors made none.
    calls = {(r.token, r.verb, r.group, r.resource) for r in records}
    assert {t for t, *_ in calls} == {SUBMITTER_TOKEN, DRIVER_TOKEN}, calls
    submitter = {c[1:] for c in calls if c[0] == SUBMITTER_TOKEN}
    assert submitter <= granted(chart, f"{RELEASE}-spark-submit"), submitter
    driver_calls = {c[1:] for c in calls if c[0] == DRIVER_TOKEN}
    assert driver_calls <= granted(chart, f"{RELEASE}-spark"), driver_calls


def submit(
    url: str, tmp_path: Path, bootstrap: str, topic: str
) -> subprocess.CompletedProcess[str]:
    """spark-submit in cluster mode as docs/spark.md has it, with the test server as master."""
    venv_bin = Path(sys.executable).parent
    driver_template = tmp_path / "driver-pod-template.yaml"
    executor_template = tmp_path / "executor-pod-template.yaml"
    command = [
        str(venv_bin / "spark-submit"),
        "--master", f"k8s://{url}",
        "--deploy-mode", "cluster",
        "--name", "k8s-submit-test",
        "--conf", f"spark.kubernetes.namespace={NAMESPACE}",
        "--conf", f"spark.kubernetes.container.image={IMAGE}",
        "--conf", f"spark.kubernetes.authenticate.driver.serviceAccountName={RELEASE}-spark",
        "--conf", f"spark.kubernetes.driver.podTemplateFile={driver_template}",
        "--conf", f"spark.kubernetes.executor.podTemplateFile={executor_template}",
        "--conf", "spark.executor.instances=1",
        "--conf", "spark.driver.memory=512m",
        "--conf", "spark.executor.memory=512m",
        "--conf", "spark.ui.enabled=false",
        # Short-lived JVMs on two shared cores: less JIT work (and SPARK_JAVA_OPT_* reach the
        # executor's java through the entrypoint).
        "--conf", f"spark.driver.extraJavaOptions={QUICK_JVM}",
        "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM}",
        # The test server speaks plain http on 127.0.0.1, not https://kubernetes.default.svc.
        "--conf", f"spark.kubernetes.driver.master={url}",
        "--conf", f"spark.kubernetes.authenticate.submission.oauthToken={SUBMITTER_TOKEN}",
        f"local://{APP}",
        bootstrap, topic, str(RECORDS),
    ]  # fmt: skip
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(tmp_path / "kubeconfig"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_SUBMIT_OPTS": QUICK_JVM,
    }
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, _ = process.communicate(timeout=SUBMIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, _ = process.communicate()
        pytest.fail(f"spark-submit did not finish in {SUBMIT_TIMEOUT_S} s:\n{stdout[-4000:]}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, "")
