"""desired_objects builds every object of a cluster, owned by it, valid for Kubernetes 1.30
(kubernetes-validate, strict), with the files and arguments Odradek and ZooKeeper accept, and a
config hash that changes exactly when a pod must restart."""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate
import pytest

from odradek.config.broker import BrokerConfig
from odradek.config.controller import ControllerConfig
from odradek.config.properties import parse_overrides, parse_properties
from odradek_operator import names
from odradek_operator.model import meta
from odradek_operator.model.desired import desired_objects

KUBERNETES_VERSION = "1.30"
IMAGE = "odradek:0.1.0"
HASH = names.CONFIG_HASH_ANNOTATION


def cluster(spec: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekCluster",
        "metadata": {"name": "demo", "namespace": "data", "uid": "0b1c-uid", **metadata},
        "spec": spec or {},
    }


SMALL = {
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
}
EXAMPLES = {
    "defaults": cluster(),
    "three-two-three": cluster(
        {
            "zookeeper": {"replicas": 3},
            "controllers": {"replicas": 2},
            "brokers": {"replicas": 3, "config": {"min.insync.replicas": 2}},
        }
    ),
    "jbod": cluster(
        {
            "image": "registry.example/odradek:1.2",
            "imagePullPolicy": "Always",
            "zookeeper": {"replicas": 5, "storage": {"size": "2Gi", "storageClass": "ssd"}},
            "brokers": {
                "replicas": 4,
                "storage": {
                    "volumes": [
                        {"id": 0, "size": "100Gi", "storageClass": "fast"},
                        {"id": 1, "size": "200Gi"},
                    ],
                    "deleteClaim": True,
                },
                "resources": {
                    "requests": {"cpu": "500m", "memory": "1Gi"},
                    "limits": {"memory": "2Gi"},
                },
                "rack": {"topologyKey": "topology.kubernetes.io/zone"},
            },
            "listeners": {"client": {"port": 19092}, "controlPlane": {"port": 19091}},
            "metrics": {"port": 19645},
        }
    ),
    "one-of-each": cluster(
        {
            "zookeeper": {"replicas": 1},
            "controllers": {"replicas": 1},
            "brokers": {"replicas": 1, "config": SMALL},
        },
        name="tiny",
    ),
}


def build(body: dict[str, Any], image: str = IMAGE) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (o["kind"], o["metadata"]["name"]): o
        for o in desired_objects(body, operator_image_default=image)
    }


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of command and args."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), text)


def container(sts: dict[str, Any]) -> dict[str, Any]:
    (only,) = sts["spec"]["template"]["spec"]["containers"]
    return only


def pod_hash(body: dict[str, Any], kind_name: tuple[str, str], image: str = IMAGE) -> str:
    return build(body, image)[kind_name]["spec"]["template"]["metadata"]["annotations"][HASH]


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_every_object_is_valid_kubernetes_1_30(example):
    for obj in desired_objects(EXAMPLES[example], operator_image_default=IMAGE):
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_every_object_is_labelled_and_owned_by_the_cluster(example):
    body = EXAMPLES[example]
    name = body["metadata"]["name"]
    for obj in desired_objects(body, operator_image_default=IMAGE):
        meta = obj["metadata"]
        assert meta["namespace"] == "data"
        assert names.labels(name).items() <= meta["labels"].items()
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "odradek.io/v1alpha1",
                "kind": "OdradekCluster",
                "name": name,
                "uid": "0b1c-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]


def test_a_three_two_three_cluster_has_the_briefs_objects_in_apply_order():
    objects = desired_objects(EXAMPLES["three-two-three"], operator_image_default=IMAGE)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ServiceAccount", "demo-odradek"),
        ("ConfigMap", "demo-zookeeper-config"),
        ("Service", "demo-zookeeper-nodes"),
        ("Service", "demo-zookeeper-client"),
        ("PodDisruptionBudget", "demo-zookeeper"),
        ("NetworkPolicy", "demo-zookeeper-network-policy"),
        ("StatefulSet", "demo-zookeeper"),
        ("ConfigMap", "demo-controller-config"),
        ("Service", "demo-controller-nodes"),
        ("NetworkPolicy", "demo-controller-network-policy"),
        ("StatefulSet", "demo-controller"),
        ("ConfigMap", "demo-broker-config"),
        ("Service", "demo-broker-nodes"),
        ("Service", "demo-bootstrap"),
        ("PodDisruptionBudget", "demo-broker"),
        ("NetworkPolicy", "demo-broker-network-policy"),
        ("StatefulSet", "demo-broker"),
    ]
    replicas = {
        o["metadata"]["name"]: o["spec"]["replicas"]
        for o in objects
        if "replicas" in o.get("spec", {})
    }
    assert replicas == {"demo-zookeeper": 3, "demo-controller": 2, "demo-broker": 3}


def test_statefulsets_restart_only_on_the_operators_say_and_select_their_component():
    for kind_name, obj in build(EXAMPLES["defaults"]).items():
        if kind_name[0] != "StatefulSet":
            continue
        spec = obj["spec"]
        component = spec["template"]["metadata"]["labels"][names.COMPONENT_LABEL]
        assert spec["updateStrategy"] == {"type": "OnDelete"}
        assert spec["podManagementPolicy"] == "Parallel"
        assert spec["serviceName"] == f"demo-{component}-nodes"
        assert (
            spec["selector"]["matchLabels"].items()
            <= spec["template"]["metadata"]["labels"].items()
        )
        pod = spec["template"]["spec"]
        assert pod["serviceAccountName"] == "demo-odradek"
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["automountServiceAccountToken"] is False
        assert pod["enableServiceLinks"] is False
        env = {
            e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
            for e in container(obj)["env"]
            if "valueFrom" in e
        }
        assert env == {
            "POD_INDEX": "metadata.labels['apps.kubernetes.io/pod-index']",
            "POD_IP": "status.podIP",
            "POD_NAME": "metadata.name",
            "POD_NAMESPACE": "metadata.namespace",
        }


# --- ZooKeeper ----------------------------------------------------------------------------------


def test_zoo_cfg_lists_the_ensemble_with_each_servers_own_client_address():
    objects = build(EXAMPLES["three-two-three"])
    cfg = objects[("ConfigMap", "demo-zookeeper-config")]["data"]["zoo.cfg"]
    servers = [line for line in cfg.splitlines() if line.startswith("server.")]
    host = "demo-zookeeper-{}.demo-zookeeper-nodes.data.svc.cluster.local"
    assert servers == [
        f"server.{n + 1}={host.format(n)}:2888:3888;{host.format(n)}:2181" for n in range(3)
    ]
    assert "dataDir=/data" in cfg.splitlines()
    assert not any(line.startswith("clientPort") for line in cfg.splitlines())


def test_zookeeper_writes_its_myid_then_runs_in_the_foreground():
    sts = build(EXAMPLES["defaults"])[("StatefulSet", "demo-zookeeper")]
    zk = container(sts)
    assert zk["image"] == "zookeeper:3.8"
    assert zk["command"][:2] == ["sh", "-c"]
    assert zk["command"][2] == (
        'expr "$POD_INDEX" + 1 > /data/myid && exec zkServer.sh start-foreground'
    )
    assert "$(" not in zk["command"][2]  # nothing for Kubernetes' expansion to touch
    assert zk["readinessProbe"]["tcpSocket"] == {"port": "client"}
    mounts = {m["name"]: m["mountPath"] for m in zk["volumeMounts"]}
    assert mounts == {
        "config": "/conf",
        "data": "/data",
        "tmp": "/tmp",
        "logs": "/logs",  # the image's ZOO_LOG_DIR and ZOO_DATA_LOG_DIR, under a read-only root
        "datalog": "/datalog",
    }
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"


@pytest.mark.parametrize(
    ("limit", "heap"), [(None, None), ("1Gi", "512"), ("2G", "953"), ("100Mi", "64")]
)
def test_zookeepers_heap_fits_under_its_memory_limit(limit, heap):
    resources = {"limits": {"memory": limit}} if limit else {}
    sts = build(cluster({"zookeeper": {"resources": resources}}))[("StatefulSet", "demo-zookeeper")]
    env = {e["name"]: e.get("value") for e in container(sts)["env"]}
    assert env.get("ZK_SERVER_HEAP") == heap


def test_quantities_in_bytes():
    assert [meta.quantity_bytes(q) for q in ("1Gi", "512Mi", "1G", "1e3", "1500m", "+2k", "7")] == [
        2**30,
        2**29,
        10**9,
        1000,
        1,
        2000,
        7,
    ]


# --- controllers --------------------------------------------------------------------------------


def test_each_controller_reads_its_own_file_with_id_1001_plus_its_ordinal():
    objects = build(EXAMPLES["three-two-three"])
    files = objects[("ConfigMap", "demo-controller-config")]["data"]
    assert sorted(files) == ["controller-0.properties", "controller-1.properties"]
    args = container(objects[("StatefulSet", "demo-controller")])["args"]
    for ordinal in range(2):
        env = {"POD_INDEX": str(ordinal), "POD_IP": f"10.0.0.{ordinal + 1}"}
        argv = [expand(a, env) for a in args]
        assert argv[:3] == [
            "controller",
            "--config",
            f"/etc/odradek/controller-{ordinal}.properties",
        ]
        props = {p.key: p.value for p in parse_properties(files[argv[2].rsplit("/", 1)[1]])}
        overrides = parse_overrides(argv[i + 1] for i, a in enumerate(argv) if a == "--override")
        config = ControllerConfig.from_properties({**props, **overrides})
        assert config.controller_id == 1001 + ordinal
        assert str(config.listener) == f"CONTROLLER://10.0.0.{ordinal + 1}:9093"
        assert (
            config.zookeeper_connect == "demo-zookeeper-client.data.svc.cluster.local:2181/odradek"
        )
        assert config.control_plane_listener_name == "CONTROL_PLANE"
        assert str(config.odradek_admin_listener) == f"10.0.0.{ordinal + 1}:9645"


# --- brokers ------------------------------------------------------------------------------------


def broker_config(body: dict[str, Any], ordinal: int) -> BrokerConfig:
    """What `odradek broker` reads in pod ``ordinal``: the ConfigMap's file and the overrides."""
    objects = build(body)
    name = body["metadata"]["name"]
    text = objects[("ConfigMap", f"{name}-broker-config")]["data"]["broker.properties"]
    args = container(objects[("StatefulSet", f"{name}-broker")])["args"]
    argv = [expand(a, {"POD_INDEX": str(ordinal), "POD_IP": f"10.1.0.{ordinal + 1}"}) for a in args]
    assert argv[:3] == ["broker", "--config", "/etc/odradek/broker.properties"]
    props = {p.key: p.value for p in parse_properties(text)}
    overrides = parse_overrides(argv[i + 1] for i, a in enumerate(argv) if a == "--override")
    return BrokerConfig.from_properties({**props, **overrides})


def test_a_broker_reads_its_id_listeners_and_log_dirs_from_its_pod():
    config = broker_config(EXAMPLES["three-two-three"], 2)
    assert config.broker_id == 2
    ip = "10.1.0.3"
    assert [str(e) for e in config.listeners] == [
        f"PLAINTEXT://{ip}:9092",
        f"CONTROL_PLANE://{ip}:9091",
        f"INTERNAL://{ip}:9094",
    ]
    assert [str(e) for e in config.effective_advertised_listeners] == [
        f"PLAINTEXT://{ip}:9092",
        f"CONTROL_PLANE://{ip}:9091",
        f"INTERNAL://{ip}:9094",
    ]
    # followers fetch over INTERNAL, apart from the clients (issue 23)
    assert config.effective_inter_broker_listener_name == "INTERNAL"
    assert config.effective_log_dirs == ("/var/lib/odradek/data-0/log",)
    assert config.zookeeper_connect == "demo-zookeeper-client.data.svc.cluster.local:2181/odradek"
    assert str(config.odradek_admin_listener) == f"{ip}:9645"
    assert (config.default_replication_factor, config.min_insync_replicas) == (3, 2)


def test_the_users_config_is_merged_over_the_operators_defaults():
    body = cluster({"brokers": {"config": {"min.insync.replicas": 1, "log.retention.ms": 3600000}}})
    config = broker_config(body, 0)
    assert config.min_insync_replicas == 1  # the user's
    assert config.default_replication_factor == 3  # the operator's
    assert config.effective_log_retention_ms == 3600000


def test_a_rack_cluster_reads_broker_rack_from_its_pods_annotation_file():
    body = EXAMPLES["jbod"]
    sts = build(body)[("StatefulSet", "demo-broker")]
    pod = sts["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "downwardAPI" in v]
    assert volume["downwardAPI"]["items"] == [
        {
            "path": "rack",
            "fieldRef": {
                "apiVersion": "v1",
                "fieldPath": "metadata.annotations['odradek.io/rack']",
            },
        }
    ]
    mounts = {m["name"]: m["mountPath"] for m in container(sts)["volumeMounts"]}
    assert mounts[volume["name"]] == "/etc/odradek-pod"
    config = broker_config(body, 0)
    assert config.odradek_broker_rack_file == "/etc/odradek-pod/rack"
    assert config.broker_rack is None  # until the broker reads the file
    assert broker_config(EXAMPLES["three-two-three"], 0).odradek_broker_rack_file is None


def test_enabling_rack_restarts_the_brokers_only():
    plain = EXAMPLES["three-two-three"]
    rack = copy.deepcopy(plain)
    rack["spec"]["brokers"]["rack"] = {"topologyKey": "topology.kubernetes.io/zone"}
    assert pod_hash(plain, ("StatefulSet", "demo-broker")) != pod_hash(
        rack, ("StatefulSet", "demo-broker")
    )
    for other in ("demo-zookeeper", "demo-controller"):
        assert pod_hash(plain, ("StatefulSet", other)) == pod_hash(rack, ("StatefulSet", other))


def test_a_jbod_cluster_has_one_claim_and_one_log_dir_per_volume():
    body = EXAMPLES["jbod"]
    sts = build(body)[("StatefulSet", "demo-broker")]
    claims = sts["spec"]["volumeClaimTemplates"]
    assert [
        (
            c["metadata"]["name"],
            c["spec"]["resources"]["requests"]["storage"],
            c["spec"].get("storageClassName"),
        )
        for c in claims
    ] == [
        ("data-0", "100Gi", "fast"),
        ("data-1", "200Gi", None),
    ]
    mounts = {m["name"]: m["mountPath"] for m in container(sts)["volumeMounts"]}
    assert mounts == {
        "config": "/etc/odradek",
        "data-0": "/var/lib/odradek/data-0",
        "data-1": "/var/lib/odradek/data-1",
        "pod-info": "/etc/odradek-pod",  # the rack file
        "tmp": "/tmp",
    }
    config = broker_config(body, 3)
    assert config.effective_log_dirs == (
        "/var/lib/odradek/data-0/log",
        "/var/lib/odradek/data-1/log",
    )
    assert config.broker_id == 3
    assert [str(e) for e in config.listeners] == [
        "PLAINTEXT://10.1.0.4:19092",
        "CONTROL_PLANE://10.1.0.4:19091",
        "INTERNAL://10.1.0.4:9094",
    ]
    assert container(sts)["image"] == "registry.example/odradek:1.2"
    assert container(sts)["resources"] == {
        "limits": {"memory": "2Gi"},
        "requests": {"cpu": "500m", "memory": "1Gi"},
    }


@pytest.mark.parametrize(("delete_claim", "policy"), [(False, "Retain"), (True, "Delete")])
def test_claims_are_kept_unless_delete_claim(delete_claim, policy):
    body = cluster({"brokers": {"storage": {"deleteClaim": delete_claim}}})
    objects = build(body)
    brokers = objects[("StatefulSet", "demo-broker")]["spec"]
    assert brokers["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": policy,
        "whenScaled": policy,
    }
    zookeeper = objects[("StatefulSet", "demo-zookeeper")]["spec"]
    assert zookeeper["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": policy,
        "whenScaled": "Retain",
    }
    assert (
        "persistentVolumeClaimRetentionPolicy"
        not in objects[("StatefulSet", "demo-controller")]["spec"]
    )


def grace_s(body: dict[str, Any]) -> int:
    pod = build(body)[("StatefulSet", "demo-broker")]["spec"]["template"]["spec"]
    return pod["terminationGracePeriodSeconds"]


def test_the_grace_period_outlasts_a_controlled_shutdown():
    assert grace_s(cluster()) == 3 * (30 + 5) + 30
    slow = {"controlled.shutdown.max.retries": 10, "controlled.shutdown.retry.backoff.ms": 1000}
    assert grace_s(cluster({"brokers": {"config": slow}})) == 10 * 31 + 30
    assert grace_s(cluster({"brokers": {"config": {"controlled.shutdown.enable": False}}})) == 30


def test_brokers_are_probed_on_the_admin_listener():
    broker = container(build(EXAMPLES["defaults"])[("StatefulSet", "demo-broker")])
    assert broker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert broker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    startup = broker["startupProbe"]
    assert startup["httpGet"] == broker["livenessProbe"]["httpGet"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 30 * 60  # log recovery
    assert {p["name"]: p["containerPort"] for p in broker["ports"]} == {
        "client": 9092,
        "control-plane": 9091,
        "internal": 9094,
        "metrics": 9645,
    }


# --- Services, budgets --------------------------------------------------------------------------


def test_services():
    objects = build(EXAMPLES["defaults"])
    for component in names.Component:
        headless = objects[("Service", f"demo-{component}-nodes")]["spec"]
        assert headless["clusterIP"] == "None"
        assert headless["publishNotReadyAddresses"] is True
        assert headless["selector"] == names.selector_labels("demo", component)
    bootstrap = objects[("Service", "demo-bootstrap")]["spec"]
    assert bootstrap["selector"] == names.selector_labels("demo", names.Component.BROKER)
    assert bootstrap["ports"] == [
        {"name": "client", "port": 9092, "targetPort": "client", "protocol": "TCP"}
    ]
    zk = objects[("Service", "demo-zookeeper-client")]["spec"]
    assert zk["ports"][0]["port"] == 2181 and "publishNotReadyAddresses" not in zk


def test_budgets_allow_one_pod_down():
    objects = build(EXAMPLES["defaults"])
    for component in ("zookeeper", "broker"):
        pdb = objects[("PodDisruptionBudget", f"demo-{component}")]["spec"]
        assert pdb["maxUnavailable"] == 1
        assert pdb["selector"]["matchLabels"][names.COMPONENT_LABEL] == component
    assert ("PodDisruptionBudget", "demo-controller") not in objects


# --- the config hash ----------------------------------------------------------------------------

BROKERS = ("StatefulSet", "demo-broker")
CONTROLLERS = ("StatefulSet", "demo-controller")
ZOOKEEPER = ("StatefulSet", "demo-zookeeper")


def changed(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    body = copy.deepcopy(base or EXAMPLES["three-two-three"])
    *parents, last = path.split(".")
    node = body
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return body


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.brokers.config", {"min.insync.replicas": 1}),
        ("spec.image", "odradek:0.2.0"),
        ("spec.imagePullPolicy", "Always"),
        ("spec.brokers.resources", {"limits": {"memory": "4Gi"}}),
        ("spec.brokers.storage", {"volumes": [{"id": 0}, {"id": 1}]}),
        ("spec.brokers.storage", {"volumes": [{"id": 0, "size": "20Gi"}]}),
        ("spec.listeners", {"client": {"port": 9095}}),
        ("metadata.annotations", {"odradek.io/restart": "1"}),
    ],
)
def test_the_broker_hash_changes_with_what_a_restart_applies(path, value):
    assert pod_hash(changed(path, value), BROKERS) != pod_hash(EXAMPLES["three-two-three"], BROKERS)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.brokers.replicas", 5),
        ("spec.controllers.replicas", 3),
        ("spec.zookeeper.replicas", 5),
        ("spec.controllers.resources", {"limits": {"memory": "4Gi"}}),
        ("spec.brokers.storage", {"volumes": [{"id": 0}], "deleteClaim": True}),
        ("metadata.labels", {"team": "data"}),
    ],
)
def test_the_broker_hash_ignores_what_needs_no_restart(path, value):
    assert pod_hash(changed(path, value), BROKERS) == pod_hash(EXAMPLES["three-two-three"], BROKERS)


def test_the_default_image_is_part_of_the_hash_unless_the_spec_names_one():
    base = EXAMPLES["three-two-three"]
    assert pod_hash(base, BROKERS, "odradek:0.2.0") != pod_hash(base, BROKERS)
    pinned = changed("spec.image", "odradek:0.1.0")
    assert pod_hash(pinned, BROKERS, "odradek:0.2.0") == pod_hash(pinned, BROKERS)


def test_the_controller_hash_follows_shared_config_and_image_not_the_number_of_controllers():
    base = EXAMPLES["three-two-three"]
    assert pod_hash(changed("spec.controllers.replicas", 3), CONTROLLERS) == pod_hash(
        base, CONTROLLERS
    )
    assert pod_hash(changed("spec.brokers.replicas", 5), CONTROLLERS) == pod_hash(base, CONTROLLERS)
    assert pod_hash(changed("spec.image", "odradek:0.2.0"), CONTROLLERS) != pod_hash(
        base, CONTROLLERS
    )
    rebalance = changed("spec.brokers.config", {"auto.leader.rebalance.enable": False})
    assert pod_hash(rebalance, CONTROLLERS) != pod_hash(base, CONTROLLERS)
    assert pod_hash(rebalance, BROKERS) == pod_hash(base, BROKERS)  # a controller-only key
    resources = changed("spec.controllers.resources", {"requests": {"cpu": "1"}})
    assert pod_hash(resources, CONTROLLERS) != pod_hash(base, CONTROLLERS)


def test_the_zookeeper_hash_follows_its_ensemble_not_the_brokers():
    base = EXAMPLES["three-two-three"]
    assert pod_hash(changed("spec.zookeeper.replicas", 5), ZOOKEEPER) != pod_hash(base, ZOOKEEPER)
    assert pod_hash(changed("spec.zookeeper.image", "zookeeper:3.9"), ZOOKEEPER) != pod_hash(
        base, ZOOKEEPER
    )
    assert pod_hash(changed("spec.brokers.replicas", 5), ZOOKEEPER) == pod_hash(base, ZOOKEEPER)
    assert pod_hash(changed("spec.image", "odradek:0.2.0"), ZOOKEEPER) == pod_hash(base, ZOOKEEPER)
