"""Spark on Kubernetes, offline: the chart's Spark objects (accounts, Roles, pod templates) and
manifests/spark-job.yaml are valid Kubernetes 1.30 objects (strict), the Job uses what the chart
creates, the operator's bootstrap Service and an OdradekUser's Secret, and the pod templates keep
Spark's container names."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from odradek_operator import names
from support.chart import CHART, CI_VALUES, MANIFESTS, by_kind, documents, render, validate_builtin

pytestmark = pytest.mark.k8s

RELEASE = "odradek"  # render()'s release name, which the manifest assumes
TEMPLATES = CHART / "files" / "spark"


@pytest.fixture(scope="module")
def chart() -> list[dict[str, Any]]:
    return render(CI_VALUES / "spark-values.yaml")


def spark_objects(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["metadata"]["name"].startswith(f"{RELEASE}-spark")]


def test_spark_objects_only_when_enabled(chart: list[dict[str, Any]]) -> None:
    assert spark_objects(render(CI_VALUES / "default-values.yaml")) == []
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in spark_objects(chart))
    assert kinds == [
        ("ConfigMap", f"{RELEASE}-spark-pod-templates"),
        ("Role", f"{RELEASE}-spark"),
        ("Role", f"{RELEASE}-spark-submit"),
        ("RoleBinding", f"{RELEASE}-spark"),
        ("RoleBinding", f"{RELEASE}-spark-submit"),
        ("ServiceAccount", f"{RELEASE}-spark"),
        ("ServiceAccount", f"{RELEASE}-spark-submit"),
    ]
    for binding in by_kind(spark_objects(chart), "RoleBinding"):
        name = binding["metadata"]["name"]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": name,
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": name, "namespace": binding["metadata"]["namespace"]}
        ]


def test_spark_roles_are_namespaced_and_narrow(chart: list[dict[str, Any]]) -> None:
    """Spark's documented needs (pods, services, configmaps, claims) and nothing cluster-wide;
    test_k8s_submit.py checks that what spark-submit and the driver really call is within them."""
    assert not [o for o in spark_objects(chart) if o["kind"].startswith("Cluster")]
    for role in by_kind(spark_objects(chart), "Role"):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
            assert set(rule["resources"]) <= {
                "pods",
                "services",
                "configmaps",
                "persistentvolumeclaims",
                "networkpolicies",
            }


def test_pod_templates_are_valid_pods(chart: list[dict[str, Any]]) -> None:
    (config_map,) = by_kind(spark_objects(chart), "ConfigMap")
    assert set(config_map["data"]) == {"driver-pod-template.yaml", "executor-pod-template.yaml"}
    for name, text in config_map["data"].items():
        assert text == (TEMPLATES / name).read_text()
        template = yaml.safe_load(text)
        validate_builtin({**template, "metadata": {**template["metadata"], "name": "t"}})
        role = name.split("-", 1)[0]
        (container,) = template["spec"]["containers"]
        # Spark's default container names: the template's container is then the one it fills in.
        assert container["name"] == f"spark-kubernetes-{role}"
        # Only the driver calls the API; both run as the image's user.
        assert template["spec"]["automountServiceAccountToken"] is (role == "driver")
        assert template["spec"]["securityContext"]["runAsUser"] == 10001


def test_spark_job_manifest(chart: list[dict[str, Any]]) -> None:
    docs = documents((MANIFESTS / "spark-job.yaml").read_text())
    for doc in docs:
        validate_builtin(doc)
    (job,) = by_kind(docs, "Job")
    (claim,) = by_kind(docs, "PersistentVolumeClaim")
    pod = job["spec"]["template"]["spec"]
    created = {(o["kind"], o["metadata"]["name"]) for o in spark_objects(chart)}
    assert ("ServiceAccount", pod["serviceAccountName"]) in created
    (templates,) = [v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v]
    assert ("ConfigMap", templates) in created
    (container,) = pod["containers"]
    args = container["args"]
    conf = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--conf")
    assert args[args.index("--master") + 1] == "k8s://https://kubernetes.default.svc"
    assert args[args.index("--deploy-mode") + 1] == "cluster"
    assert (
        "ServiceAccount",
        conf["spark.kubernetes.authenticate.driver.serviceAccountName"],
    ) in created
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "pod-templates")
    for role in ("driver", "executor"):
        assert conf[f"spark.kubernetes.{role}.podTemplateFile"] == (
            f"{mount}/{role}-pod-template.yaml"
        )
        prefix = f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.key-stats"
        assert conf[f"{prefix}.options.claimName"] == claim["metadata"]["name"]
        assert args[args.index("--output") + 1].startswith(conf[f"{prefix}.mount.path"] + "/")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    # The job reads from the bootstrap Service the operator makes for the cluster `demo`.
    bootstrap = args[args.index("--bootstrap-servers") + 1]
    assert bootstrap == names.bootstrap_address("demo", "$(POD_NAMESPACE)", 9092)
    cluster = yaml.safe_load((MANIFESTS / "cluster-minimal.yaml").read_text())
    assert cluster["metadata"]["name"] == "demo"
    job_path = args[args.index("--bootstrap-servers") - 1]
    assert job_path == "local:///opt/odradek/spark/batch_key_stats.py"


def test_spark_job_reads_as_the_users_secret() -> None:
    """manifests/spark-job.yaml on the docs' secured cluster: the OdradekUser's Secret mounted in
    the driver and the executors where its client.properties names its files, that file as
    --command-config, the port of the cluster's listener with the user's authentication and a
    group its ACLs cover (read from cluster-minimal.yaml and users.yaml, not copied)."""
    from odradek_operator.model.spec.cluster import ClusterSpec
    from odradek_operator.model.users import USER_SECRET_MOUNT, UserSpec, user_listener

    docs = documents((MANIFESTS / "spark-job.yaml").read_text())
    (job,) = by_kind(docs, "Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    conf = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--conf")
    secrets = {
        role: {
            k.split(".")[-1]: v
            for k, v in conf.items()
            if k.startswith(f"spark.kubernetes.{role}.secrets.")
        }
        for role in ("driver", "executor")
    }
    users = {
        d["metadata"]["name"]: d
        for d in documents((MANIFESTS / "users.yaml").read_text())
        if d["kind"] == "OdradekUser"
    }
    (user_name,) = secrets["driver"]
    assert secrets == {role: {user_name: USER_SECRET_MOUNT} for role in secrets}
    user = UserSpec.from_resource(
        {**users[user_name], "metadata": {**users[user_name]["metadata"], "namespace": "odradek"}}
    )
    assert args[args.index("--command-config") + 1] == f"{USER_SECRET_MOUNT}/client.properties"
    cluster_body = yaml.safe_load((MANIFESTS / "cluster-minimal.yaml").read_text())
    assert cluster_body["metadata"]["name"] == user.cluster
    cluster = ClusterSpec.from_resource(
        {**cluster_body, "metadata": {"name": user.cluster, "namespace": "odradek"}}
    )
    listener = user_listener(cluster, user.authentication)
    assert listener is not None
    bootstrap = args[args.index("--bootstrap-servers") + 1]
    assert bootstrap == names.bootstrap_address(user.cluster, "$(POD_NAMESPACE)", listener.port)
    kafka = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--kafka")
    group, topic = kafka["group.id"], args[args.index("--topic") + 1]
    readable = {
        (b.pattern.resource_type.name, b.pattern.pattern_type.name, b.pattern.name)
        for b in user.acls
        if b.entry.operation.name in ("READ", "ALL")
    }
    assert ("TOPIC", "LITERAL", topic) in readable
    assert any(t == "GROUP" and p == "PREFIXED" and group.startswith(n) for t, p, n in readable)
