"""The one mapping of the Java client's security keys to librdkafka's (``client.java_security``):
what is translated, what passes through, and what is refused with the key named (never a secret)."""

from __future__ import annotations

import pytest

from odradek.client.java_security import JavaSecurityError, is_security_key, layer, translate

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
OIDC = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "OAUTHBEARER",
    "sasl.oauthbearer.client.id": "svc",
    "sasl.oauthbearer.client.secret": "svc-secret",
    "sasl.oauthbearer.token.endpoint.url": "https://idp.test/token",
}


def test_java_sasl_ssl_keys_become_librdkafka_keys():
    assert translate(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM} required username="alice" password="s3cr=t";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/pki/ca.pem",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/pki/alice.pem",
            "ssl.key.password": "k",
            "ssl.endpoint.identification.algorithm": "",
        }
    ) == {
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


def test_nothing_is_plaintext_and_security_keys_are_told_apart():
    assert translate({}) == {}
    assert is_security_key("security.protocol") and is_security_key("ssl.truststore.location")
    assert is_security_key("sasl.kerberos.service.name")
    assert not is_security_key("linger.ms") and not is_security_key("bootstrap.servers")


@pytest.mark.parametrize(
    ("settings", "key", "words"),
    [
        ({"ssl.truststore.location": "/t.jks"}, "ssl.truststore.location", "JKS"),
        (
            {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/t.p12"},
            "ssl.truststore.type",
            "PKCS12",
        ),
        ({"ssl.truststore.type": "PEM"}, "ssl.truststore.type", "no ssl.truststore.location"),
        (
            {"ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"},
            "ssl.keystore.type",
            "JKS",
        ),
        ({"ssl.truststore.password": "x"}, "ssl.truststore.password", "PEM"),
        ({"ssl.keystore.password": "x"}, "ssl.keystore.password", "ssl.key.password"),
        ({"ssl.keystore.key": "-----BEGIN"}, "ssl.keystore.key", "PEM content"),
        ({"ssl.protocol": "TLSv1.3"}, "ssl.protocol", "not a security setting"),
        ({"ssl.ca.pem": "-----BEGIN"}, "ssl.ca.pem", "not a security setting"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.username": "u"},
            "sasl.mechanism",
            "GSSAPI",
        ),
        ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name", "Kerberos"),
        ({"sasl.login.refresh.window.factor": "0.8"}, "sasl.login.refresh.window.factor", "login"),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc",
            },
            "security.protocol",
            "no sasl.oauthbearer.client.id",
        ),
        ({**OIDC, "sasl.oauthbearer.method": "default"}, "sasl.oauthbearer.method", "only oidc"),
        ({**OIDC, "sasl.username": "u"}, "sasl.username", "goes only with OAUTHBEARER"),
        (
            {"sasl.mechanism": "PLAIN", "sasl.oauthbearer.client.id": "x"},
            "sasl.oauthbearer.client.id",
            "goes only with sasl.mechanism=OAUTHBEARER",
        ),
        ({"security.protocol": "SSLV3"}, "security.protocol", "SSLV3"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
            "security.protocol",
            "no sasl.username",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": "p"},
            "security.protocol",
            "no sasl.mechanism",
        ),
        (
            {
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;",
            },
            "sasl.jaas.config",
            "Krb5LoginModule",
        ),
        (
            {
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{SCRAM} required username="u" password="p";',
            },
            "sasl.mechanism",
            "does not go with",
        ),
        (
            {"sasl.jaas.config": f'{SCRAM} required username="u" password="p";'},
            "sasl.jaas.config",
            "no sasl.mechanism",
        ),
        (
            {"sasl.mechanism": "PLAIN", "sasl.jaas.config": f'{PLAIN} required username="u";'},
            "sasl.jaas.config",
            "option password is missing",
        ),
        (
            {
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f"{PLAIN} required username=u password=p tokenauth=true;",
            },
            "sasl.jaas.config",
            "tokenauth",
        ),
        (
            {"ssl.endpoint.identification.algorithm": "dns"},
            "ssl.endpoint.identification.algorithm",
            "dns",
        ),
        (
            {"sasl.mechanism": "PLAIN", "sasl.mechanisms": "SCRAM-SHA-256"},
            "sasl.mechanisms",
            "says otherwise than sasl.mechanism",
        ),
    ],
)
def test_what_cannot_be_mapped_is_refused_by_key(settings, key, words):
    with pytest.raises(JavaSecurityError, match=words) as refused:
        translate(settings)
    assert refused.value.key == key


def test_librdkafkas_oidc_keys_pass_through():
    assert translate(
        {**OIDC, "sasl.oauthbearer.method": "OIDC", "sasl.oauthbearer.scope": "kafka"}
    ) == {**OIDC, "sasl.oauthbearer.method": "OIDC", "sasl.oauthbearer.scope": "kafka"}


def test_the_java_clients_oidc_login_becomes_librdkafkas():
    assert translate(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": OIDC_HANDLER,
            "sasl.oauthbearer.token.endpoint.url": "https://idp.test/token",
            "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="svc" clientSecret="s3cret" '
            'scope="kafka";',
        }
    ) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "svc",
        "sasl.oauthbearer.client.secret": "s3cret",
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.test/token",
    }


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (  # Kafka's default login: an unsecured token the brokers refuse
            {"sasl.jaas.config": f"{OAUTH_MODULE} required clientId=a clientSecret=b;"},
            "is Kafka's unsecured login",
        ),
        (
            {
                "sasl.login.callback.handler.class": "com.example.Login",
                "sasl.jaas.config": f"{OAUTH_MODULE} required clientId=a clientSecret=b;",
            },
            "only org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        ),
        (
            {
                "sasl.login.callback.handler.class": OIDC_HANDLER,
                "sasl.jaas.config": f"{OAUTH_MODULE} required clientId=a;",
            },
            "option clientSecret is missing",
        ),
        (
            {
                "sasl.login.callback.handler.class": OIDC_HANDLER,
                "sasl.jaas.config": f"{OAUTH_MODULE} required clientId=a clientSecret=b "
                "unsecuredLoginStringClaim_sub=x;",
            },
            "option unsecuredLoginStringClaim_sub is not supported",
        ),
    ],
)
def test_the_java_clients_other_oauthbearer_logins_are_refused(settings, words):
    with pytest.raises(JavaSecurityError, match=words) as refused:
        translate({"sasl.mechanism": "OAUTHBEARER", **settings})
    assert "clientSecret=b" not in str(refused.value)


def test_disagreeing_passwords_are_refused_without_showing_either():
    with pytest.raises(JavaSecurityError, match="says otherwise than sasl.password") as refused:
        translate(
            {
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
                "sasl.password": "first-secret",
                "sasl.jaas.config": f'{PLAIN} required username="u" password="second-secret";',
            },
            describe=lambda key: f"{key} (given first)",
        )
    assert refused.value.key == "sasl.jaas.config"
    assert "given first" in str(refused.value) and "secret" not in str(refused.value)


def test_a_key_that_is_not_a_security_key_is_the_callers_mistake():
    with pytest.raises(ValueError, match="linger.ms is not a security key"):
        translate({"linger.ms": "5"})


def test_layered_keys_replace_what_says_the_same_under_another_name():
    worker = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "worker",
        "sasl.password": "worker-secret",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
    }
    connector = {
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="c" password="c-secret";',
        "ssl.ca.location": "/other-ca.pem",
    }
    assert translate(layer(worker, connector)) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "c",
        "sasl.password": "c-secret",
        "ssl.ca.location": "/other-ca.pem",
    }
    # A location alone over a PEM store keeps its type.
    assert layer(worker, {"ssl.truststore.location": "/b.pem"})["ssl.truststore.type"] == "PEM"
