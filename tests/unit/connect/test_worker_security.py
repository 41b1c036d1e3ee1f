"""A worker's security keys are Kafka's: the top-level ones reach every client, ``producer.``,
``consumer.``, ``admin.`` override them per client, a connector's ``*.override.*`` obey the
override policy (KIP-458), and what cannot be mapped is refused at the start, named."""

from __future__ import annotations

import pytest

from odradek.connect.api import ConfigException
from odradek.connect.worker_config import WorkerConfig

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
BASE = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "offset.storage.file.filename": "/tmp/offsets",
    "bootstrap.servers": "127.0.0.1:9093",
}
DIST = {
    **BASE,
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
}
SECURED = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.jaas.config": f'{PLAIN} required username="worker" password="worker-secret";',
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": "/pki/ca.pem",
    "ssl.endpoint.identification.algorithm": "",
}
MAPPED = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "worker",
    "sasl.password": "worker-secret",
    "ssl.ca.location": "/pki/ca.pem",
    "ssl.endpoint.identification.algorithm": "none",
}


def _security(config: dict) -> dict:
    return {k: v for k, v in config.items() if k.startswith(("security.", "sasl.", "ssl."))}


def test_top_level_keys_reach_every_client_mapped_for_librdkafka():
    worker = WorkerConfig({**DIST, **SECURED}, distributed=True)
    assert _security(worker.producer_config()) == MAPPED
    assert _security(worker.consumer_config("connect-x")) == MAPPED
    assert _security(worker.consumer_config(None)) == MAPPED
    assert _security(worker.admin_config()) == MAPPED
    assert worker.security_settings() == MAPPED
    assert worker.producer_config()["acks"] == "all"  # the rest as before


def test_prefixed_keys_override_the_top_level_ones_for_their_client():
    worker = WorkerConfig(
        {
            **BASE,
            **SECURED,
            "producer.sasl.mechanism": "SCRAM-SHA-512",
            "producer.sasl.jaas.config": f'{SCRAM} required username="p" password="p-secret";',
            "consumer.sasl.username": "c",  # librdkafka's names over the Java ones
            "consumer.sasl.password": "c-secret",
            "admin.ssl.truststore.location": "/pki/admin-ca.pem",
            "producer.linger.ms": "7",
        },
        distributed=False,
    )
    producer = worker.producer_config()
    assert producer["sasl.mechanism"] == "SCRAM-SHA-512" and producer["sasl.username"] == "p"
    assert producer["sasl.password"] == "p-secret" and producer["linger.ms"] == "7"
    assert "sasl.jaas.config" not in producer
    consumer = worker.consumer_config("g")
    assert (consumer["sasl.username"], consumer["sasl.password"]) == ("c", "c-secret")
    assert worker.admin_config()["ssl.ca.location"] == "/pki/admin-ca.pem"
    assert worker.security_settings() == MAPPED


@pytest.mark.parametrize(
    ("key", "value", "named", "words"),
    [
        ("ssl.truststore.type", "JKS", "ssl.truststore.type", "JKS is not supported"),
        ("ssl.keystore.password", "x", "ssl.keystore.password", "JKS and PKCS12"),
        ("sasl.kerberos.service.name", "kafka", "sasl.kerberos.service.name", "Kerberos"),
        ("producer.ssl.truststore.type", "PKCS12", "producer.ssl.truststore.type", "PKCS12"),
        ("consumer.sasl.mechanism", "GSSAPI", "consumer.sasl.mechanism", "GSSAPI"),
        ("admin.ssl.protocol", "TLSv1.2", "admin.ssl.protocol", "not a security setting"),
        ("security.protocol", "SASL_TLS", "security.protocol", "not one of"),
    ],
)
def test_what_cannot_be_mapped_is_refused_at_the_start_by_its_name(key, value, named, words):
    with pytest.raises(ConfigException, match=words) as refused:
        WorkerConfig({**BASE, **SECURED, key: value}, distributed=False)
    assert refused.value.name == named
    assert "worker-secret" not in str(refused.value)


def test_disagreeing_passwords_in_one_layer_are_refused_without_either():
    with pytest.raises(ConfigException, match="says otherwise than sasl.password") as refused:
        WorkerConfig({**BASE, **SECURED, "sasl.password": "other-secret"}, distributed=False)
    assert refused.value.name == "sasl.jaas.config" and "secret" not in refused.value.message


def test_oauthbearer_is_refused_in_distributed_mode_only():
    oidc = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "svc",
        "sasl.oauthbearer.client.secret": "s",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.test/token",
    }
    assert WorkerConfig({**BASE, **oidc}, distributed=False).admin_config()["sasl.mechanism"]
    with pytest.raises(ConfigException, match="group membership") as refused:
        WorkerConfig({**DIST, **oidc}, distributed=True)
    assert refused.value.name == "sasl.mechanism"


CONNECTOR = {
    "producer.override.sasl.jaas.config": f'{SCRAM} required username="c" password="c-secret";',
    "producer.override.sasl.mechanism": "SCRAM-SHA-256",
    "producer.override.linger.ms": "1",
}


def test_connector_overrides_under_the_all_policy_layer_over_the_worker():
    worker = WorkerConfig({**BASE, **SECURED}, distributed=False)
    producer = worker.producer_config(worker.client_overrides(CONNECTOR, "producer"))
    assert (producer["sasl.mechanism"], producer["sasl.username"]) == ("SCRAM-SHA-256", "c")
    assert producer["ssl.ca.location"] == "/pki/ca.pem" and producer["linger.ms"] == "1"
    assert worker.client_overrides(CONNECTOR, "consumer") == {}


def test_the_principal_policy_allows_only_the_principals_keys():
    worker = WorkerConfig(
        {**BASE, **SECURED, "connector.client.config.override.policy": "Principal"},
        distributed=False,
    )
    principal = {k: v for k, v in CONNECTOR.items() if "linger" not in k}
    producer = worker.producer_config(worker.client_overrides(principal, "producer"))
    assert producer["sasl.username"] == "c"
    with pytest.raises(ConfigException) as refused:
        worker.client_overrides(CONNECTOR, "producer")
    assert refused.value.name == "producer.override.linger.ms"
    assert refused.value.message == (
        "The 'Principal' policy does not allow 'producer.override.linger.ms' to be overridden "
        "in the connector configuration."
    )
    with pytest.raises(ConfigException, match="'Principal' policy"):
        worker.client_overrides({"consumer.override.ssl.truststore.location": "/x"}, "consumer")


def test_the_none_policy_allows_no_override_and_a_bad_override_is_named():
    none = WorkerConfig(
        {**BASE, "connector.client.config.override.policy": "None"}, distributed=False
    )
    with pytest.raises(ConfigException, match="The 'None' policy does not allow"):
        none.client_overrides(CONNECTOR, "producer")
    worker = WorkerConfig({**BASE, **SECURED}, distributed=False)
    bad = {"consumer.override.ssl.keystore.location": "/k.jks"}
    with pytest.raises(ConfigException) as refused:
        worker.consumer_config("g", worker.client_overrides(bad, "consumer"))
    assert refused.value.name == "consumer.override.ssl.keystore.location"


def test_validating_a_connector_reports_the_overrides_its_worker_refuses(tmp_path):
    from odradek.connect.connector_checks import raise_on_config_errors
    from odradek.connect.connector_config import validate_connector_config
    from odradek.connect.herder import BadRequestError
    from odradek.connect.plugins import Plugins

    worker = WorkerConfig(
        {**BASE, **SECURED, "connector.client.config.override.policy": "Principal"},
        distributed=False,
    )
    connector = {
        "name": "s",
        "connector.class": "FileStreamSource",
        "file": str(tmp_path / "in.txt"),
        "topic": "t",
        **CONNECTOR,
        "admin.override.ssl.keystore.type": "PEM",
    }
    errors = worker.override_errors(connector)
    assert [name for name, _ in errors] == [
        "producer.override.linger.ms",
        "admin.override.ssl.keystore.type",
    ]
    infos = validate_connector_config(Plugins(), connector, errors)
    assert infos["error_count"] == 2
    with pytest.raises(BadRequestError, match="The 'Principal' policy does not allow"):
        raise_on_config_errors(infos)
    allowed = {k: v for k, v in connector.items() if "linger" not in k and "admin" not in k}
    assert worker.override_errors(allowed) == []


def test_a_policy_is_named_by_its_alias_or_its_kafka_class():
    policy = (
        "org.apache.kafka.connect.connector.policy.PrincipalConnectorClientConfigOverridePolicy"
    )
    worker = WorkerConfig(
        {**BASE, "connector.client.config.override.policy": policy}, distributed=False
    )
    assert worker.get("connector.client.config.override.policy") == "Principal"
    with pytest.raises(ConfigException) as refused:
        WorkerConfig({**BASE, "connector.client.config.override.policy": "Some"}, distributed=False)
    assert refused.value.name == "connector.client.config.override.policy"
