"""manifests/spark-job.yaml's spark-submit, for real, against the test Kubernetes API server: the
kubelet stand-in runs the driver and executor pods (the odradek-spark image's entrypoint, as local
processes), spark/batch_key_stats.py reads a topic of the real 3-broker cluster and writes Parquet
to the claim both pods mount; what Spark sent carries the chart's account and pod templates and
the OdradekUser's Secret (whose client.properties the job cannot run without), and every API
call spark-submit and the driver make is allowed by the chart's Roles. The cluster here is
plaintext, so the Secret holds a PLAINTEXT client.properties: a SASL_SSL read with such a file is
tests/spark/test_secured.py's."""

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
from support.chart import CI_VALUES, MANIFESTS, ROOT, by_kind, documents, render
from support.k8s.apiserver import ApiServerThread, AuditRecord
from support.k8s.kubelet import KubeletStandIn

pytestmark = [pytest.mark.spark, pytest.mark.k8s, pytest.mark.integration]

NAMESPACE = "odradek"  # the namespace render() installs the chart in
RELEASE = "odradek"
SUBMITTER_TOKEN = "spark-submit-token"  # the stand-in's pods present "odradek-test-token"
DRIVER_TOKEN = "odradek-test-token"
KEYS = 20
RECORDS = 200
SUBMIT_TIMEOUT_S = 300
# Short-lived JVMs on two shared cores: less JIT work. The executor's reach its java through
# SPARK_JAVA_OPT_* and the entrypoint.
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


def produce(bootstrap: str, topic: str) -> None:
    import confluent_kafka
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic(topic, 2, 3)])[topic].result(30)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True}
    )
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i % KEYS}".encode(), value=b"v" * (i % 7))
    assert producer.flush(30) == 0


def secret_mounts(job: dict[str, Any]) -> dict[str, str]:
    """The Secrets the Job has Spark mount in the driver: name -> path (the executors' too)."""
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    prefix = "spark.kubernetes.driver.secrets."
    return dict(a[len(prefix) :].split("=", 1) for a in args if a.startswith(prefix))


def user_secret(job: dict[str, Any]) -> dict[str, Any]:
    """The OdradekUser's Secret the Job mounts, for this plaintext cluster."""
    import base64

    ((name, _),) = secret_mounts(job).items()
    properties = "# the test cluster is plaintext\nsecurity.protocol=PLAINTEXT\n"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "data": {"client.properties": base64.b64encode(properties.encode()).decode()},
    }


def submit_command(job: dict[str, Any], url: str, templates: Path, bootstrap: str, topic: str):
    """The Job's spark-submit, with what only a real cluster has swapped for the harness's."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "pod-templates")
    args = [a.replace("$(POD_NAMESPACE)", NAMESPACE) for a in container["args"]]
    swapped = {
        # the test server: plain http on 127.0.0.1, any token
        "k8s://https://kubernetes.default.svc": f"k8s://{url}",
        # the image's paths: the stand-in runs the image's commands from this checkout
        "local:///opt/odradek/spark/": f"local://{ROOT}/spark/",
        f"{mount}/": f"{templates}/",
        # the cluster's bootstrap Service (its name is checked in tests/chart/test_spark.py)
        f"demo-bootstrap.{NAMESPACE}.svc:9092": bootstrap,
        "orders": topic,
    }
    out = []
    for arg in args:
        if arg.startswith("spark.kubernetes.authenticate.submission."):
            arg = f"spark.kubernetes.authenticate.submission.oauthToken={SUBMITTER_TOKEN}"
        for old, new in swapped.items():
            if arg == old or (old.endswith("/") and old in arg):
                arg = arg.replace(old, new)
        out.append(arg)
    app = next(i for i, a in enumerate(out) if a.startswith("local://"))
    harness = [
        f"spark.kubernetes.driver.master={url}",
        "spark.executor.instances=1",  # later --conf values win
        "spark.driver.memory=512m",
        "spark.executor.memory=512m",
        # 200 shuffle partitions (4 stages of them in this job) on one executor core: minutes
        "spark.sql.shuffle.partitions=2",
        f"spark.driver.extraJavaOptions={QUICK_JVM}",
        f"spark.executor.extraJavaOptions={QUICK_JVM}",
    ]
    extra = [x for conf in harness for x in ("--conf", conf)]
    return [container["command"][0], *out[:app], *extra, *out[app:]]


def run_submit(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(tmp_path / "kubeconfig"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_SUBMIT_OPTS": QUICK_JVM,
    }
    command = [str(venv_bin / command[0]), *command[1:]]
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


@pytest.mark.timeout(SUBMIT_TIMEOUT_S + 120)  # beyond spark-submit's own, which says more
def test_spark_job_manifest_in_cluster_mode(
    spark_cluster: ClusterState, unique: Any, tmp_path: Path
) -> None:
    import pyarrow.dataset

    topic = unique("orders")
    produce(spark_cluster.bootstrap_servers, topic)
    chart = render(CI_VALUES / "spark-values.yaml")
    manifest = documents((MANIFESTS / "spark-job.yaml").read_text())
    (job,) = by_kind(manifest, "Job")
    (claim,) = by_kind(manifest, "PersistentVolumeClaim")

    records: list[AuditRecord] = []
    started = time.monotonic()
    api = ApiServerThread(tmp_path / "kubeconfig", audit=records.append).start()
    try:
        api.store.create("namespaces", None, {"metadata": {"name": NAMESPACE}})
        for obj in [o for o in chart if o["metadata"]["name"].startswith(f"{RELEASE}-spark")]:
            api.store.create(obj["kind"].lower() + "s", NAMESPACE, obj)
        api.store.create("persistentvolumeclaims", NAMESPACE, claim)
        api.store.create("secrets", NAMESPACE, user_secret(job))
        # The pod templates, as the Job mounts them from the chart's ConfigMap.
        (templates,) = [
            o for o in by_kind(chart, "ConfigMap") if o["metadata"]["name"].endswith("-templates")
        ]
        for name, text in templates["data"].items():
            (tmp_path / name).write_text(text)
        command = submit_command(job, api.url, tmp_path, spark_cluster.bootstrap_servers, topic)
        with KubeletStandIn(api, tmp_path / "kubelet", namespaces=[NAMESPACE]) as kubelet:
            done = run_submit(command, tmp_path)
            logs = sorted((tmp_path / "kubelet" / "pods" / NAMESPACE).glob("*-driver/*.log"))
            driver_log = "".join(path.read_text(errors="replace") for path in logs)
            assert done.returncode == 0, done.stdout[-3000:] + driver_log[-5000:]
            output = kubelet.pvc_dir(NAMESPACE, claim["metadata"]["name"]) / "orders"
            # The job's own summary line names the topic it read.
            assert f"{RECORDS} records of topic {topic}" in driver_log, driver_log[-5000:]
            stats = pyarrow.dataset.dataset(output, format="parquet", partitioning="hive")
            table = stats.to_table()
    finally:
        api.stop()
    print(f"spark-submit to the end of the driver: {time.monotonic() - started:.1f} s")

    # Written by the executor and committed by the driver, on the claim both mount.
    assert sum(table.column("records").to_pylist()) == RECORDS
    assert {k.decode() for k in table.column("key").to_pylist()} == {f"k{i}" for i in range(KEYS)}

    creates: dict[str, list[AuditRecord]] = {}
    for r in records:
        if r.verb == "create":
            creates.setdefault(r.resource, []).append(r)
    # What spark-submit sent: the driver pod, with the chart's account and the driver template.
    (driver,) = [r.body for r in creates["pods"] if r.token == SUBMITTER_TOKEN]
    spec = driver["spec"]
    assert spec["serviceAccountName"] == f"{RELEASE}-spark"
    assert driver["metadata"]["labels"]["app.kubernetes.io/component"] == "spark-driver"
    assert spec["securityContext"]["runAsUser"] == 10001
    (container,) = spec["containers"]
    assert container["image"] == job["spec"]["template"]["spec"]["containers"][0]["image"]
    assert container["args"][0] == "driver"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    claims = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
    assert [v["persistentVolumeClaim"]["claimName"] for v in claims] == ["key-stats"]
    mounts = secret_mounts(job)

    def secrets_of(pod_spec: dict[str, Any]) -> dict[str, str]:
        volumes = {
            v["name"]: v["secret"]["secretName"] for v in pod_spec["volumes"] if "secret" in v
        }
        (c,) = pod_spec["containers"]
        return {
            volumes[m["name"]]: m["mountPath"] for m in c["volumeMounts"] if m["name"] in volumes
        }

    assert secrets_of(spec) == mounts
    # ...and the executor the driver made, from the executor template: no API token.
    (executor,) = [r.body for r in creates["pods"] if r.token == DRIVER_TOKEN]
    assert executor["spec"]["automountServiceAccountToken"] is False
    assert executor["metadata"]["labels"]["app.kubernetes.io/component"] == "spark-executor"
    # The same Secret; its path is the one the driver was given, which the stand-in rewrote to
    # the driver's own volume directory (a real driver passes /etc/odradek/user on).
    assert secrets_of(executor["spec"]).keys() == mounts.keys()
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
