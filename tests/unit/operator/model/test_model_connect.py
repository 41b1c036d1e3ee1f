"""Connect's model: an OdradekConnect becomes a ConfigMap, Service and Deployment owned by it and
valid for Kubernetes 1.30 (strict), with the worker properties Kafka Connect names and the
operator's keys; OdradekConnector specs become the REST body; what schemas cannot refuse is
refused here with the field named."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from odradek.config.properties import parse_properties
from odradek_operator import names
from odradek_operator.model import connect
from odradek_operator.model.spec.readers import SpecError

IMAGE = "odradek:0.1.0"
BOOTSTRAP = "demo-bootstrap.data.svc:9092"


def connect_body(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekConnect",
        "metadata": {"name": "sync", "namespace": "data", "uid": "u-1", "generation": 1},
        "spec": {"replicas": 2, "clusterRef": "demo", **(spec or {})},
    }


def connector_body(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekConnector",
        "metadata": {"name": "lines", "namespace": "data"},
        "spec": {"connectRef": "sync", "class": "FileStreamSource", **(spec or {})},
    }


def objects(spec: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    parsed = connect.ConnectSpec.from_resource(connect_body(spec))
    security = parsed.security.for_cluster(None)
    return {o["kind"]: o for o in connect.desired_objects(parsed, IMAGE, BOOTSTRAP, security)}


def properties(objs: dict[str, dict[str, Any]]) -> dict[str, str]:
    text = objs["ConfigMap"]["data"][names.CONNECT_PROPERTIES]
    return {p.key: p.value for p in parse_properties(text)}


def test_objects_are_valid_kubernetes_objects_owned_by_the_connect() -> None:
    objs = objects({"resources": {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}}})
    assert list(objs) == ["ConfigMap", "Service", "NetworkPolicy", "Deployment"]
    for obj in objs.values():
        kubernetes_validate.validate(obj, "1.30", strict=True)
        (owner,) = obj["metadata"]["ownerReferences"]
        assert owner["kind"] == "OdradekConnect" and owner["uid"] == "u-1" and owner["controller"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "odradek-connect"
        assert obj["metadata"]["namespace"] == "data"
    names_ = {k: o["metadata"]["name"] for k, o in objs.items()}
    assert names_ == {
        "ConfigMap": "sync-connect-config",
        "Service": "sync-connect-api",
        "NetworkPolicy": "sync-connect-network-policy",
        "Deployment": "sync-connect",
    }


def test_worker_properties_default_from_the_name_and_carry_the_operators_keys() -> None:
    props = properties(objects({"config": {"offset.flush.interval.ms": 1000}}))
    assert props == {
        "group.id": "sync-connect",
        "config.storage.topic": "sync-connect-configs",
        "offset.storage.topic": "sync-connect-offsets",
        "status.storage.topic": "sync-connect-status",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "offset.flush.interval.ms": "1000",
        "bootstrap.servers": BOOTSTRAP,
        "listeners": "http://0.0.0.0:8083",
        "rest.advertised.port": "8083",
    }
    mine = properties(objects({"config": {"group.id": "etl", "status.storage.topic": "st"}}))
    assert mine["group.id"] == "etl" and mine["status.storage.topic"] == "st"


def test_the_deployment_runs_distributed_workers_advertising_their_pod_ip() -> None:
    deployment = objects()["Deployment"]
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    selector = spec["selector"]["matchLabels"]
    assert selector == names.connect_selector_labels("sync")
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()
    (container,) = spec["template"]["spec"]["containers"]
    assert container["image"] == IMAGE
    assert container["command"] == ["odradek"]
    assert container["args"] == [
        "connect",
        "distributed",
        "/etc/odradek/connect/connect-distributed.properties",
        "--override",
        "rest.advertised.host.name=$(POD_IP)",
    ]
    pod_ip = {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}
    assert {"name": "POD_IP", "valueFrom": pod_ip} in container["env"]
    assert container["ports"] == [{"name": "rest", "containerPort": 8083}]
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/", "port": "rest"}
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] == connect.STARTUP_MAX_S
    mount, tmp = container["volumeMounts"]
    assert mount["mountPath"] == "/etc/odradek/connect"
    assert tmp == {"name": "tmp", "mountPath": "/tmp"}  # the root filesystem is read-only
    volume, scratch = spec["template"]["spec"]["volumes"]
    assert volume["configMap"]["name"] == "sync-connect-config"
    assert "emptyDir" in scratch
    assert spec["template"]["spec"]["automountServiceAccountToken"] is False


def test_debug_log_level_runs_odradek_verbose() -> None:
    (container,) = objects({"logLevel": "DEBUG"})["Deployment"]["spec"]["template"]["spec"][
        "containers"
    ]
    assert container["args"][:2] == ["-v", "connect"]


def test_the_service_routes_the_rest_port_to_the_workers() -> None:
    service = objects()["Service"]
    assert service["spec"]["selector"] == names.connect_selector_labels("sync")
    assert service["spec"]["ports"] == [
        {"name": "rest", "port": 8083, "targetPort": "rest", "protocol": "TCP"}
    ]
    assert names.connect_url("sync", "data") == "http://sync-connect-api.data.svc:8083"


def test_a_config_change_changes_the_pod_template_and_replicas_do_not() -> None:
    def digest(spec):
        template = objects(spec)["Deployment"]["spec"]["template"]
        return template["metadata"]["annotations"][names.CONFIG_HASH_ANNOTATION]

    assert digest({}) == digest({"replicas": 5})
    assert digest({}) != digest({"config": {"offset.flush.interval.ms": "1000"}})


def test_grace_period_outlasts_the_tasks_graceful_shutdown() -> None:
    pod = objects({"config": {"task.shutdown.graceful.timeout.ms": 20_000}})["Deployment"]
    assert pod["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 30


def test_bootstrap_servers_instead_of_a_cluster() -> None:
    spec = connect.ConnectSpec.from_resource(
        connect_body({"clusterRef": None, "bootstrapServers": "k1:9092,k2:9092"})
    )
    assert spec.cluster_ref is None and spec.bootstrap_servers == "k1:9092,k2:9092"


@pytest.mark.parametrize(
    ("spec", "field", "says"),
    [
        ({"clusterRef": None}, "spec", "exactly one of clusterRef"),
        ({"bootstrapServers": "k:9092"}, "spec", "exactly one of clusterRef"),
        ({"config": {"bootstrap.servers": "x:9092"}}, "spec.config[bootstrap.servers]", "sets"),
        ({"config": {"listeners": "http://:9"}}, "spec.config[listeners]", "operator sets"),
        ({"config": {"plugin.path": "/x"}}, "spec.config[plugin.path]", "entry points"),
        (
            {"config": {"offset.storage.file.filename": "/x"}},
            "spec.config[offset.storage.file.filename]",
            "standalone",
        ),
        ({"config": {"x.enable": True}}, "spec.config[x.enable]", "in quotes"),
        ({"replicas": 101}, "spec.replicas", "out of range"),
        ({"config": {"foo.bar": "1"}}, "spec.config[foo.bar]", "unknown worker configuration key"),
        (
            {"config": {"session.timeout.ms": "soon"}},
            "spec.config[session.timeout.ms]",
            "is not an integer",
        ),
        ({"logLevel": "INFO"}, "spec.logLevel", "not one of WARNING, DEBUG"),
        ({"replica": 1}, "spec.replica", "unknown field"),
    ],
)
def test_bad_connect_specs_name_the_field(spec: dict, field: str, says: str) -> None:
    body = connect_body()
    body["spec"].update(spec)
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    with pytest.raises(SpecError) as refused:
        connect.ConnectSpec.from_resource(body)
    assert refused.value.field == field
    assert says in refused.value.message


def test_connector_spec_becomes_the_rest_body() -> None:
    spec = connect.ConnectorSpec.from_resource(
        connector_body({"tasksMax": 3, "config": {"file": "/in.txt", "topic": "lines"}})
    )
    assert spec.name == "lines" and spec.connect == "sync"
    assert spec.connector_config() == {
        "file": "/in.txt",
        "topic": "lines",
        "connector.class": "FileStreamSource",
        "tasks.max": "3",
    }
    assert (spec.state, spec.target_state, spec.reached_state) == ("running", "STARTED", "RUNNING")
    paused = connect.ConnectorSpec.from_resource(connector_body({"state": "paused"}))
    assert (paused.target_state, paused.reached_state) == ("PAUSED", "PAUSED")


@pytest.mark.parametrize(
    ("spec", "field", "says"),
    [
        ({"config": {"tasks.max": "2"}}, "spec.config[tasks.max]", "spec.tasksMax"),
        ({"config": {"connector.class": "X"}}, "spec.config[connector.class]", "spec.class"),
        ({"config": {"name": "other"}}, "spec.config[name]", "metadata.name"),
        ({"config": {"batch.size": 10}}, "spec.config[batch.size]", "quote it"),
        ({"state": "halted"}, "spec.state", "not one of running, paused, stopped"),
        ({"tasksMax": 0}, "spec.tasksMax", "out of range"),
        ({"class": None}, "spec.class", "required"),
        ({"connectRef": None}, "spec.connectRef", "required"),
    ],
)
def test_bad_connector_specs_name_the_field(spec: dict, field: str, says: str) -> None:
    body = copy.deepcopy(connector_body())
    body["spec"].update(spec)
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    with pytest.raises(SpecError) as refused:
        connect.ConnectorSpec.from_resource(body)
    assert refused.value.field == field
    assert says in refused.value.message
