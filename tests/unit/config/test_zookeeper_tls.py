"""The ``zookeeper.ssl.*`` client keys and ``zookeeper.set.acl`` on brokers and the controller."""

from __future__ import annotations

import pytest

from odradek.config.broker import BROKER_KEYS, BrokerConfig
from odradek.config.controller import CONTROLLER_KEYS, ControllerConfig
from odradek.config.zookeeper_tls import CNXN_SOCKET_NETTY, ZK_CLIENT_KEYS
from odradek.errors import InvalidConfigError
from odradek.zk.acls import default_acls
from odradek.zk.client import ZkClient, ZkTls

BROKER = {"broker.id": "0", "zookeeper.connect": "127.0.0.1:2182", "log.dirs": "/data/0"}
CONTROLLER = {"controller.id": "0", "zookeeper.connect": "127.0.0.1:2182"}
TLS = {
    "zookeeper.ssl.client.enable": "true",
    "zookeeper.clientCnxnSocket": CNXN_SOCKET_NETTY,
    "zookeeper.ssl.keystore.location": "/etc/odradek/zk-client.pem",
    "zookeeper.ssl.keystore.type": "PEM",
    "zookeeper.ssl.truststore.location": "/etc/odradek/zk-ca.pem",
    "zookeeper.ssl.truststore.type": "PEM",
}


def both(props: dict[str, str]) -> list[BrokerConfig | ControllerConfig]:
    return [
        BrokerConfig.from_properties({**BROKER, **props}),
        ControllerConfig.from_properties({**CONTROLLER, **props}),
    ]


def refused(props: dict[str, str], match: str) -> None:
    for base, cls in ((BROKER, BrokerConfig), (CONTROLLER, ControllerConfig)):
        with pytest.raises(InvalidConfigError, match=match):
            cls.from_properties({**base, **props})


def test_the_controller_shares_the_brokers_rows():
    for key in ZK_CLIENT_KEYS:
        assert CONTROLLER_KEYS[key.name] is BROKER_KEYS[key.name]


def test_plaintext_by_default():
    for config in both({}):
        settings = config.zookeeper_client_settings()
        assert not settings.ssl_client_enable and not settings.set_acl
        assert ZkTls.of(settings) is None


def test_tls_with_a_client_certificate_and_set_acl():
    for config in both({**TLS, "zookeeper.set.acl": "true"}):
        tls = ZkTls.of(config.zookeeper_client_settings())
        assert tls == ZkTls(
            cafile="/etc/odradek/zk-ca.pem",
            certfile="/etc/odradek/zk-client.pem",
            keyfile_password=None,
            check_hostname=True,
        )
        assert config.zookeeper_set_acl is True
        assert config.to_properties()["zookeeper.ssl.keystore.type"] == "PEM"


def test_host_name_check_may_be_turned_off():
    (config, _) = both({**TLS, "zookeeper.ssl.endpoint.identification.algorithm": ""})
    assert ZkTls.of(config.zookeeper_client_settings()).check_hostname is False
    refused(
        {**TLS, "zookeeper.ssl.endpoint.identification.algorithm": "LDAPS"}, "HTTPS .* or empty"
    )


def test_tls_needs_the_netty_socket_as_kafka():
    props = {k: v for k, v in TLS.items() if k != "zookeeper.clientCnxnSocket"}
    refused(props, "zookeeper.clientCnxnSocket is not set")
    refused({**TLS, "zookeeper.clientCnxnSocket": "ClientCnxnSocketNIO"}, "only org.apache")


@pytest.mark.parametrize("key", ["zookeeper.ssl.keystore.type", "zookeeper.ssl.truststore.type"])
@pytest.mark.parametrize("value", ["JKS", "PKCS12"])
def test_java_key_stores_are_refused(key, value):
    refused({**TLS, key: value}, f"{value} is not supported: only PEM")


def test_a_store_needs_its_pem_type():
    refused({**TLS, "zookeeper.ssl.keystore.type": ""}, "keystore.type must be PEM")


def test_stores_without_tls_are_refused():
    refused({"zookeeper.ssl.truststore.location": "/ca.pem"}, "client.enable is false")


def test_protocols():
    for config in both({**TLS, "zookeeper.ssl.enabled.protocols": "TLSv1.3,TLSv1.2"}):
        assert set(config.zookeeper_client_settings().protocols) == {"TLSv1.2", "TLSv1.3"}
    refused({**TLS, "zookeeper.ssl.protocol": "TLSv1.1"}, "only TLSv1.2 and TLSv1.3")
    refused({**TLS, "zookeeper.ssl.protocol": "TLSv1.3"}, "cannot keep to TLSv1.3 alone")
    refused({**TLS, "zookeeper.ssl.enabled.protocols": "TLSv1"}, "TLSv1 is not supported")
    refused({**TLS, "zookeeper.ssl.enabled.protocols": "TLSv1.3"}, "always offers")


@pytest.mark.parametrize(
    "key",
    [
        "zookeeper.ssl.cipher.suites",
        "zookeeper.ssl.truststore.password",
        "zookeeper.ssl.crl.enable",
    ],
)
def test_other_zookeeper_ssl_keys_are_refused_by_name(key):
    refused({**TLS, key: "x"}, f"{key} is not supported")


def test_set_acl_needs_an_authenticated_connection():
    refused({"zookeeper.set.acl": "true"}, "not authenticated")
    no_cert = {k: v for k, v in TLS.items() if "keystore" not in k}
    refused({**no_cert, "zookeeper.set.acl": "true"}, "not authenticated")
    with pytest.raises(ValueError, match="authenticated"):
        ZkClient("127.0.0.1:2182", secure_acls=True)


def test_kafkas_default_acls():
    def ids(path: str) -> set[tuple[str, str, int]]:
        return {(a.id.scheme, a.id.id, a.perms) for a in default_acls(True, path)}

    creator_all = ("auth", "", 31)
    world_read = ("world", "anyone", 1)
    for path in ("/brokers/topics/t", "/controller", "/config/topics/t", "/admin/delete_topics"):
        assert ids(path) == {creator_all, world_read}, path
    sensitive = ("/config/users", "/config/users/alice", "/config/brokers/1")
    for path in (*sensitive, "/delegation_token/tokens/t1"):
        assert ids(path) == {creator_all}, path
    assert ids("/delegation_token") == {creator_all, world_read}
    assert {(a.id.scheme, a.perms) for a in default_acls(False, "/config/users")} == {("world", 31)}
