"""spec.py reads a cluster or topic resource once, with the contract's defaults, and refuses
what the operator cannot honour with a SpecError naming the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from odradek.config.broker import BrokerConfig
from odradek_operator.model.spec.brokers import BROKER_CONFIG_DEFAULTS, OPERATOR_OWNED_BROKER_KEYS
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.readers import SpecError
from odradek_operator.model.spec.topic import TopicSpec, topic_state


def cluster(spec: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekCluster",
        "metadata": {"name": "demo", "namespace": "data", "uid": "u-1", **metadata},
        "spec": spec or {},
    }


def brokers(**fields: Any) -> dict[str, Any]:
    return cluster({"brokers": fields})


def refused(body: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as info:
        ClusterSpec.from_resource(body)
    return info.value


BRIEF_EXAMPLE = cluster(
    {
        "image": "odradek:0.1.0",
        "imagePullPolicy": "IfNotPresent",
        "zookeeper": {
            "replicas": 3,
            "image": "zookeeper:3.8",
            "storage": {"size": "1Gi", "storageClass": None},
            "resources": {},
        },
        "controllers": {"replicas": 2, "resources": {}},
        "brokers": {
            "replicas": 3,
            "storage": {
                "volumes": [{"id": 0, "size": "10Gi", "storageClass": None}],
                "deleteClaim": False,
            },
            "resources": {},
            "config": {"min.insync.replicas": 2, "default.replication.factor": 3},
        },
        "controlPlane": {"port": 9091},
        "metrics": {"port": 9645},
    }
)


def test_an_empty_spec_gets_the_contract_defaults():
    spec = ClusterSpec.from_resource(cluster())
    assert (spec.name, spec.namespace, spec.uid) == ("demo", "data", "u-1")
    assert spec.image is None and spec.image_pull_policy == "IfNotPresent"
    assert (spec.zookeeper.replicas, spec.zookeeper.image) == (3, "zookeeper:3.8")
    assert (spec.zookeeper.storage.size, spec.zookeeper.storage.storage_class) == ("1Gi", None)
    assert spec.controllers.replicas == 2
    assert spec.brokers.replicas == 3
    assert [(v.id, v.size, v.storage_class) for v in spec.brokers.volumes] == [(0, "10Gi", None)]
    assert spec.brokers.delete_claim is False
    assert spec.brokers.config == {}
    assert spec.brokers.properties() == dict(BROKER_CONFIG_DEFAULTS)
    assert (spec.ports.client, spec.ports.control_plane, spec.ports.metrics) == (9092, 9091, 9645)
    assert spec.restart == ""


def test_the_briefs_example_reads_as_written():
    spec = ClusterSpec.from_resource(BRIEF_EXAMPLE)
    assert spec.image == "odradek:0.1.0"
    assert spec.brokers.config == {"min.insync.replicas": "2", "default.replication.factor": "3"}


def test_nulls_take_the_defaults_where_the_crd_allows_them():
    spec = ClusterSpec.from_resource(
        cluster({"image": None, "zookeeper": {"image": None, "storage": {"storageClass": None}}})
    )
    assert (spec.image, spec.zookeeper.image) == (None, "zookeeper:3.8")
    assert (
        ClusterSpec.from_resource(cluster({"controllers": {"replicas": 7}})).controllers.replicas
        == 7
    )
    assert refused(cluster({"controllers": {"replicas": 8}})).field == "spec.controllers.replicas"
    error = refused(brokers(config={"log.retention.ms": None}))
    assert error.field == "spec.brokers.config[log.retention.ms]" and "null" in error.message


def test_the_restart_annotation_is_read():
    body = cluster(annotations={"odradek.io/restart": "2026-11-26T04:00"})
    assert ClusterSpec.from_resource(body).restart == "2026-11-26T04:00"


def test_config_values_are_parsed_as_an_override_would_be_and_printed_as_kafka_does():
    spec = ClusterSpec.from_resource(
        brokers(
            config={
                "min.insync.replicas": " 2 ",
                "log.retention.ms": 604800000,
                "delete.topic.enable": False,
                "log.cleaner.min.cleanable.ratio": 0.25,
                "compression.type": "zstd",
            }
        )
    )
    assert spec.brokers.config == {
        "min.insync.replicas": "2",
        "log.retention.ms": "604800000",
        "delete.topic.enable": "false",
        "log.cleaner.min.cleanable.ratio": "0.25",
        "compression.type": "zstd",
    }
    assert spec.brokers.properties()["default.replication.factor"] == "3"  # default kept


@pytest.mark.parametrize("key", sorted(OPERATOR_OWNED_BROKER_KEYS))
def test_keys_the_operator_owns_are_refused(key):
    error = refused(brokers(config={key: "x"}))
    assert error.field == f"spec.brokers.config[{key}]"
    assert "set by the operator" in error.message


def test_an_unknown_key_is_refused_with_a_guess():
    error = refused(brokers(config={"min.insync.replica": 2}))
    assert error.field == "spec.brokers.config[min.insync.replica]"
    assert "did you mean min.insync.replicas?" in error.message


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("min.insync.replicas", 0, "Value must be at least 1"),
        ("min.insync.replicas", "two", "Not a number of type INT"),
        ("delete.topic.enable", "yes", "either true or false"),
        ("compression.type", "brotli", "String must be one of"),
        ("log.retention.ms", [1], "expected a string, number or boolean"),
    ],
)
def test_a_bad_value_is_refused_naming_its_key(key, value, words):
    error = refused(brokers(config={key: value}))
    assert error.field == f"spec.brokers.config[{key}]"
    assert words in error.message


def test_rules_between_keys_are_checked_as_a_broker_checks_them_at_start():
    error = refused(brokers(config={"replica.fetch.wait.max.ms": 60000}))
    assert error.field == "spec.brokers.config"
    assert "replica.lag.time.max.ms" in error.message
    config = {"transaction.state.log.replication.factor": 2, "transaction.state.log.min.isr": 3}
    assert "transaction.state.log.min.isr (3)" in refused(brokers(config=config)).message


def test_a_replication_factor_above_the_broker_count_is_refused():
    error = refused(brokers(replicas=1))
    assert error.field == "spec.brokers.config[default.replication.factor]"
    assert "the operator's default" in error.message and "at most 1" in error.message
    small = {
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
    }
    assert ClusterSpec.from_resource(brokers(replicas=1, config=small)).brokers.replicas == 1
    error = refused(brokers(replicas=2, config={"default.replication.factor": 2}))
    assert error.field == "spec.brokers.config[offsets.topic.replication.factor]"


def test_controller_keys_go_to_the_controllers_and_shared_ones_to_both():
    spec = ClusterSpec.from_resource(
        brokers(
            config={
                "auto.leader.rebalance.enable": False,
                "unclean.leader.election.enable": True,
                "zookeeper.session.timeout.ms": 12000,
            }
        )
    )
    assert "auto.leader.rebalance.enable" not in spec.brokers.properties()
    assert spec.brokers.properties()["unclean.leader.election.enable"] == "true"
    assert spec.brokers.controller_properties() == {
        "auto.leader.rebalance.enable": "false",
        "unclean.leader.election.enable": "true",
        "zookeeper.session.timeout.ms": "12000",
    }
    error = refused(brokers(config={"leader.imbalance.per.broker.percentage": 101}))
    assert error.field == "spec.brokers.config[leader.imbalance.per.broker.percentage]"


def test_rack_names_a_node_label():
    spec = ClusterSpec.from_resource(brokers(rack={"topologyKey": "topology.kubernetes.io/zone"}))
    assert spec.brokers.rack_topology_key == "topology.kubernetes.io/zone"
    assert ClusterSpec.from_resource(brokers()).brokers.rack_topology_key is None
    assert refused(brokers(rack={})).field == "spec.brokers.rack.topologyKey"
    assert refused(brokers(rack={"topologyKey": "no spaces"})).field == (
        "spec.brokers.rack.topologyKey"
    )
    assert refused(brokers(rack={"topologyKey": "zone", "x": 1})).field.startswith(
        "spec.brokers.rack"
    )
    error = refused(brokers(config={"odradek.broker.rack.file": "/tmp/rack"}))
    assert "odradek.broker.rack.file" in error.field


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"zookeeper": {"replicas": 2}}, "spec.zookeeper.replicas"),
        ({"zookeeper": {"replicas": 7}}, "spec.zookeeper.replicas"),
        ({"zookeeper": {"storage": {"size": "lots"}}}, "spec.zookeeper.storage.size"),
        ({"controllers": {"replicas": 0}}, "spec.controllers.replicas"),
        ({"controllers": {"replicas": True}}, "spec.controllers.replicas"),
        ({"brokers": {"replicas": "3"}}, "spec.brokers.replicas"),
        ({"brokers": {"replicas": 1002}}, "spec.brokers.replicas"),
        ({"brokers": {"storage": {"volumes": []}}}, "spec.brokers.storage.volumes"),
        (
            {"brokers": {"storage": {"volumes": [{"id": 0}, {"id": 0}]}}},
            "spec.brokers.storage.volumes[1].id",
        ),
        (
            {"brokers": {"storage": {"volumes": [{"size": "1Gi"}]}}},
            "spec.brokers.storage.volumes[0].id",
        ),
        ({"brokers": {"storage": {"deleteClaim": "yes"}}}, "spec.brokers.storage.deleteClaim"),
        (
            {"brokers": {"resources": {"limits": {"memory": "1 GB"}}}},
            "spec.brokers.resources.limits.memory",
        ),
        ({"brokers": {"resources": {"limit": {}}}}, "spec.brokers.resources.limit"),
        ({"imagePullPolicy": "Sometimes"}, "spec.imagePullPolicy"),
        ({"image": ""}, "spec.image"),
        ({"listeners": {"client": {"port": 70000}}}, "spec.listeners.client.port"),
        ({"metrics": {"port": 9092}}, "spec.metrics.port"),
        ({"listeners": {"controlPlane": {"port": 9093}}}, "spec.listeners.controlPlane.port"),
        ({"listeners": {"client": {"port": 9094}}}, "spec.listeners.client.port"),  # INTERNAL
        ({"controlPlane": {"port": 9093}}, "spec.controlPlane.port"),
        ({"listeners": [{"name": "tls", "port": 9094}]}, "spec.listeners[0].port"),
        ({"listeners": []}, "spec.listeners"),
        ({"listeners": [{"name": "Tls", "port": 9092}]}, "spec.listeners[0].name"),
        ({"listeners": [{"name": "internal", "port": 9092}]}, "spec.listeners[0].name"),
        (
            {"listeners": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]},
            "spec.listeners[1].name",
        ),
        (
            {"listeners": [{"name": "a", "port": 9000}, {"name": "b", "port": 9000}]},
            "spec.listeners[1].port",
        ),
        ({"listeners": [{"name": "a", "port": 9000, "type": "route"}]}, "spec.listeners[0].type"),
        (
            {"listeners": [{"name": "a", "port": 9000, "authentication": {"type": "tls"}}]},
            "spec.listeners[0].authentication.type",
        ),
        (
            {"listeners": [{"name": "a", "port": 9000, "authentication": {"type": "plain"}}]},
            "spec.listeners[0].authentication.type",
        ),
        ({"authorization": {"type": "simple"}}, "spec.authorization"),
        (
            {
                "listeners": [{"name": "a", "port": 9000, "tls": True}],
                "authorization": {"type": "opa"},
            },
            "spec.authorization.type",
        ),
        (
            {
                "listeners": [{"name": "a", "port": 9000, "tls": True}],
                "authorization": {"type": "simple", "superUsers": ["alice"]},
            },
            "spec.authorization.superUsers[0]",
        ),
        ({"clusterCa": {"validityDays": 30, "renewalDays": 30}}, "spec.clusterCa.renewalDays"),
        ({"clientsCa": {"validityDays": 0}}, "spec.clientsCa.validityDays"),
        (
            {"clusterCa": {"generateCertificateAuthority": "no"}},
            "spec.clusterCa.generateCertificateAuthority",
        ),
        (
            {"brokers": {"config": {"ssl.client.auth": "required"}}},
            "spec.brokers.config[ssl.client.auth]",
        ),
        ({"brokers": {"config": {"super.users": "User:x"}}}, "spec.brokers.config[super.users]"),
        ({"connect": {}}, "spec.connect"),
    ],
)
def test_bad_fields_are_refused_by_name(spec, field):
    assert refused(cluster(spec)).field == field


@pytest.mark.parametrize("name", ["Demo", "9demo", "demo_1", "a" * 41, ""])
def test_a_name_that_would_make_invalid_object_names_is_refused(name):
    assert refused(cluster(name=name)).field == "metadata.name"


def test_volumes_are_ordered_by_id():
    spec = ClusterSpec.from_resource(
        brokers(storage={"volumes": [{"id": 3, "size": "5Gi"}, {"id": 1, "storageClass": "fast"}]})
    )
    assert [(v.id, v.size, v.storage_class) for v in spec.brokers.volumes] == [
        (1, "10Gi", "fast"),
        (3, "5Gi", None),
    ]
    assert spec.brokers.log_dirs == "/var/lib/odradek/data-1/log,/var/lib/odradek/data-3/log"


def test_the_checked_properties_are_what_a_broker_accepts():
    spec = ClusterSpec.from_resource(BRIEF_EXAMPLE)
    props = {
        **spec.brokers.properties(),
        "broker.id": "0",
        "zookeeper.connect": "zk:2181/odradek",
        "log.dirs": spec.brokers.log_dirs,
    }
    assert BrokerConfig.from_properties(props).min_insync_replicas == 2


# --- topics -------------------------------------------------------------------------------------


def topic(spec: dict[str, Any], name: str = "orders") -> dict[str, Any]:
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekTopic",
        "metadata": {"name": name, "namespace": "data", "labels": {"odradek.io/cluster": "demo"}},
        "spec": spec,
    }


TOPIC = {
    "cluster": "demo",
    "partitions": 6,
    "replicationFactor": 3,
    "config": {"retention.ms": "604800000", "cleanup.policy": "delete"},
}


def test_a_topic_reads_as_written_and_takes_its_name_from_metadata():
    spec = topic_state(topic(TOPIC))
    assert spec == TopicSpec(
        name="orders",
        namespace="data",
        cluster="demo",
        topic_name="orders",
        partitions=6,
        replication_factor=3,
        config={"retention.ms": "604800000", "cleanup.policy": "delete"},
    )
    assert spec.topic_config().retention_ms == 604800000


def test_topic_name_may_be_one_kubernetes_refuses():
    spec = topic_state(topic({**TOPIC, "topicName": "Orders_V2"}, name="orders-v2"))
    assert spec.topic_name == "Orders_V2"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cluster": None}, "spec.cluster"),
        ({"partitions": None}, "spec.partitions"),
        ({"partitions": 0}, "spec.partitions"),
        ({"replicationFactor": None}, "spec.replicationFactor"),
        ({"topicName": "a/b"}, "spec.topicName"),
        ({"topicName": ".."}, "spec.topicName"),
        ({"topicName": "x" * 250}, "spec.topicName"),
        ({"config": {"retention.mss": 1}}, "spec.config[retention.mss]"),
        ({"config": {"cleanup.policy": "archive"}}, "spec.config[cleanup.policy]"),
        (
            {"config": {"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5}},
            "spec.config",
        ),
        ({"retention": 1}, "spec.retention"),
    ],
)
def test_a_bad_topic_is_refused_by_field(change, field):
    spec = copy.deepcopy(TOPIC)
    for key, value in change.items():
        if value is None:
            spec.pop(key)
        else:
            spec[key] = value
    with pytest.raises(SpecError) as info:
        TopicSpec.from_resource(topic(spec))
    assert info.value.field == field


def test_min_insync_replicas_above_the_replication_factor_is_refused():
    with pytest.raises(SpecError) as info:
        TopicSpec.from_resource(topic({**TOPIC, "config": {"min.insync.replicas": 5}}))
    assert info.value.field == "spec.config[min.insync.replicas]"
    assert "5" in info.value.message and "replicationFactor is 3" in info.value.message
    assert topic_state(topic({**TOPIC, "config": {"min.insync.replicas": 3}})).config == {
        "min.insync.replicas": "3"
    }
