"""The REST listener's security keys are Kafka Connect's: ``listeners.https.*`` PEM stores and
``ssl.client.auth``, and basic authentication as ``BasicAuthSecurityRestExtension`` with a JAAS
file of ``PropertyFileLoginModule``; what is not supported is refused naming the key."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import pytest

from odradek.connect.api import ConfigException
from odradek.connect.rest.security import BASIC_AUTH_EXTENSION, RestSecurity, load
from odradek.local.pki import LocalPki

MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def pki(tmp_path: Path) -> tuple[Path, Path]:
    authority = LocalPki.create(tmp_path / "pki", ("127.0.0.1", "localhost"))
    return authority.ca_path, authority.issue("connect")


def https(ca: Path, keystore: Path, **extra: str) -> dict[str, str]:
    return {
        "listeners": "https://127.0.0.1:0",
        "listeners.https.ssl.keystore.type": "PEM",
        "listeners.https.ssl.keystore.location": str(keystore),
        "listeners.https.ssl.truststore.type": "PEM",
        "listeners.https.ssl.truststore.location": str(ca),
        **extra,
    }


def test_https_keys_make_the_server_and_the_forwarding_contexts(pki):
    ca, keystore = pki
    security = load(
        https(ca, keystore, **{"listeners.https.ssl.client.auth": "required"}), "https", {}
    )
    assert security.scheme == "https" and security.users is None
    assert security.server_tls.verify_mode == ssl.CERT_REQUIRED
    assert (
        security.client_tls.check_hostname and security.client_tls.verify_mode == ssl.CERT_REQUIRED
    )
    assert load(https(ca, keystore), "https", {}).server_tls.verify_mode == ssl.CERT_NONE


def test_without_prefixed_keys_the_top_level_ones_serve_as_kafka_does(pki):
    ca, keystore = pki
    props = {k.removeprefix("listeners.https."): v for k, v in https(ca, keystore).items()}
    assert load(props, "https", {}).server_tls is not None


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"listeners.https.ssl.keystore.type": "JKS"}, "listeners.https.ssl.keystore.type"),
        ({"listeners.https.ssl.keystore.password": "x"}, "listeners.https.ssl.keystore.password"),
        ({"listeners.https.ssl.client.auth": "always"}, "listeners.https.ssl.client.auth"),
        ({"listeners.https.ssl.protocol": "TLSv1.3"}, "listeners.https.ssl.protocol"),
        ({"rest.extension.classes": "com.example.Ext"}, "rest.extension.classes"),
        ({"rest.extension.classes": BASIC_AUTH_EXTENSION}, "rest.extension.classes"),  # no JAAS
    ],
)
def test_what_is_not_supported_is_refused_by_name(pki, extra, named):
    ca, keystore = pki
    with pytest.raises(ConfigException) as refused:
        load(https(ca, keystore, **extra), "https", {})
    assert refused.value.name == named


def test_https_keys_on_an_http_listener_are_refused(pki):
    ca, keystore = pki
    with pytest.raises(ConfigException, match="not https"):
        load(https(ca, keystore), "http", {})


def test_basic_auth_reads_the_jaas_file_and_checks_every_request(tmp_path: Path):
    credentials = tmp_path / "credentials.properties"
    credentials.write_text("alice=alice-secret\nbob: bob-secret\n")
    jaas = tmp_path / "connect.jaas"
    jaas.write_text(
        "// Kafka Connect's REST users\nKafkaConnect {\n"
        f'  {MODULE} required\n  file="{credentials}";\n}};\n'
    )
    environ = {"KAFKA_OPTS": f"-Xmx1g -Djava.security.auth.login.config={jaas}"}
    security = load({"rest.extension.classes": BASIC_AUTH_EXTENSION}, "http", environ)
    assert security.authorized("GET", "/connectors", basic("alice", "alice-secret"))
    assert security.authorized("GET", "/", basic("bob", "bob-secret"))
    for refused in (None, basic("alice", "wrong"), basic("carol", "x"), "Bearer abc", "Basic !!"):
        assert not security.authorized("GET", "/connectors", refused)
    # Kafka's filter lets the workers' internal task configs through.
    assert security.authorized("POST", "/connectors/c/tasks", None)
    assert not security.authorized("GET", "/connectors/c/tasks", None)
    assert "alice-secret" not in repr(security)


def test_a_jaas_file_without_the_property_file_module_is_refused(tmp_path: Path):
    jaas = tmp_path / "connect.jaas"
    jaas.write_text("KafkaConnect {\n  com.example.Login required;\n};\n")
    environ = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}
    with pytest.raises(ConfigException, match="must be .*PropertyFileLoginModule"):
        load({"rest.extension.classes": BASIC_AUTH_EXTENSION}, "http", environ)


def test_no_security_authorizes_everything():
    assert RestSecurity().authorized("DELETE", "/connectors/x", None)
