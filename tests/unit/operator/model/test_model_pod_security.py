"""Every pod the operator builds is hardened: non-root, no capabilities, seccomp, a read-only
root with emptyDirs for what it writes, default resource requests, spread over zones with racks."""

from __future__ import annotations

from typing import Any

import pytest

from odradek_operator import names
from odradek_operator.model import connect
from odradek_operator.model.desired import desired_objects
from odradek_operator.model.spec.resources import DEFAULT_REQUESTS

COMPONENTS = ("zookeeper", "controller", "broker")


def body(**spec: Any) -> dict[str, Any]:
    brokers = {"replicas": 3, "storage": {"volumes": [{"id": 0}]}, **spec.pop("brokers", {})}
    return {
        "metadata": {"name": "demo", "namespace": "data", "uid": "u1"},
        "spec": {"brokers": brokers, **spec},
    }


def pod_specs(**spec: Any) -> dict[str, dict[str, Any]]:
    objs = desired_objects(body(**spec), operator_image_default="odradek:test")
    out = {
        o["spec"]["template"]["metadata"]["labels"][names.COMPONENT_LABEL]: o["spec"]["template"][
            "spec"
        ]
        for o in objs
        if o["kind"] == "StatefulSet"
    }
    connect_body = {
        "metadata": {"name": "sync", "namespace": "data", "uid": "u2"},
        "spec": {"replicas": 1, "bootstrapServers": "demo-bootstrap:9092"},
    }
    parsed = connect.ConnectSpec.from_resource(connect_body)
    (deployment,) = [
        o
        for o in connect.desired_objects(
            parsed, "odradek:test", "b:9092", parsed.security.for_cluster(None)
        )
        if o["kind"] == "Deployment"
    ]
    out["connect"] = deployment["spec"]["template"]["spec"]
    return out


def test_every_container_runs_restricted_with_a_read_only_root():
    for component, pod in pod_specs().items():
        assert pod["securityContext"]["runAsNonRoot"] is True, component
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, component
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}


def test_what_a_container_writes_is_a_volume_and_tmp_an_empty_dir():
    for component, pod in pod_specs().items():
        volumes = {v["name"]: v for v in pod["volumes"]}
        (container,) = pod["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert volumes[mounts["/tmp"]]["emptyDir"]["sizeLimit"], component
        for mount in container["volumeMounts"]:
            # every mount is a volume of the pod or a claim template of its StatefulSet
            assert mount["name"] in volumes or mount["name"].startswith("data"), mount
    zookeeper = pod_specs()["zookeeper"]
    (container,) = zookeeper["containers"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/data", "/logs", "/datalog", "/tmp"} <= mounts


def test_every_container_requests_the_documented_defaults():
    for component, pod in pod_specs().items():
        (container,) = pod["containers"]
        assert container["resources"] == {"requests": dict(DEFAULT_REQUESTS[component])}


def test_the_users_resources_win_and_a_limit_alone_takes_no_default_request():
    pods = pod_specs(
        brokers={"resources": {"requests": {"cpu": "2"}, "limits": {"memory": "512Mi"}}},
        zookeeper={"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
    )
    (broker,) = pods["broker"]["containers"]
    # Kubernetes takes the memory limit as its request: a default 1Gi would exceed it.
    assert broker["resources"] == {"requests": {"cpu": "2"}, "limits": {"memory": "512Mi"}}
    (zookeeper,) = pods["zookeeper"]["containers"]
    assert zookeeper["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"}}


def test_pods_spread_over_hosts_and_with_racks_over_the_rack_key_too():
    for component, pod in pod_specs().items():
        if component == "connect":
            continue
        (spread,) = pod["topologySpreadConstraints"]
        assert spread["topologyKey"] == "kubernetes.io/hostname"
    zone = "topology.kubernetes.io/zone"
    for component, pod in pod_specs(brokers={"rack": {"topologyKey": zone}}).items():
        if component == "connect":
            continue
        keys = {c["topologyKey"]: c for c in pod["topologySpreadConstraints"]}
        assert set(keys) == {"kubernetes.io/hostname", zone}, component
        assert keys[zone]["whenUnsatisfiable"] == "ScheduleAnyway"
        assert keys[zone]["labelSelector"]["matchLabels"] == names.selector_labels(
            "demo", names.Component(component)
        )


@pytest.mark.parametrize("component", COMPONENTS)
def test_a_spread_change_alone_restarts_nothing(component):
    def hash_of(**spec):
        objs = desired_objects(body(**spec), operator_image_default="odradek:test")
        (sts,) = [
            o for o in objs if o["kind"] == "StatefulSet" and component in o["metadata"]["name"]
        ]
        return sts["spec"]["template"]["metadata"]["annotations"][names.CONFIG_HASH_ANNOTATION]

    with_rack = hash_of(brokers={"rack": {"topologyKey": "topology.kubernetes.io/zone"}})
    # brokers restart for their rack file; ZooKeeper and controllers only get a new template
    assert (with_rack != hash_of()) is (component == "broker")
