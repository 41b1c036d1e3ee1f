"""SASL listener configuration: Kafka's keys, per-listener overrides, what is refused at start."""

from __future__ import annotations

import pytest

from odradek.config.broker import BrokerConfig
from odradek.errors import InvalidConfigError

PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
)
OAUTH_HANDLER_KEY = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
OAUTH = {
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    OAUTH_HANDLER_KEY: VALIDATOR,
    "sasl.oauthbearer.jwks.endpoint.url": "https://idp.test/jwks",
}
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
BASE = {
    "broker.id": "1",
    "zookeeper.connect": "127.0.0.1:2181",
    "log.dirs": "/tmp/odradek-sasl-unit",
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
}


def test_plain_and_scram_on_a_listener_round_trip():
    c = BrokerConfig.from_properties(
        {
            **BASE,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        }
    )
    settings = c.sasl_settings("SASL_PLAINTEXT")
    assert settings.enabled_mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert dict(settings.plain_users()) == {"alice": "alice-secret"}
    assert "alice-secret" not in repr(settings)
    assert BrokerConfig.from_properties(c.to_properties()) == c


@pytest.mark.parametrize(
    ("props", "words"),
    [
        ({}, "SASL mechanism GSSAPI (Kafka's default) is not implemented"),
        (
            {"sasl.enabled.mechanisms": "OAUTHBEARER"},
            "the unsecured validator (OAuthBearerUnsecuredValidatorCallbackHandler, which checks "
            "no signature), is not served",
        ),
        (
            {
                **OAUTH,
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
                    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                    "OAuthBearerUnsecuredValidatorCallbackHandler"
                ),
            },
            "is not served",
        ),
        (
            {**OAUTH, f"{OAUTH_HANDLER_KEY}": "com.example.MyValidator"},
            "com.example.MyValidator is not supported",
        ),
        (
            {**OAUTH, "sasl.oauthbearer.jwks.endpoint.url": None},
            "sasl.oauthbearer.jwks.endpoint.url is not set",
        ),
        (
            {**OAUTH, "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp.test/jwks"},
            'only "http", "https", and "file" URLs are supported',
        ),
        (
            {**OAUTH, "sasl.oauthbearer.jwks.endpoint.url": "file:relative/jwks.json"},
            "a file URL names an absolute path",
        ),
        (
            {**OAUTH, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "10"},
            "is less than sasl.oauthbearer.jwks.endpoint.retry.backoff.ms (100)",
        ),
        (
            {
                **OAUTH,
                "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS.replace(
                    ";", " unsecuredValidatorRequiredScope=kafka;"
                ),
            },
            "unsecuredValidatorRequiredScope configures Kafka's unsecured validator",
        ),
        (
            {
                **OAUTH,
                "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS.replace(
                    ";", " unsecuredLoginStringClaim_sub=admin;"
                ),
            },
            "the broker's own unsecured login",
        ),
        (
            {
                **OAUTH,
                "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer": "x",
            },
            "set sasl.oauthbearer.expected.issuer instead",
        ),
        (
            {**OAUTH, "sasl.oauthbearer.token.endpoint.url": "http://idp.test/token"},
            "configures a client's OAUTHBEARER login",
        ),
        (
            {**OAUTH, "sasl.server.callback.handler.class": OAUTH[OAUTH_HANDLER_KEY]},
            "listener.name.<listener>.<mechanism>.sasl.server.callback.handler.class",
        ),
        (
            {
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "listener.name.sasl_plaintext.scram-sha-256.sasl.server.callback.handler.class": (
                    "com.example.Handler"
                ),
            },
            "custom SASL callback handlers are not supported",
        ),
        ({"sasl.enabled.mechanisms": "SCRAM-SHA-1"}, "unknown SASL mechanism SCRAM-SHA-1"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, "enables PLAIN but has no users"),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                    "com.example.MyLoginModule required user_a=b;"
                ),
            },
            "login module com.example.MyLoginModule is not supported for PLAIN",
        ),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS.replace(
                    ";", ' username="admin";'
                ),
            },
            "option username is the broker's own credential for inter-broker SASL",
        ),
        (
            {
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            },
            "does not enable PLAIN",
        ),
        (
            {
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "listener.name.plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
            },
            "PLAINTEXT is not a SASL listener",
        ),
        (
            {"sasl.enabled.mechanisms": "SCRAM-SHA-256", "sasl.kerberos.service.name": "kafka"},
            "sasl.kerberos.service.name is not supported",
        ),
        (
            {"sasl.enabled.mechanisms": "SCRAM-SHA-256", "sasl.jaas.config": PLAIN_JAAS},
            "listener.name.<listener>.<mechanism>.sasl.jaas.config",
        ),
        (
            {
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            },
            "internal links do not speak SASL yet",
        ),
        (
            {
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "inter.broker.listener.name": "SASL_PLAINTEXT",
            },
            "internal links do not speak SASL yet",
        ),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x required user_a=b",
            },
            "missing ';'",
        ),
    ],
)
def test_what_is_not_honoured_is_refused(props, words):
    props = {k: v for k, v in props.items() if v is not None}
    with pytest.raises(InvalidConfigError) as raised:
        BrokerConfig.from_properties({**BASE, **props})
    assert words in str(raised.value)
    assert "alice-secret" not in str(raised.value)


def test_connections_max_reauth_ms_broker_wide_and_per_listener_and_mechanism():
    c = BrokerConfig.from_properties(
        {
            **BASE,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "connections.max.reauth.ms": "60000",
            "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": "2000",
        }
    )
    settings = c.sasl_settings("SASL_PLAINTEXT")
    assert dict(settings.max_reauth_ms()) == {"PLAIN": 60000, "SCRAM-SHA-512": 2000}
    assert BrokerConfig.from_properties(c.to_properties()) == c
    default = BrokerConfig.from_properties(
        {**BASE, "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    ).sasl_settings("SASL_PLAINTEXT")
    assert dict(default.max_reauth_ms()) == {"SCRAM-SHA-512": 0}  # Kafka's default: none
    for key, value, words in (
        ("connections.max.reauth.ms", "-1", "connections.max.reauth.ms"),
        ("listener.name.sasl_plaintext.plain.connections.max.reauth.ms", "x", "LONG"),
        (
            "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms",
            "1000",
            "does not enable SCRAM-SHA-256",
        ),
    ):
        props = {**BASE, "sasl.enabled.mechanisms": "SCRAM-SHA-512", key: value}
        with pytest.raises(InvalidConfigError, match=words):
            BrokerConfig.from_properties(props)


@pytest.mark.parametrize(
    "handler",
    [
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
    ],
)
def test_oauthbearer_with_kafkas_validator_and_keys_round_trips(handler):
    c = BrokerConfig.from_properties(
        {
            **BASE,
            **OAUTH,
            OAUTH_HANDLER_KEY: handler,
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
            "sasl.oauthbearer.expected.audience": "kafka,kafka-admin",
            "sasl.oauthbearer.expected.issuer": "https://idp.test",
            "sasl.oauthbearer.clock.skew.seconds": "5",
            "sasl.oauthbearer.sub.claim.name": "client_id",
        }
    )
    assert c.sasl_settings("SASL_PLAINTEXT").callback_handlers == {"OAUTHBEARER": handler}
    assert c.sasl_oauthbearer_expected_audience == ("kafka", "kafka-admin")
    assert c.sasl_oauthbearer_jwks_endpoint_refresh_ms == 3600000
    assert (c.sasl_oauthbearer_clock_skew_seconds, c.sasl_oauthbearer_sub_claim_name) == (
        5,
        "client_id",
    )
    assert BrokerConfig.from_properties(c.to_properties()) == c
