"""A secured cluster's brokers and controllers read listeners, TLS, SASL and the authorizer as
odradek.config accepts them, advertise DNS names their certificates carry, mount their
Secrets; an unsecured cluster renders exactly what it did before spec.listeners."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from odradek.config.broker import BrokerConfig
from odradek.config.controller import ControllerConfig
from odradek.config.endpoints import SecurityProtocol
from odradek.config.properties import parse_overrides, parse_properties
from odradek_operator import names
from odradek_operator.model import desired, security
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.readers import SpecError

SECURED = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekCluster",
    "metadata": {"name": "demo", "namespace": "data", "uid": "u"},
    "spec": {
        "zookeeper": {"replicas": 1},
        "controllers": {"replicas": 1},
        "brokers": {"replicas": 3},
        "listeners": [
            {"name": "plain", "port": 9092},
            {"name": "tls", "port": 9093 + 10, "tls": True, "authentication": {"type": "tls"}},
            {
                "name": "scram",
                "port": 9095,
                "tls": True,
                "authentication": {"type": "scram-sha-512"},
            },
        ],
        "authorization": {"type": "simple", "superUsers": ["User:admin"]},
    },
}
HASHES = {names.Component.BROKER: "b" * 16, names.Component.CONTROLLER: "c" * 16}


def objects(body: dict[str, Any], hashes=HASHES) -> dict[tuple[str, str], dict[str, Any]]:
    spec = ClusterSpec.from_resource(body)
    return {(o["kind"], o["metadata"]["name"]): o for o in desired.build(spec, "odradek:1", hashes)}


def expand(text: str, env: dict[str, str]) -> str:
    for key, value in env.items():
        text = text.replace(f"$({key})", value)
    return text


def read(objs, component: str, config_file: str, ordinal: int):
    sts = objs[("StatefulSet", f"demo-{component}")]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env = {
        "POD_INDEX": str(ordinal),
        "POD_IP": f"10.1.0.{ordinal + 1}",
        "POD_NAME": f"demo-{component}-{ordinal}",
    }
    argv = [expand(a, env) for a in container["args"]]
    text = objs[("ConfigMap", f"demo-{component}-config")]["data"][expand(config_file, env)]
    props = {p.key: p.value for p in parse_properties(text)}
    overrides = parse_overrides(argv[i + 1] for i, a in enumerate(argv) if a == "--override")
    return {**props, **overrides}, container, sts


def test_secured_brokers_listeners_protocols_and_authorizer():
    props, container, sts = read(objects(SECURED), "broker", "broker.properties", 1)
    config = BrokerConfig.from_properties(props)
    host = "demo-broker-1.demo-broker-nodes.data.svc.cluster.local"
    assert [str(e) for e in config.effective_advertised_listeners] == [
        f"PLAIN://{host}:9092",
        f"TLS://{host}:9103",
        f"SCRAM://{host}:9095",
        f"CONTROL_PLANE://{host}:9091",
        f"INTERNAL://{host}:9094",
    ]
    assert [str(e) for e in config.listeners][0] == "PLAIN://10.1.0.2:9092"  # bound on the IP
    protocols = {n: config.security_protocol(n) for n in ("PLAIN", "TLS", "SCRAM", "INTERNAL")}
    assert protocols == {
        "PLAIN": SecurityProtocol.PLAINTEXT,
        "TLS": SecurityProtocol.SSL,
        "SCRAM": SecurityProtocol.SASL_SSL,
        "INTERNAL": SecurityProtocol.SSL,
    }
    internal = config.ssl_settings("INTERNAL")
    assert internal.client_auth == "required"
    assert internal.keystore_location == "/etc/odradek/certs/demo-broker-1.pem"
    assert internal.truststore_location == "/etc/odradek/certs/ca.crt"
    assert config.ssl_settings("CONTROL_PLANE").client_auth == "required"
    tls = config.ssl_settings("TLS")
    assert (tls.client_auth, tls.truststore_location) == (
        "required",
        "/etc/odradek/certs/clients-ca.crt",
    )
    assert config.ssl_settings("SCRAM").client_auth == "none"
    assert config.sasl_settings("SCRAM").enabled_mechanisms == ("SCRAM-SHA-512",)
    assert config.authorizer_class_name == security.ACL_AUTHORIZER
    assert config.super_users.split(";") == [
        "User:CN=demo-broker,O=odradek.io",
        "User:CN=demo-controller,O=odradek.io",
        "User:odradek-operator",
        "User:admin",
    ]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/etc/odradek/certs"] == "certs"
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert volumes["certs"]["secret"]["secretName"] == "demo-broker-certs"
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations[names.CERTIFICATES_HASH_ANNOTATION] == "b" * 16
    ports = [p["name"] for p in container["ports"]]
    assert ports == ["client", "tls", "scram", "control-plane", "internal", "metrics"]


def test_secured_controllers_listen_on_their_dns_name_with_client_certificates():
    props, container, _ = read(
        objects(SECURED), "controller", "controller-$(POD_INDEX).properties", 0
    )
    config = ControllerConfig.from_properties(props)
    host = "demo-controller-0.demo-controller-nodes.data.svc.cluster.local"
    assert [str(e) for e in config.listeners] == [f"CONTROLLER://{host}:9093"]
    assert props["listener.security.protocol.map"] == "CONTROLLER:SSL"
    assert props["ssl.client.auth"] == "required"
    assert props["ssl.keystore.location"] == "/etc/odradek/certs/demo-controller-0.pem"
    assert config.authorizer_class_name == security.ACL_AUTHORIZER


def test_the_bootstrap_service_carries_every_client_listener():
    service = objects(SECURED)[("Service", "demo-bootstrap")]
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [
        ("client", 9092),
        ("tls", 9103),
        ("scram", 9095),
    ]


def test_secured_objects_are_valid_kubernetes():
    for obj in objects(SECURED).values():
        kubernetes_validate.validate(obj, "1.30", strict=True)


def test_a_certificates_change_changes_only_the_pods_of_that_component():
    def hash_of(objs, component):
        template = objs[("StatefulSet", f"demo-{component}")]["spec"]["template"]
        return template["metadata"]["annotations"][names.CONFIG_HASH_ANNOTATION]

    before = objects(SECURED)
    after = objects(SECURED, {**HASHES, names.Component.BROKER: "x" * 16})
    assert hash_of(before, "broker") != hash_of(after, "broker")
    assert hash_of(before, "controller") == hash_of(after, "controller")


def test_unsecured_clusters_render_as_before_listeners_existed():
    body = {
        **SECURED,
        "spec": {
            k: v for k, v in SECURED["spec"].items() if k not in ("listeners", "authorization")
        },
    }
    props, container, sts = read(objects(body, None), "broker", "broker.properties", 0)
    assert props["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,INTERNAL:PLAINTEXT"
    )
    assert not any(k.startswith(("ssl.", "listener.name.", "authorizer")) for k in props)
    assert props["advertised.listeners"].startswith("PLAINTEXT://10.1.0.1:9092,")
    assert (
        names.CERTIFICATES_HASH_ANNOTATION not in sts["spec"]["template"]["metadata"]["annotations"]
    )
    assert "certs" not in {v["name"] for v in sts["spec"]["template"]["spec"]["volumes"]}
    # The old spec.listeners mapping (what the API server's defaults wrote) reads the same.
    legacy = {
        **body,
        "spec": {
            **body["spec"],
            "listeners": {"client": {"port": 9092}, "controlPlane": {"port": 9091}},
        },
    }
    assert objects(legacy, None) == objects(body, None)


@pytest.mark.parametrize(
    ("listener", "secured"),
    [
        ({"name": "a", "port": 9000}, False),
        ({"name": "a", "port": 9000, "tls": True}, True),
        ({"name": "a", "port": 9000, "authentication": {"type": "scram-sha-512"}}, True),
    ],
)
def test_secured_means_a_listener_with_tls_or_authentication(listener, secured):
    body = {**SECURED, "spec": {**SECURED["spec"], "listeners": [listener]}}
    del body["spec"]["authorization"]
    spec = ClusterSpec.from_resource(body)
    assert spec.secured is secured
    assert (spec.authorization is not None) is secured  # the authorizer is on whenever secured


def test_authorization_without_a_secured_listener_is_refused():
    body = {**SECURED, "spec": {**SECURED["spec"], "listeners": [{"name": "a", "port": 9000}]}}
    with pytest.raises(SpecError) as refused:
        ClusterSpec.from_resource(body)
    assert refused.value.field == "spec.authorization"
