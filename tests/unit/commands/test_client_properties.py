"""``--command-config``: a file's keys go through the one mapping (``client.java_security``, tested
there) and its refusals come back with the file's line; other keys are refused by name."""

from __future__ import annotations

import argparse
import ssl
from pathlib import Path

import pytest

from odradek.client.security import ClientSecurity, SaslCredentials
from odradek.commands.client_properties import ClientPropertiesError, load, translate
from odradek.commands.common import LOCAL_DATA_DIR, CommandError, command_config
from odradek.local.cluster import ClusterState
from odradek.local.pki import LocalPki

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
OIDC = (
    "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
    "sasl.oauthbearer.client.id=svc\nsasl.oauthbearer.client.secret=svc-secret\n"
    "sasl.oauthbearer.token.endpoint.url=https://idp.test/token\n"
)
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_java_sasl_ssl_keys_become_librdkafka_keys():
    settings = translate(
        "bootstrap.servers=127.0.0.1:9093\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM} required username="alice" password="s3cr=t";\n'
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=/pki/ca.pem\n"
        "ssl.keystore.type=PEM\n"
        "ssl.keystore.location=/pki/alice.pem\n"
        "ssl.key.password=k\n"
        "ssl.endpoint.identification.algorithm=\n"
    )
    assert settings.bootstrap_servers == "127.0.0.1:9093"
    assert settings.librdkafka == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "s3cr=t",
        "ssl.ca.location": "/pki/ca.pem",
        "ssl.certificate.location": "/pki/alice.pem",
        "ssl.key.location": "/pki/alice.pem",
        "ssl.key.password": "k",
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_librdkafka_keys_then_the_same_in_java_keys_agree():
    """The shape of ``odradek local up --security sasl_ssl``'s client.properties."""
    settings = translate(
        "bootstrap.servers=127.0.0.1:1\nsecurity.protocol=SASL_SSL\nsasl.mechanisms=PLAIN\n"
        "sasl.username=bob\nsasl.password=pw\nssl.ca.location=/ca.pem\n"
        "# The Java client's names\n"
        f'sasl.jaas.config={PLAIN} required username="bob" password="pw";\n'
        "ssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\n"
    )
    assert settings.librdkafka["sasl.mechanism"] == "PLAIN"
    assert settings.librdkafka["sasl.username"] == "bob"
    assert settings.librdkafka["ssl.ca.location"] == "/ca.pem"


def test_an_empty_file_is_plaintext():
    settings = translate("# nothing\n")
    assert settings.librdkafka == {} and settings.bootstrap_servers is None
    assert settings.client_security() == ClientSecurity()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("ssl.truststore.location=/t.jks\n", "client.properties:1: ssl.truststore.location: .*JKS"),
        (
            "# a comment\nssl.truststore.password=x\n",
            "client.properties:2: ssl.truststore.password",
        ),
        ("linger.ms=5\n", "client.properties:1: linger.ms: not a client setting"),
        (
            "sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p\n"
            f'sasl.jaas.config={PLAIN} required username="v" password="p";\n',
            "client.properties:4: sasl.jaas.config: says otherwise than sasl.username on line 2",
        ),
        ("sasl.mechanisms=GSSAPI\n", "client.properties:1: sasl.mechanism: GSSAPI"),
    ],
)
def test_what_the_commands_cannot_honour_is_refused_by_name_and_line(text, named):
    """The mapping's refusals (``client.java_security``, tested there) come with the file's line."""
    with pytest.raises(ClientPropertiesError, match=named):
        translate(text, "client.properties")


def test_librdkafkas_oidc_keys_pass_through_for_librdkafka_only():
    settings = translate(
        f"{OIDC}sasl.oauthbearer.method=OIDC\nsasl.oauthbearer.scope=kafka\n"
        "ssl.ca.location=/ca.pem\n",
        "client.properties",
    )
    assert settings.librdkafka == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "OIDC",
        "sasl.oauthbearer.client.id": "svc",
        "sasl.oauthbearer.client.secret": "svc-secret",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.test/token",
        "sasl.oauthbearer.scope": "kafka",
        "ssl.ca.location": "/ca.pem",
    }
    with pytest.raises(ClientPropertiesError, match="runs on Odradek's own client") as refused:
        settings.client_security()
    assert "svc-secret" not in str(refused.value)


def test_disagreeing_passwords_are_refused_without_showing_either():
    with pytest.raises(ClientPropertiesError, match="sasl.jaas.config") as refused:
        translate(
            "sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=first-secret\n"
            f'sasl.jaas.config={PLAIN} required username="u" password="second-secret";\n'
        )
    assert "secret" not in str(refused.value)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(ClientPropertiesError, match="cannot read .*absent.properties"):
        load(tmp_path / "absent.properties")


def test_own_client_gets_a_tls_context_and_sasl_credentials(tmp_path: Path):
    pki = LocalPki.create(tmp_path / "pki", ("127.0.0.1", "localhost"))
    keystore = pki.issue("alice")
    settings = translate(
        "security.protocol=SSL\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki.ca_path}\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"
    )
    security = settings.client_security()
    assert security.sasl is None
    assert isinstance(security.tls, ssl.SSLContext) and security.tls.check_hostname
    assert security.tls.verify_mode == ssl.CERT_REQUIRED
    sasl = translate(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        f'sasl.jaas.config={SCRAM} required username="u" password="p";\n'
    ).client_security()
    assert sasl == ClientSecurity(None, SaslCredentials("SCRAM-SHA-256", "u", "p"))
    assert "'p'" not in repr(sasl)


def test_a_secured_local_cluster_without_its_client_properties_is_said_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data_dir = (tmp_path / LOCAL_DATA_DIR).absolute()
    data_dir.mkdir(parents=True)
    ClusterState(str(data_dir), "127.0.0.1:2181", "127.0.0.1:9092", security="sasl_ssl").write(
        data_dir
    )
    options = argparse.Namespace(bootstrap_server=None, command_config=None)
    with pytest.raises(CommandError, match="is secured .* pass --command-config FILE"):
        command_config(options)
    # --bootstrap-server alone names another cluster: no default settings then.
    options.bootstrap_server = "127.0.0.1:9092"
    assert command_config(options).librdkafka == {}
