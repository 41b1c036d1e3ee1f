"""OdradekConnect spec.authentication and spec.tls (Strimzi's shape): the workers' security keys
for the clusterRef's listener, the password by environment variable from its Secret (never in
the ConfigMap), Secret volumes, a template hash that follows the Secrets, the REST port's
NetworkPolicy; what cannot be honoured is refused naming the field."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from odradek.config.properties import parse_properties
from odradek.connect.worker_config import WorkerConfig
from odradek_operator import names
from odradek_operator.model import connect
from odradek_operator.model.connect_security import (
    CERTS_DIR,
    PASSWORD_ENV,
    TRUSTED_DIR,
    TrustedCertificate,
    trusted_bundle,
)
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.readers import SpecError

IMAGE = "odradek:0.1.0"
SCRAM = {
    "type": "scram-sha-512",
    "username": "connect",
    "passwordSecret": {"secretName": "connect", "password": "password"},
}
TLS = {
    "type": "tls",
    "certificateAndKey": {"secretName": "worker", "certificate": "user.crt", "key": "user.key"},
}
SECURED = ClusterSpec.from_resource(
    {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekCluster",
        "metadata": {"name": "demo", "namespace": "data", "uid": "c-1"},
        "spec": {
            "listeners": [
                {"name": "tls", "port": 9092, "tls": True, "authentication": {"type": "tls"}},
                {
                    "name": "scram",
                    "port": 9095,
                    "tls": True,
                    "authentication": {"type": "scram-sha-512"},
                },
            ]
        },
    }
)


def body(**spec: Any) -> dict[str, Any]:
    target = {"clusterRef": "demo"} if "bootstrapServers" not in spec else {}
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekConnect",
        "metadata": {"name": "sync", "namespace": "data", "uid": "u-1", "generation": 1},
        "spec": {"replicas": 2, **target, **spec},
    }


def build(cluster: ClusterSpec | None, digest: str | None = None, **spec: Any):
    parsed = connect.ConnectSpec.from_resource(body(**spec))
    security = parsed.security.for_cluster(cluster)
    port = security.port or 9092
    bootstrap = f"demo-bootstrap.data.svc:{port}"
    bundle = "-----BEGIN CERTIFICATE-----\n" if security.trusted_sources() else None
    objs = connect.desired_objects(
        parsed,
        IMAGE,
        bootstrap,
        security,
        trusted_bundle=bundle,
        secrets_digest=digest,
        operator_namespace="odradek",
    )
    return security, {o["kind"]: o for o in objs}


def properties(objs: dict[str, dict[str, Any]]) -> dict[str, str]:
    text = objs["ConfigMap"]["data"][names.CONNECT_PROPERTIES]
    return {p.key: p.value for p in parse_properties(text)}


def container(objs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]


def test_scram_on_the_secured_cluster_uses_its_scram_listener_and_the_cluster_ca() -> None:
    security, objs = build(SECURED, authentication=SCRAM)
    for obj in objs.values():
        kubernetes_validate.validate(obj, "1.30", strict=True)
    assert security.port == 9095
    props = properties(objs)
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="connect" password="${{odradekenv:{PASSWORD_ENV}}}";'
    )
    assert props["ssl.ca.location"] == f"{TRUSTED_DIR}/ca.crt"
    # Every *.crt of the cluster CA's Secret: the old CA too while it is renewed.
    ca = TrustedCertificate("demo-cluster-ca-cert", pattern="*.crt")
    assert security.trusted_sources() == (ca,)
    bundle = objs["Secret"]
    assert bundle["metadata"]["name"] == "sync-connect-trusted-certs"
    assert bundle["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    # The password comes from its Secret by env var; the worker resolves it.
    env = {e["name"]: e for e in container(objs)["env"]}
    assert env[PASSWORD_ENV]["valueFrom"] == {
        "secretKeyRef": {"name": "connect", "key": "password"}
    }
    config = WorkerConfig(
        {**props, "rest.advertised.host.name": "10.0.0.1"},
        distributed=True,
        environ={PASSWORD_ENV: "pw-from-secret"},
    )
    settings = config.security_settings()
    assert settings["sasl.username"] == "connect"
    assert settings["sasl.password"] == "pw-from-secret"
    assert settings["ssl.ca.location"] == f"{TRUSTED_DIR}/ca.crt"
    # Only the bundle's Secret is mounted (the password is not a file of the pod).
    mounts = {m["mountPath"]: m for m in container(objs)["volumeMounts"]}
    assert mounts[TRUSTED_DIR]["readOnly"] is True
    volumes = objs["Deployment"]["spec"]["template"]["spec"]["volumes"]
    secrets = [v["secret"]["secretName"] for v in volumes if "secret" in v]
    assert secrets == ["sync-connect-trusted-certs"]
    assert [(k.secret, k.key) for k in security.referenced()] == [("connect", "password")]


def test_tls_authentication_uses_the_certificate_and_key_files() -> None:
    trusted = {"trustedCertificates": [{"secretName": "my-ca", "certificate": "ca.pem"}]}
    security, objs = build(SECURED, authentication=TLS, tls=trusted)
    props = properties(objs)
    assert security.port == 9092
    assert props["security.protocol"] == "SSL"
    assert props["ssl.certificate.location"] == f"{CERTS_DIR}/worker/user.crt"
    assert props["ssl.key.location"] == f"{CERTS_DIR}/worker/user.key"
    assert props["ssl.ca.location"] == f"{TRUSTED_DIR}/ca.crt"
    assert security.trusted_sources() == (TrustedCertificate("my-ca", certificate="ca.pem"),)
    assert not any(k.startswith("sasl.") for k in props)
    assert PASSWORD_ENV not in {e["name"] for e in container(objs)["env"]}
    volumes = objs["Deployment"]["spec"]["template"]["spec"]["volumes"]
    assert sorted(v["secret"]["secretName"] for v in volumes if "secret" in v) == [
        "sync-connect-trusted-certs",
        "worker",
    ]


def test_bootstrap_servers_take_the_protocol_from_spec_tls() -> None:
    trusted = {"trustedCertificates": [{"secretName": "ca", "certificate": "ca.crt"}]}
    _, objs = build(None, bootstrapServers="k:9093", authentication=SCRAM, tls=trusted)
    assert properties(objs)["security.protocol"] == "SASL_SSL"
    _, objs = build(None, bootstrapServers="k:9093", authentication=SCRAM)
    props = properties(objs)
    assert props["security.protocol"] == "SASL_PLAINTEXT" and "ssl.ca.location" not in props
    with pytest.raises(SpecError) as e:
        build(None, bootstrapServers="k:9093", authentication=TLS)
    assert e.value.field == "spec.tls"


def test_a_plaintext_connect_is_unchanged() -> None:
    """No security keys, no Secrets: the config hash of a Connect made before stays the same."""
    plaintext = ClusterSpec.from_resource(
        {"metadata": {"name": "demo", "namespace": "data"}, "spec": {}}
    )
    security, objs = build(plaintext)
    props = properties(objs)
    assert not any(k.startswith(("security.", "sasl.", "ssl.", "config.providers")) for k in props)
    assert security.referenced() == [] and security.volumes("x") == [] and security.env() == []


def test_no_listener_for_the_authentication_is_named() -> None:
    plaintext = ClusterSpec.from_resource(
        {"metadata": {"name": "demo", "namespace": "data"}, "spec": {}}
    )
    with pytest.raises(SpecError, match="no listener with authentication scram-sha-512"):
        build(plaintext, authentication=SCRAM)
    with pytest.raises(SpecError, match="scram-sha-256"):
        build(SECURED, authentication={**SCRAM, "type": "scram-sha-256"})


def test_a_new_secret_value_replaces_the_workers() -> None:
    def template_hash(digest):
        _, objs = build(SECURED, digest, authentication=SCRAM)
        return objs["Deployment"]["spec"]["template"]["metadata"]["annotations"][
            names.CONFIG_HASH_ANNOTATION
        ]

    assert template_hash("a") != template_hash("b")
    assert template_hash("a") == template_hash("a")


def test_the_rest_port_is_open_to_the_workers_and_the_operator_only() -> None:
    _, objs = build(SECURED, authentication=SCRAM)
    policy = objs["NetworkPolicy"]
    assert policy["metadata"]["name"] == "sync-connect-network-policy"
    assert policy["spec"]["podSelector"]["matchLabels"] == names.connect_selector_labels("sync")
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": names.CONNECT_REST_PORT}]
    assert rule["from"] == [
        {"podSelector": {"matchLabels": names.connect_selector_labels("sync")}},
        {
            "podSelector": {"matchLabels": {names.OPERATOR_KIND_LABEL: names.OPERATOR_KIND}},
            "namespaceSelector": {"matchLabels": {names.NAMESPACE_NAME_LABEL: "odradek"}},
        },
    ]
    # The workers' pods carry what the rule selects, and listen on the port it opens.
    pod = objs["Deployment"]["spec"]["template"]
    assert names.connect_selector_labels("sync").items() <= pod["metadata"]["labels"].items()
    assert [p["containerPort"] for p in container(objs)["ports"]] == [names.CONNECT_REST_PORT]
    _, objs = build(SECURED, authentication=SCRAM, networkPolicies=False)
    assert "NetworkPolicy" not in objs


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"authentication": {"type": "oauth"}}, "spec.authentication.type"),
        (
            {"authentication": {"type": "scram-sha-512", "username": "c"}},
            "spec.authentication.passwordSecret",
        ),
        ({"authentication": {**SCRAM, "username": 'a"b'}}, "spec.authentication.username"),
        (
            {"authentication": {**SCRAM, "certificateAndKey": {}}},
            "spec.authentication.certificateAndKey",
        ),
        ({"authentication": {"type": "tls"}}, "spec.authentication.certificateAndKey"),
        (
            {"authentication": {**SCRAM, "passwordSecret": {"secretName": "s"}}},
            "spec.authentication.passwordSecret.password",
        ),
        (
            {
                "tls": {
                    "trustedCertificates": [
                        {"secretName": "a", "certificate": "ca.crt", "pattern": "*.crt"}
                    ]
                }
            },
            "spec.tls.trustedCertificates[0]",
        ),
        (
            {"tls": {"trustedCertificates": [{"secretName": "a"}]}},
            "spec.tls.trustedCertificates[0]",
        ),
        (
            {"tls": {"trustedCertificates": [{"secretName": "a", "certificate": "c"}] * 11}},
            "spec.tls.trustedCertificates",
        ),
        (
            {"authentication": SCRAM, "config": {"sasl.mechanism": "PLAIN"}},
            "spec.config[sasl.mechanism]",
        ),
        ({"config": {"security.protocol": "SSL"}}, "spec.config[security.protocol]"),
        (
            {"config": {"config.providers.odradekenv.class": "x"}},
            "spec.config[config.providers.odradekenv.class]",
        ),
    ],
)
def test_refused_naming_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as e:
        connect.ConnectSpec.from_resource(body(**copy.deepcopy(spec)))
    assert e.value.field == field


def test_the_users_own_config_providers_are_kept() -> None:
    config = {
        "config.providers": "file",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "producer.sasl.mechanism": "SCRAM-SHA-512",
    }
    _, objs = build(SECURED, authentication=SCRAM, config=config)
    props = properties(objs)
    assert props["config.providers"] == "file,odradekenv"
    assert props["producer.sasl.mechanism"] == "SCRAM-SHA-512"


def test_several_trusted_certificates_and_patterns_make_one_bundle() -> None:
    tls = {
        "trustedCertificates": [
            {"secretName": "b", "pattern": "*.crt"},
            {"secretName": "a", "certificate": "root.pem"},
        ]
    }
    security, objs = build(SECURED, authentication=SCRAM, tls=tls)
    a, b = TrustedCertificate("a", certificate="root.pem"), TrustedCertificate("b", pattern="*.crt")
    assert security.trusted_sources() == (b, a)
    assert b.matches("ca.crt") and b.matches("ca-2026-01-01.crt") and not b.matches("ca.key")
    assert a.matches("root.pem") and not a.matches("root.pem.bak")
    assert trusted_bundle([("b", "ca.crt", "B\n"), ("a", "root.pem", "A")]) == "A\nB\n"
    assert "Secret" in objs
    plaintext = ClusterSpec.from_resource(
        {"metadata": {"name": "demo", "namespace": "d"}, "spec": {}}
    )
    security, objs = build(plaintext)
    assert security.trusted_sources() == () and "Secret" not in objs
