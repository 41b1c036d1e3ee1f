"""SSL listeners' ssl.* keys: what is refused at load (with the key named), and TLS contexts
built from PEM files, inline PEM and encrypted keys, as Kafka's DefaultSslEngineFactory."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from odradek.config.broker import BrokerConfig
from odradek.errors import InvalidConfigError
from odradek.security.tls import BrokerLinksTls, broker_links_tls, distinguished_name, listener_tls

BASE = {
    "broker.id": "0",
    "zookeeper.connect": "127.0.0.1:2181",
    "log.dirs": "/data/0",
    "listeners": "PLAINTEXT://:9092,SSL://:9093,CONTROL_PLANE://:9091",
}


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def stores(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("stores")
    server = ca.issue_cert("localhost", "127.0.0.1")
    keystore = root / "keystore.pem"
    server.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    truststore = root / "truststore.pem"
    ca.cert_pem.write_to_path(str(truststore))
    encrypted = root / "encrypted.pem"
    key = serialization.load_pem_private_key(server.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret"),
    )
    encrypted.write_bytes(pkcs8 + b"".join(p.bytes() for p in server.cert_chain_pems))
    return {"keystore": keystore, "truststore": truststore, "encrypted": encrypted}


def config(**props: str) -> BrokerConfig:
    return BrokerConfig.from_properties({**BASE, **props})


def refused(**props: str) -> str:
    with pytest.raises(InvalidConfigError) as raised:
        listener_tls(config(**props))
    return str(raised.value)


def pem(**props: str) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM", **props}


def test_a_pem_file_key_store_gives_a_tls_context(stores):
    tls = listener_tls(config(**pem(**{"ssl.keystore.location": str(stores["keystore"])})))
    assert set(tls) == {"SSL"}
    context = tls["SSL"].context
    assert context.verify_mode is ssl.CERT_NONE
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2


def test_inline_pem_on_one_line_as_a_properties_value_is_accepted(ca):
    server = ca.issue_cert("localhost")
    one_line = server.private_key_pem.bytes().decode().replace("\n", " ")
    chain = "".join(p.bytes().decode() for p in server.cert_chain_pems).replace("\n", " ")
    tls = listener_tls(
        config(
            **pem(
                **{
                    "ssl.keystore.key": one_line,
                    "ssl.keystore.certificate.chain": chain,
                    "ssl.truststore.certificates": ca.cert_pem.bytes().decode(),
                    "ssl.client.auth": "required",
                    "ssl.enabled.protocols": "TLSv1.3",
                }
            )
        )
    )
    context = tls["SSL"].context
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.minimum_version is ssl.TLSVersion.TLSv1_3


def test_an_encrypted_key_needs_its_password(stores):
    location = {"ssl.keystore.location": str(stores["encrypted"])}
    assert listener_tls(config(**pem(**location, **{"ssl.key.password": "s3cret"})))
    message = refused(**pem(**location, **{"ssl.key.password": "wrong"}))
    assert f"ssl.keystore.location={stores['encrypted']} (listener SSL)" in message


def test_per_listener_keys_win_over_the_broker_wide_ones(stores):
    tls = listener_tls(
        config(
            **pem(**{"ssl.keystore.location": "/nowhere.pem"}),
            **{
                "listener.name.ssl.ssl.keystore.location": str(stores["keystore"]),
                "listener.name.ssl.ssl.truststore.location": str(stores["truststore"]),
                "listener.name.ssl.ssl.client.auth": "requested",
            },
        )
    )
    assert tls["SSL"].context.verify_mode is ssl.CERT_OPTIONAL


@pytest.mark.parametrize(
    ("props", "words"),
    [
        ({"ssl.keystore.location": "/k.pem"}, "ssl.keystore.type=JKS for listener SSL"),
        (
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12"},
            "ssl.keystore.type=PKCS12 for listener SSL (SSL) is not supported",
        ),
        ({"ssl.keystore.type": "PEM"}, "listener SSL (SSL) has no key store"),
        (
            pem(**{"ssl.keystore.location": "/k.pem", "ssl.keystore.key": "x"}),
            "are both set; use the file or the inline PEM",
        ),
        (pem(**{"ssl.keystore.key": "x"}), "must both be set for an inline PEM key store"),
        (
            pem(**{"ssl.keystore.location": "/k.pem", "ssl.client.auth": "required"}),
            "ssl.client.auth=required needs a trust store",
        ),
        (
            pem(**{"ssl.keystore.location": "/k.pem", "ssl.enabled.protocols": "TLSv1.1"}),
            "TLSv1.1 is not supported: only TLSv1.2 and TLSv1.3 are",
        ),
        (
            pem(**{"ssl.keystore.location": "/k.pem", "ssl.cipher.suites": "X"}),
            "ssl.cipher.suites is not supported",
        ),
        (
            pem(**{"ssl.keystore.location": "/k.pem", "ssl.keystore.password": "x"}),
            "ssl.keystore.password is not supported",
        ),
        (
            pem(**{"listener.name.ssl.ssl.provider": "SunJSSE", "ssl.keystore.location": "/k"}),
            "listener.name.ssl.ssl.provider is not supported",
        ),
        (
            pem(**{"listener.name.ssl.num.network.threads": "3", "ssl.keystore.location": "/k"}),
            "per-listener overrides (listener.name.<listener>.<key>) are supported for the "
            "ssl.* keys only",
        ),
        (
            pem(
                **{
                    "listener.name.plaintext.ssl.client.auth": "required",
                    "ssl.keystore.location": "/k",
                }
            ),
            "but PLAINTEXT is not an SSL listener",
        ),
        (
            pem(**{"ssl.keystore.location": "/k.pem", "ssl.principal.mapping.rules": "RULE:x"}),
            "Invalid rule",
        ),
        (
            pem(**{"ssl.keystore.location": "/nowhere/k.pem"}),
            "ssl.keystore.location=/nowhere/k.pem (listener SSL)",
        ),
    ],
)
def test_what_is_not_honoured_is_refused_naming_the_key(props, words):
    assert words in refused(**props)


def test_the_inter_broker_and_control_plane_listeners_may_be_ssl(stores):
    # The broker's own connections then use those listeners' stores as client side (mTLS).
    stores_of = {
        "ssl.keystore.location": str(stores["keystore"]),
        "ssl.truststore.location": str(stores["truststore"]),
        "ssl.client.auth": "required",
    }
    links = broker_links_tls(
        config(
            **pem(**stores_of),
            **{
                "listeners": "SSL://127.0.0.1:9093,CONTROL_PLANE://127.0.0.1:9091",
                "listener.security.protocol.map": "SSL:SSL,CONTROL_PLANE:SSL",
                "inter.broker.listener.name": "SSL",
            },
        )
    )
    assert links.brokers is not None and links.controller is not None
    brokers = links.brokers_context
    assert (
        brokers is not None and brokers.verify_mode is ssl.CERT_REQUIRED and brokers.check_hostname
    )
    assert broker_links_tls(config(**pem(**stores_of))) == BrokerLinksTls(None, None)


def test_a_truststore_without_certificates_is_refused(stores, tmp_path):
    empty = tmp_path / "empty.pem"
    empty.write_text("nothing here\n")
    message = refused(
        **pem(
            **{
                "ssl.keystore.location": str(stores["keystore"]),
                "ssl.truststore.location": str(empty),
            }
        )
    )
    assert f"ssl.truststore.location={empty} (listener SSL): no PEM certificate" in message


def test_passwords_and_keys_are_sensitive_in_describe_configs(stores):
    from odradek.broker.admin.config_entries import describe_broker_config

    described = describe_broker_config(
        config(**pem(**{"ssl.keystore.location": str(stores["keystore"]), "ssl.key.password": "p"}))
    )
    rows = {row.name: row for row in described}
    assert rows["ssl.key.password"].is_sensitive and rows["ssl.key.password"].value is None
    assert rows["ssl.keystore.location"].value == str(stores["keystore"])


def test_the_distinguished_name_is_rfc_2253_as_java_prints_it(ca):
    client = ca.issue_cert(
        "client.example",
        common_name="alice",
        organization_name="Example",
        organization_unit_name="ServiceUsers",
    )
    der = ssl.PEM_cert_to_DER_cert(client.cert_chain_pems[0].bytes().decode())
    assert distinguished_name(der) == "CN=alice,OU=ServiceUsers,O=Example"


def test_per_listener_overrides_survive_a_round_trip_through_properties():
    props = pem(
        **{
            "ssl.keystore.location": "/k.pem",
            "listener.name.ssl.ssl.client.auth": "requested",
            "listener.name.ssl.ssl.truststore.location": "/ca.pem",
        }
    )
    once = config(**props)
    again = BrokerConfig.from_properties(once.to_properties())
    assert again == once
    assert again.ssl_settings("SSL").client_auth == "requested"
