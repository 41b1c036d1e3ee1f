"""The clusters' NetworkPolicies, evaluated against the pods the StatefulSets make: each port of
each pod opened to exactly the peers docs/kubernetes.md names, none left closed by mistake."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from odradek_operator import names
from odradek_operator.model.desired import desired_objects
from odradek_operator.model.spec.readers import SpecError
from support.k8s.store import LabelSelector

NS = "data"
OPERATOR_NS = "ops"
OPERATOR = ({names.OPERATOR_KIND_LABEL: names.OPERATOR_KIND}, OPERATOR_NS)
STRANGER = ({"app": "curl"}, NS)


def body(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.CLUSTER_KIND,
        "metadata": {"name": "demo", "namespace": NS, "uid": "u1"},
        "spec": {"brokers": {"replicas": 3, "storage": {"volumes": [{"id": 0}]}}, **spec},
    }


def objects(operator_namespace: str | None = OPERATOR_NS, **spec: Any) -> list[dict[str, Any]]:
    return desired_objects(
        body(**spec), operator_image_default="odradek:test", operator_namespace=operator_namespace
    )


def pods(objs: list[dict[str, Any]]) -> dict[str, tuple[dict[str, str], set[int]]]:
    """Each component's pod as the StatefulSet controller makes it: labels, container ports."""
    out = {}
    for sts in (o for o in objs if o["kind"] == "StatefulSet"):
        template = sts["spec"]["template"]
        labels = {**template["metadata"]["labels"], "statefulset.kubernetes.io/pod-name": "x-0"}
        ports = {
            p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])
        }
        out[labels[names.COMPONENT_LABEL]] = (labels, ports)
    return out


def peer_admits(peer: dict[str, Any], labels: dict[str, str], namespace: str) -> bool:
    """NetworkPolicyPeer semantics (networking.k8s.io/v1): a podSelector alone means the
    policy's namespace; a namespaceSelector (``{}``: every namespace) with or without one."""
    namespace_labels = {names.NAMESPACE_NAME_LABEL: namespace, "team": namespace}
    if "ipBlock" in peer:
        return False  # pods here are addressed by labels, not addresses
    if "namespaceSelector" in peer:
        if not LabelSelector.from_dict(peer["namespaceSelector"]).matches(namespace_labels):
            return False
    elif namespace != NS:
        return False
    return LabelSelector.from_dict(peer.get("podSelector")).matches(labels)


def admitted(
    objs: list[dict[str, Any]], component: str, port: int, source: tuple[dict[str, str], str]
) -> bool:
    """Whether a connection from ``source`` (labels, namespace) to ``port`` of a ``component``
    pod is let in: by no policy selecting the pod, or by a rule of one that does."""
    labels, _ = pods(objs)[component]
    selecting = [
        o
        for o in objs
        if o["kind"] == "NetworkPolicy"
        and LabelSelector.from_dict(o["spec"]["podSelector"]).matches(labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            if port not in {p["port"] for p in rule.get("ports") or []}:
                continue
            if "from" not in rule or any(peer_admits(p, *source) for p in rule["from"]):
                return True
    return False


def source(objs: list[dict[str, Any]], component: str) -> tuple[dict[str, str], str]:
    return pods(objs)[component][0], NS


def test_every_port_of_every_pod_has_a_rule_and_every_rule_a_port():
    objs = objects()
    for component, (labels, ports) in pods(objs).items():
        (policy,) = (
            o
            for o in objs
            if o["kind"] == "NetworkPolicy"
            and LabelSelector.from_dict(o["spec"]["podSelector"]).matches(labels)
        )
        assert policy["metadata"]["name"] == f"demo-{component}-network-policy"
        assert policy["metadata"]["ownerReferences"][0]["uid"] == "u1"
        assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress is not restricted
        ruled = {p["port"] for r in policy["spec"]["ingress"] for p in r["ports"]}
        assert ruled == ports, component


def test_zookeeper_takes_clients_from_brokers_and_controllers_and_its_quorum_from_itself():
    objs = objects()
    broker, controller = source(objs, "broker"), source(objs, "controller")
    zookeeper = source(objs, "zookeeper")
    for who, client, quorum in (
        (broker, True, False),
        (controller, True, False),
        (zookeeper, False, True),
        (OPERATOR, False, False),
        (STRANGER, False, False),
    ):
        assert admitted(objs, "zookeeper", 2181, who) is client, who
        assert admitted(objs, "zookeeper", 2888, who) is quorum, who
        assert admitted(objs, "zookeeper", 3888, who) is quorum, who


def test_a_zookeeper_of_another_cluster_is_no_peer():
    objs = objects()
    labels, _ = source(objs, "zookeeper")
    other = ({**labels, names.INSTANCE_LABEL: "other"}, NS)
    assert not admitted(objs, "zookeeper", 2888, other)


def test_cluster_internal_listeners_take_brokers_controllers_and_the_operator_only():
    objs = objects()
    insiders = [source(objs, "broker"), source(objs, "controller"), OPERATOR]
    for port, component in ((9093, "controller"), (9091, "broker"), (9094, "broker")):
        for who in insiders:
            assert admitted(objs, component, port, who), (port, who)
        assert not admitted(objs, component, port, STRANGER), port
        assert not admitted(objs, component, port, source(objs, "zookeeper")), port
        # the operator's label in another namespace than the operator's is not the operator
        assert not admitted(objs, component, port, (OPERATOR[0], "elsewhere")), port


def test_an_operator_that_does_not_know_its_namespace_is_let_in_from_any():
    objs = objects(operator_namespace=None)
    assert admitted(objs, "broker", 9094, (OPERATOR[0], "elsewhere"))
    assert not admitted(objs, "broker", 9094, STRANGER)


def test_clients_and_prometheus_reach_the_client_and_metrics_ports_from_anywhere():
    objs = objects()
    far = ({"app": "prometheus"}, "monitoring")
    for who in (STRANGER, far):
        assert admitted(objs, "broker", 9092, who)
        assert admitted(objs, "broker", 9645, who)
        assert admitted(objs, "controller", 9645, who)


def test_network_policy_peers_narrow_the_client_listener_and_keep_the_operator():
    peers = [
        {"namespaceSelector": {"matchLabels": {"team": "apps"}}},
        {"podSelector": {"matchExpressions": [{"key": "kafka-client", "operator": "Exists"}]}},
    ]
    objs = objects(listeners={"client": {"port": 9092, "networkPolicyPeers": peers}})
    assert admitted(objs, "broker", 9092, ({"any": "pod"}, "apps"))
    assert admitted(objs, "broker", 9092, ({"kafka-client": "yes"}, NS))
    assert admitted(objs, "broker", 9092, OPERATOR)
    assert not admitted(objs, "broker", 9092, STRANGER)
    assert not admitted(objs, "broker", 9092, ({"kafka-client": "yes"}, "other"))
    assert admitted(objs, "broker", 9645, STRANGER)  # metrics stay open


def test_each_listener_of_the_list_has_its_own_peers():
    apps = [{"namespaceSelector": {"matchLabels": {"team": "apps"}}}]
    objs = objects(
        listeners=[
            {"name": "tls", "port": 9092, "tls": True, "networkPolicyPeers": apps},
            {
                "name": "scram",
                "port": 9095,
                "tls": True,
                "authentication": {"type": "scram-sha-512"},
            },
        ]
    )
    assert admitted(objs, "broker", 9092, ({"any": "pod"}, "apps"))
    assert admitted(objs, "broker", 9092, OPERATOR)
    assert not admitted(objs, "broker", 9092, STRANGER)
    assert admitted(objs, "broker", 9095, STRANGER)  # no peers: from anywhere


def test_moved_ports_move_with_their_rules():
    objs = objects(listeners={"client": {"port": 19092}, "controlPlane": {"port": 19091}})
    assert admitted(objs, "broker", 19092, STRANGER)
    assert not admitted(objs, "broker", 19091, STRANGER)
    assert admitted(objs, "broker", 19091, source(objs, "controller"))
    test_every_port_of_every_pod_has_a_rule_and_every_rule_a_port()


def test_network_policies_false_builds_none():
    objs = objects(networkPolicies=False)
    assert [o for o in objs if o["kind"] == "NetworkPolicy"] == []


@pytest.mark.parametrize(
    ("peers", "field"),
    [
        ([], "spec.listeners.client.networkPolicyPeers"),
        ([{}], "spec.listeners.client.networkPolicyPeers[0]"),
        ([{"ipBlocks": {}}], "spec.listeners.client.networkPolicyPeers[0].ipBlocks"),
        (
            [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}],
            "spec.listeners.client.networkPolicyPeers[0]",
        ),
        (
            [{"ipBlock": {"cidr": "10.0.0.0/33"}}],
            "spec.listeners.client.networkPolicyPeers[0].ipBlock",
        ),
        (
            [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["192.168.0.0/16"]}}],
            "spec.listeners.client.networkPolicyPeers[0].ipBlock.except",
        ),
        (
            [{"podSelector": {"matchExpressions": [{"key": "a", "operator": "Has"}]}}],
            "spec.listeners.client.networkPolicyPeers[0].podSelector.matchExpressions[0].operator",
        ),
        (
            [{"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}],
            "spec.listeners.client.networkPolicyPeers[0].podSelector.matchExpressions[0].values",
        ),
        (
            [{"namespaceSelector": {"matchLabels": {"team": "not a value!"}}}],
            "spec.listeners.client.networkPolicyPeers[0].namespaceSelector.matchLabels[team]",
        ),
    ],
)
def test_peers_the_api_server_would_refuse_are_refused(peers, field):
    with pytest.raises(SpecError) as refused:
        objects(listeners={"client": {"networkPolicyPeers": peers}})
    assert refused.value.field == field


def test_network_policies_must_be_a_boolean():
    with pytest.raises(SpecError) as refused:
        objects(networkPolicies="no")
    assert refused.value.field == "spec.networkPolicies"


def test_policies_with_every_kind_of_peer_are_valid_kubernetes_1_30():
    peers = [
        {"namespaceSelector": {"matchLabels": {"team": "apps"}}},
        {
            "namespaceSelector": {},
            "podSelector": {
                "matchExpressions": [{"key": "role", "operator": "In", "values": ["a"]}]
            },
        },
        {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
    ]
    for operator_namespace in (OPERATOR_NS, None):
        objs = objects(operator_namespace, listeners={"client": {"networkPolicyPeers": peers}})
        for policy in (o for o in objs if o["kind"] == "NetworkPolicy"):
            kubernetes_validate.validate(policy, "1.30", strict=True)
