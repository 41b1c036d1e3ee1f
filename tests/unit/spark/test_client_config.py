"""Spark's ``kafka.*`` security options as a Java client's user writes them are mapped for
librdkafka (through ``client.java_security``), and a Java-only option that cannot be is an
``OptionError`` naming it, never a secret."""

from __future__ import annotations

import pytest

from odradek.spark.client_config import OptionError, client_config
from odradek.spark.read_options import parse_read_options

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9093"}
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
JAVA = {
    **BOOT,
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "SCRAM-SHA-512",
    "kafka.sasl.jaas.config": f'{SCRAM} required username="spark" password="spark-secret";',
    "kafka.ssl.truststore.type": "PEM",
    "kafka.ssl.truststore.location": "/pki/ca.pem",
}


def test_java_security_options_become_librdkafkas():
    assert client_config({**JAVA, "kafka.fetch.max.bytes": "1048576", "subscribe": "t"}) == {
        "bootstrap.servers": "127.0.0.1:9093",
        "fetch.max.bytes": "1048576",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "spark",
        "sasl.password": "spark-secret",
        "ssl.ca.location": "/pki/ca.pem",
    }


def test_a_pem_keystore_and_librdkafkas_own_names_are_taken():
    config = client_config(
        {
            **BOOT,
            "kafka.security.protocol": "SSL",
            "kafka.ssl.keystore.type": "PEM",
            "kafka.ssl.keystore.location": "/pki/spark.pem",
            "kafka.ssl.key.password": "k",
            "kafka.ssl.ca.location": "/pki/ca.pem",
            "kafka.ssl.endpoint.identification.algorithm": "",
        }
    )
    assert config["ssl.certificate.location"] == config["ssl.key.location"] == "/pki/spark.pem"
    assert config["ssl.ca.location"] == "/pki/ca.pem" and config["ssl.key.password"] == "k"
    assert config["ssl.endpoint.identification.algorithm"] == "none"


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("kafka.ssl.truststore.type", "JKS", "'kafka.ssl.truststore.type': .*JKS is not supported"),
        ("kafka.ssl.truststore.password", "x", "'kafka.ssl.truststore.password'"),
        ("kafka.ssl.keystore.password", "x", "'kafka.ssl.keystore.password'"),
        ("kafka.sasl.kerberos.service.name", "kafka", "'kafka.sasl.kerberos.service.name'"),
        ("kafka.sasl.mechanism", "GSSAPI", "'kafka.sasl.mechanism': GSSAPI"),
        ("kafka.ssl.cipher.suites", "TLS_AES_128_GCM_SHA256", "'kafka.ssl.cipher.suites'"),
        (
            "kafka.sasl.jaas.config",
            "com.sun.security.auth.module.Krb5LoginModule required;",
            "'kafka.sasl.jaas.config': login module com.sun.security.auth.module.Krb5LoginModule",
        ),
        (
            "kafka.sasl.password",
            "other-secret",
            "'kafka.sasl.jaas.config': says otherwise than 'kafka.sasl.password'",
        ),
    ],
)
def test_what_cannot_be_mapped_is_an_option_error_naming_the_option(option, value, named):
    with pytest.raises(OptionError, match=named) as refused:
        client_config({**JAVA, option: value})
    assert "spark-secret" not in str(refused.value) and "other-secret" not in str(refused.value)


def test_a_jks_truststore_without_a_type_is_named_by_its_location():
    options = {**JAVA}
    del options["kafka.ssl.truststore.type"]
    with pytest.raises(OptionError, match="'kafka.ssl.truststore.location': .*JKS"):
        client_config(options)


def test_the_read_options_take_the_mapped_settings():
    options = parse_read_options({**JAVA, "subscribe": "t"}, streaming=False)
    assert options.client["sasl.username"] == "spark"
    assert "sasl.jaas.config" not in options.client
