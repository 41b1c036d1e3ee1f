"""The CRDs (model/crds.py) are valid structural apiextensions/v1 objects, the chart carries exactly
them, and their schemas accept every example resource and refuse bad ones."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from odradek_operator.model import crds, openapi
from support.chart import MANIFESTS, ROOT, documents, script, validate_builtin

pytestmark = pytest.mark.k8s

EXAMPLES = sorted(MANIFESTS.glob("*.yaml"))


def example(name: str, kind: str) -> dict[str, Any]:
    (found,) = [
        d for d in documents((MANIFESTS / name).read_text()) if d["metadata"]["name"] == kind
    ]
    return found


def walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    nodes = [(path, schema)]
    for name, sub in schema.get("properties", {}).items():
        nodes += walk(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            nodes += walk(schema[key], f"{path}[{key}]")
    return nodes


@pytest.mark.parametrize("crd", crds.crds(), ids=lambda c: c["metadata"]["name"])
def test_crd_is_a_valid_apiextensions_v1_object(crd: dict[str, Any]) -> None:
    validate_builtin(crd)


@pytest.mark.parametrize("crd", crds.crds(), ids=lambda c: c["metadata"]["name"])
def test_crd_schema_is_structural(crd: dict[str, Any]) -> None:
    """Kubernetes' structural rules: a type on every node (but int-or-string and preserve-unknown
    nodes), no type or default inside anyOf except int-or-string's own, list-map keys required."""
    for path, node in walk(crds.open_api_schema(crd)):
        special = node.get("x-kubernetes-int-or-string") or node.get(
            "x-kubernetes-preserve-unknown-fields"
        )
        assert "type" in node or special, f"{path}: no type"
        for branch in node.get("anyOf", []):
            assert node.get("x-kubernetes-int-or-string"), f"{path}: anyOf outside int-or-string"
            assert set(branch) == {"type"} and branch["type"] in ("integer", "string"), path
        if node.get("x-kubernetes-list-type") == "map":
            keys = node["x-kubernetes-list-map-keys"]
            assert set(keys) <= set(node["items"]["required"]), f"{path}: map keys not required"
            assert "maxItems" in node, f"{path}: unbounded list"
        for rule in node.get("x-kubernetes-validations", []):
            assert rule["rule"] and rule["message"], path
        if "default" in node:  # the API server refuses a CRD whose default its own schema refuses
            defaulted = openapi.apply_defaults(node, node["default"])
            jsonschema.validate(defaulted, openapi.to_json_schema(node))


def test_crds_state_the_contract() -> None:
    cluster = crds.crd_for("OdradekCluster")["spec"]
    topic = crds.crd_for("OdradekTopic")["spec"]
    assert cluster["names"]["shortNames"] == ["odc", "odradek"]
    assert topic["names"]["shortNames"] == ["odt"]
    connect = crds.crd_for("OdradekConnect")["spec"]
    connector = crds.crd_for("OdradekConnector")["spec"]
    assert connect["names"]["shortNames"] == ["odcx"]
    assert connector["names"]["shortNames"] == ["odcr"]
    for spec in (cluster, topic, connect, connector):
        assert spec["group"] == "odradek.io" and spec["scope"] == "Namespaced"
        (version,) = spec["versions"]
        assert version["name"] == "v1alpha1" and version["subresources"]["status"] == {}
    (version,) = cluster["versions"]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.brokers.replicas",
        "statusReplicasPath": ".status.brokers.replicas",
        "labelSelectorPath": ".status.brokers.selector",
    }
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Brokers", "Ready", "Operation", "Bootstrap", "Age"]
    (version,) = topic["versions"]
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Cluster", "Partitions", "RF", "Ready", "Age"]
    partitions = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    rules = partitions["partitions"]["x-kubernetes-validations"]
    assert {"rule": "self >= oldSelf", "message": "partitions may not decrease"} in rules


def test_checked_in_crds_are_current() -> None:
    assert script("render_crds").stale() == [], "run scripts/render_manifests.py"


def test_the_rendered_chart_carries_exactly_the_model_crds() -> None:
    text = (MANIFESTS / "rendered" / "default.yaml").read_text()
    rendered = {
        d["metadata"]["name"]: d
        for d in documents(text)
        if d["kind"] == "CustomResourceDefinition" and d["spec"]["group"] == crds.GROUP
    }
    assert set(rendered) == {c["metadata"]["name"] for c in crds.crds()}
    for crd in crds.crds():
        got = rendered[crd["metadata"]["name"]]
        assert got["spec"] == crd["spec"]
        assert got["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


def custom_resources() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in [*EXAMPLES, *sorted((MANIFESTS / "rendered").glob("*.yaml"))]:
        for doc in documents(path.read_text()):
            if doc["apiVersion"].startswith(crds.GROUP + "/"):
                found.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return found


@pytest.mark.parametrize(
    "resource", [r for _, r in custom_resources()], ids=[i for i, _ in custom_resources()]
)
def test_every_example_resource_is_valid(resource: dict[str, Any]) -> None:
    assert openapi.errors(resource) == []


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_builtin_object_is_valid(path: Path) -> None:
    """The examples' Kubernetes objects (the client pods, a user's password Secret, Spark's
    Job) against the Kubernetes schemas, strict."""
    for doc in documents(path.read_text()):
        if not doc["apiVersion"].startswith(crds.GROUP + "/"):
            validate_builtin(doc)


def test_client_pods_use_the_users_secret_as_the_docs_say() -> None:
    """manifests/client.yaml mounts orders-app's Secret where its client.properties points
    (/etc/odradek/user) and hands that file to the odradek CLI, on the SCRAM listener of
    manifests/cluster-minimal.yaml."""
    cluster = example("cluster-minimal.yaml", "demo")
    (scram,) = [
        listener
        for listener in cluster["spec"]["listeners"]
        if listener["authentication"]["type"] == "scram-sha-512"
    ]
    pods = documents((MANIFESTS / "client.yaml").read_text())
    assert {p["metadata"]["name"] for p in pods} == {"orders-producer", "orders-consumer"}
    for pod in pods:
        (volume,) = [v for v in pod["spec"]["volumes"] if "secret" in v]
        assert volume["secret"]["secretName"] == "orders-app"
        (container,) = pod["spec"]["containers"]
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
        assert mount["mountPath"] == "/etc/odradek/user" and mount["readOnly"] is True
        args = container["args"]
        assert args[args.index("--command-config") + 1] == "/etc/odradek/user/client.properties"
        bootstrap = args[args.index("--bootstrap-server") + 1]
        assert bootstrap == f"demo-bootstrap.$(POD_NAMESPACE).svc:{scram['port']}"


def test_examples_cover_every_kind_and_jbod() -> None:
    kinds = {r["kind"] for _, r in custom_resources()}
    assert kinds == {c["spec"]["names"]["kind"] for c in crds.crds()}
    jbod = example("cluster-jbod.yaml", "jbod")
    assert len(jbod["spec"]["brokers"]["storage"]["volumes"]) == 2


def broken(path: str, value: Any, base: dict[str, Any]) -> dict[str, Any]:
    resource = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = resource
    for name in parents:
        node = node[name] if not isinstance(node, list) else node[int(name)]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return resource


CLUSTER = example("cluster-minimal.yaml", "demo")
CONNECT = example("connect.yaml", "sync")
CONNECTOR = example("connect.yaml", "lines-source")
TOPIC = example("topics.yaml", "orders")


@pytest.mark.parametrize(
    ("base", "path", "value", "says"),
    [
        (TOPIC, "spec.partitions", -1, "less than the minimum of 1"),
        (TOPIC, "spec.partitions", 0, "less than the minimum of 1"),
        (TOPIC, "spec.replicationFactor", 0, "less than the minimum of 1"),
        (TOPIC, "spec.partitons", 3, "'partitons' was unexpected"),
        (TOPIC, "spec.topicName", "no spaces", "does not match"),
        (TOPIC, "spec.cluster", "Demo", "does not match"),
        (CLUSTER, "spec.zookeeper.replicas", 2, "is not one of [1, 3, 5]"),
        (CLUSTER, "spec.brokers.replicas", 0, "less than the minimum of 1"),
        (CLUSTER, "spec.brokers.storage.volumes", [], "should be non-empty"),
        (CLUSTER, "spec.brokers.storage.volumes.0.size", "ten gigs", "does not match"),
        (CLUSTER, "spec.brokers.storage.volumes.0.id", -1, "less than the minimum of 0"),
        (CLUSTER, "spec.brokers.replica", 3, "'replica' was unexpected"),
        (CLUSTER, "spec.imagePullPolicy", "Sometimes", "is not one of"),
        (CLUSTER, "spec.listeners", [{"name": "tls", "port": 70000}], "greater than the maximum"),
        (CLUSTER, "spec.listeners", [{"name": "TLS", "port": 9093}], "does not match"),
        (CLUSTER, "spec.controlPlane", {"port": 0}, "less than the minimum"),
        (CLUSTER, "apiVersion", "odradek.io/v1", "was expected"),
        (CONNECT, "spec.replicas", -1, "less than the minimum of 0"),
        (CONNECT, "spec.clusterRef", "Demo", "does not match"),
        (CONNECT, "spec.logLevel", "TRACE", "is not one of"),
        (CONNECT, "spec.config", {"group.id": True}, "is not valid under any of the given schemas"),
        (CONNECT, "spec.replica", 2, "'replica' was unexpected"),
        (CONNECTOR, "spec.state", "halted", "is not one of ['running', 'paused', 'stopped']"),
        (CONNECTOR, "spec.tasksMax", 0, "less than the minimum of 1"),
        (CONNECTOR, "spec.config", {"batch.size": 100}, "100 is not of type 'string'"),
        (CONNECTOR, "spec.class", "", "should be non-empty"),
        (CONNECTOR, "spec.connectRef", "a_b", "does not match"),
    ],
)
def test_bad_resources_are_refused(base: dict, path: str, value: Any, says: str) -> None:
    problems = openapi.errors(broken(path, value, base))
    assert any(says in p for p in problems), problems


def test_duplicate_volume_ids_are_refused() -> None:
    volumes = [{"id": 0, "size": "1Gi"}, {"id": 0, "size": "2Gi"}]
    problems = openapi.errors(broken("spec.brokers.storage.volumes", volumes, CLUSTER))
    assert problems == ["spec.brokers.storage.volumes: duplicate entries for key [id=0]"]


def test_missing_required_fields_are_refused() -> None:
    connector = copy.deepcopy(CONNECTOR)
    del connector["spec"]["class"]
    assert any("'class' is a required property" in p for p in openapi.errors(connector))
    topic = copy.deepcopy(TOPIC)
    del topic["spec"]["partitions"]
    assert any("'partitions' is a required property" in p for p in openapi.errors(topic))
    assert openapi.errors({**CLUSTER, "kind": "OdradekWidget"}) == [
        "unknown kind 'OdradekWidget' (not one of group odradek.io)"
    ]


def test_storage_class_may_be_null_and_status_is_accepted() -> None:
    cluster = broken("spec.brokers.storage.volumes.0.storageClass", None, CLUSTER)
    cluster["status"] = {
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "AllBrokersReady",
                "message": "3 of 3 brokers ready",
                "lastTransitionTime": "2026-11-26T04:00:00Z",
            }
        ],
        "brokerIds": [0, 1, 2],
        "bootstrap": "demo-bootstrap.data.svc:9092",
        "brokers": {"replicas": 3, "selector": "app.kubernetes.io/instance=demo"},
        "operation": {"type": "Idle"},
    }
    assert openapi.errors(cluster) == []


def test_defaults_are_applied_like_the_api_server() -> None:
    unsecured = copy.deepcopy(CLUSTER)
    del unsecured["spec"]["listeners"], unsecured["spec"]["authorization"]
    filled = openapi.resource_with_defaults(unsecured)
    spec = filled["spec"]
    assert "listeners" not in spec  # absent: one PLAINTEXT listener on 9092 (spec/listeners.py)
    assert spec["controlPlane"] == {"port": 9091}
    assert spec["metrics"] == {"port": 9645}
    assert spec["imagePullPolicy"] == "IfNotPresent"
    assert spec["zookeeper"]["replicas"] == 1  # given values win
    assert spec["zookeeper"]["image"] == "zookeeper:3.8"
    assert spec["zookeeper"]["storage"] == {"size": "1Gi"}
    assert spec["brokers"]["storage"]["deleteClaim"] is False
    assert "image" not in spec  # no default: the operator's ODRADEK_IMAGE
    assert CLUSTER["spec"].get("metrics") is None  # the input is not changed
    assert openapi.errors(filled) == []


def test_crds_round_trip_through_yaml() -> None:
    for crd in crds.crds():
        assert yaml.safe_load(yaml.safe_dump(crd)) == crd


def test_the_operator_accepts_every_example_the_crds_accept() -> None:
    """model/spec/ (the operator's own checks) and the CRDs agree on every example resource."""
    from odradek_operator.model import connect, users
    from odradek_operator.model.spec.cluster import ClusterSpec
    from odradek_operator.model.spec.readers import SpecError
    from odradek_operator.model.spec.topic import TopicSpec

    for where, resource in custom_resources():
        body = {
            **resource,
            "metadata": {"namespace": "odradek", "uid": "u", **resource["metadata"]},
        }
        parse = {
            "OdradekCluster": ClusterSpec,
            "OdradekTopic": TopicSpec,
            "OdradekConnect": connect.ConnectSpec,
            "OdradekConnector": connect.ConnectorSpec,
            "OdradekUser": users.UserSpec,
        }[resource["kind"]]
        try:
            parse.from_resource(body)
        except SpecError as e:
            raise AssertionError(f"{where}: the CRD accepts it, the operator refuses: {e}") from e


@pytest.mark.parametrize(
    ("name", "says"),
    [("1demo", "does not match"), ("a" * 41, "is too long"), ("Demo", "does not match")],
)
def test_cluster_names_the_derived_objects_cannot_carry_are_refused(name: str, says: str) -> None:
    cluster = {**CLUSTER, "metadata": {"name": name}}
    assert any(says in p for p in openapi.errors(cluster))


def test_partitions_are_bounded() -> None:
    assert openapi.errors(broken("spec.partitions", 100_000, TOPIC)) == []
    assert openapi.errors(broken("spec.partitions", 100_001, TOPIC))


def test_generated_crds_are_plain_yaml_without_anchors() -> None:
    for path in (ROOT / "charts" / "odradek" / "templates" / "crds").glob("*.yaml"):
        text = path.read_text()
        assert "&id" not in text and "*id" not in text, path
