"""The ``zookeeper.ssl.*`` client keys and ``zookeeper.set.acl``: how brokers and the controller
reach ZooKeeper (Kafka 3.x's names, PEM only).

``ZK_CLIENT_KEYS`` are rows the broker and the controller both add to their tables;
``ZkClientSettings.of(config)`` reads them back and ``check`` states Kafka's rules:

- ``zookeeper.ssl.client.enable=true`` needs ``zookeeper.clientCnxnSocket`` set to
  ``org.apache.zookeeper.ClientCnxnSocketNetty`` (Kafka refuses TLS without it, as its
  ZooKeeper client only speaks TLS through Netty; no other value is accepted here);
- ``zookeeper.ssl.keystore.type`` and ``zookeeper.ssl.truststore.type`` must be PEM (Kafka's
  JKS and PKCS12 are refused: no Java key stores); the key store is one PEM file with the
  private key and its certificate chain, ``zookeeper.ssl.keystore.password`` decrypting the key;
- ``zookeeper.ssl.endpoint.identification.algorithm`` is HTTPS (Kafka's default: the server's
  certificate must name the host connected to) or empty (no hostname check);
- ``zookeeper.ssl.protocol`` is TLSv1.2 (Kafka's default) and ``zookeeper.ssl.enabled.protocols``,
  if set, lists TLSv1.2 and TLSv1.3: the client (kazoo's TLS context) always offers both and
  negotiates the highest the server takes, so TLSv1.3 alone, or a narrower list, would not be
  honoured;
- ``zookeeper.set.acl=true`` needs an authenticated connection: TLS with a key store (a client
  certificate, ZooKeeper's x509 provider), since CREATOR_ALL names the creator's identity and
  without one every znode would stay world-writable (Kafka refuses it without SASL or TLS).

Any other ``zookeeper.ssl.*`` key is refused by name (``unsupported_zk_key``). Pure and
immutable: any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.config.keys import ConfigKey, ConfigType, invalid_value, optional_string
from odradek.config.ssl import TLS_PROTOCOLS, tls_protocols
from odradek.errors import InvalidConfigError

__all__ = [
    "CNXN_SOCKET_NETTY",
    "ZK_CLIENT_KEYS",
    "ZkClientSettings",
    "unsupported_zk_key",
]

CNXN_SOCKET_NETTY = "org.apache.zookeeper.ClientCnxnSocketNetty"
_ZK_SSL_PREFIX = "zookeeper.ssl."


def _pem_only(name: str, raw: object) -> str | None:
    value = optional_string(name, raw)
    if value is not None and value.upper() != "PEM":
        raise invalid_value(
            name, raw, f"{value} is not supported: only PEM stores are (no Java key stores)"
        )
    return None if value is None else "PEM"


def _protocol(name: str, raw: object) -> str:
    value = optional_string(name, raw)
    if value not in TLS_PROTOCOLS:
        raise invalid_value(name, raw, f"only {' and '.join(TLS_PROTOCOLS)} are supported")
    return value


def _protocols(name: str, raw: object) -> tuple[str, ...] | None:
    return tls_protocols(name, raw) or None


def _cnxn_socket(name: str, raw: object) -> str | None:
    value = optional_string(name, raw)
    if value is not None and value != CNXN_SOCKET_NETTY:
        raise invalid_value(name, raw, f"only {CNXN_SOCKET_NETTY} is supported")
    return value


def _identification(name: str, raw: object) -> str:
    value = optional_string(name, raw)
    if value is None:
        return ""
    if value.upper() != "HTTPS":
        raise invalid_value(name, raw, "HTTPS (check the server's host name) or empty (none)")
    return "HTTPS"


_T = ConfigType
ZK_CLIENT_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "zookeeper.set.acl",
        _T.BOOLEAN,
        False,
        "Create every znode with secure ACLs: writable only by this cluster's own identity.",
    ),
    ConfigKey(
        "zookeeper.ssl.client.enable",
        _T.BOOLEAN,
        False,
        "Connect to ZooKeeper over TLS (needs zookeeper.clientCnxnSocket=ClientCnxnSocketNetty).",
    ),
    ConfigKey(
        "zookeeper.clientCnxnSocket",
        _T.STRING,
        None,
        f"The ZooKeeper client's socket; only {CNXN_SOCKET_NETTY}, required with TLS.",
        convert=_cnxn_socket,
    ),
    ConfigKey(
        "zookeeper.ssl.keystore.location",
        _T.STRING,
        None,
        "A PEM file with the client's private key and certificate chain (its x509 identity).",
        convert=optional_string,
    ),
    ConfigKey(
        "zookeeper.ssl.keystore.password",
        _T.PASSWORD,
        None,
        "The password of an encrypted private key in the key store.",
        convert=optional_string,
    ),
    ConfigKey(
        "zookeeper.ssl.keystore.type",
        _T.STRING,
        None,
        "The key store's format: only PEM.",
        convert=_pem_only,
    ),
    ConfigKey(
        "zookeeper.ssl.truststore.location",
        _T.STRING,
        None,
        "A PEM file of the certificate authorities ZooKeeper's certificate is checked against.",
        convert=optional_string,
    ),
    ConfigKey(
        "zookeeper.ssl.truststore.type",
        _T.STRING,
        None,
        "The trust store's format: only PEM.",
        convert=_pem_only,
    ),
    ConfigKey(
        "zookeeper.ssl.endpoint.identification.algorithm",
        _T.STRING,
        "HTTPS",
        "HTTPS: the server's certificate must name the host connected to; empty: not checked.",
        convert=_identification,
    ),
    ConfigKey(
        "zookeeper.ssl.protocol",
        _T.STRING,
        "TLSv1.2",
        "TLSv1.2 (Kafka's default; the client offers TLSv1.2 and TLSv1.3 whatever is set).",
        convert=_protocol,
    ),
    ConfigKey(
        "zookeeper.ssl.enabled.protocols",
        _T.LIST,
        None,
        "The TLS versions allowed (TLSv1.2 and/or TLSv1.3); default: zookeeper.ssl.protocol on.",
        convert=_protocols,
    ),
)
_BY_NAME = {key.name: key for key in ZK_CLIENT_KEYS}


def unsupported_zk_key(name: str) -> InvalidConfigError | None:
    """The error for a ``zookeeper.ssl.*`` key that is not honoured; None otherwise."""
    if not name.startswith(_ZK_SSL_PREFIX) or name in _BY_NAME:
        return None
    supported = ", ".join(k for k in _BY_NAME if k.startswith(_ZK_SSL_PREFIX))
    return InvalidConfigError(
        f"{name} is not supported: Odradek's ZooKeeper TLS honours only {supported} "
        f"(PEM key and trust stores); remove it"
    )


@dataclass(frozen=True, slots=True)
class ZkClientSettings:
    """How a process connects to ZooKeeper, read from its configuration."""

    set_acl: bool = False
    ssl_client_enable: bool = False
    client_cnxn_socket: str | None = None
    keystore_location: str | None = None
    keystore_password: str | None = None
    keystore_type: str | None = None
    truststore_location: str | None = None
    truststore_type: str | None = None
    endpoint_identification_algorithm: str = "HTTPS"
    protocol: str = "TLSv1.2"
    enabled_protocols: tuple[str, ...] | None = None

    @classmethod
    def of(cls, config: object) -> ZkClientSettings:
        values: Mapping[str, object] = {
            key.name: getattr(config, key.attr) for key in ZK_CLIENT_KEYS
        }
        return cls(
            set_acl=bool(values["zookeeper.set.acl"]),
            ssl_client_enable=bool(values["zookeeper.ssl.client.enable"]),
            client_cnxn_socket=values["zookeeper.clientCnxnSocket"],  # type: ignore[arg-type]
            keystore_location=values["zookeeper.ssl.keystore.location"],  # type: ignore[arg-type]
            keystore_password=values["zookeeper.ssl.keystore.password"],  # type: ignore[arg-type]
            keystore_type=values["zookeeper.ssl.keystore.type"],  # type: ignore[arg-type]
            truststore_location=values["zookeeper.ssl.truststore.location"],  # type: ignore[arg-type]
            truststore_type=values["zookeeper.ssl.truststore.type"],  # type: ignore[arg-type]
            endpoint_identification_algorithm=values[  # type: ignore[arg-type]
                "zookeeper.ssl.endpoint.identification.algorithm"
            ],
            protocol=values["zookeeper.ssl.protocol"],  # type: ignore[arg-type]
            enabled_protocols=values["zookeeper.ssl.enabled.protocols"],  # type: ignore[arg-type]
        )

    @property
    def protocols(self) -> tuple[str, ...]:
        return self.enabled_protocols or (self.protocol,)

    @property
    def check_hostname(self) -> bool:
        return self.endpoint_identification_algorithm == "HTTPS"

    def check(self) -> None:
        if self.ssl_client_enable:
            if self.client_cnxn_socket != CNXN_SOCKET_NETTY:
                raise InvalidConfigError(
                    f"zookeeper.ssl.client.enable is true but zookeeper.clientCnxnSocket is "
                    f"not set: Kafka's ZooKeeper client needs {CNXN_SOCKET_NETTY} for TLS; "
                    f"set it"
                )
            if self.keystore_location is not None and self.keystore_type != "PEM":
                raise InvalidConfigError(
                    "zookeeper.ssl.keystore.location is set: zookeeper.ssl.keystore.type must "
                    "be PEM (Kafka's default, JKS, is not supported)"
                )
            if self.truststore_location is not None and self.truststore_type != "PEM":
                raise InvalidConfigError(
                    "zookeeper.ssl.truststore.location is set: zookeeper.ssl.truststore.type "
                    "must be PEM (Kafka's default, JKS, is not supported)"
                )
        else:
            for name, value in (
                ("zookeeper.ssl.keystore.location", self.keystore_location),
                ("zookeeper.ssl.truststore.location", self.truststore_location),
            ):
                if value is not None:
                    raise InvalidConfigError(
                        f"{name} is set but zookeeper.ssl.client.enable is false: the store "
                        f"would be ignored; enable TLS or remove it"
                    )
        if self.protocol != "TLSv1.2":
            raise InvalidConfigError(
                f"zookeeper.ssl.protocol={self.protocol} is not supported: the ZooKeeper client "
                f"(kazoo) always offers {' and '.join(TLS_PROTOCOLS)}, so it cannot keep to "
                f"{self.protocol} alone; remove it (TLSv1.2 is the default)"
            )
        if self.enabled_protocols is not None and set(self.enabled_protocols) != set(TLS_PROTOCOLS):
            raise InvalidConfigError(
                f"zookeeper.ssl.enabled.protocols={','.join(self.enabled_protocols)} is not "
                f"supported: the ZooKeeper client (kazoo) always offers "
                f"{' and '.join(TLS_PROTOCOLS)}; remove it or list both"
            )
        if self.set_acl and not (self.ssl_client_enable and self.keystore_location):
            raise InvalidConfigError(
                "zookeeper.set.acl is true but the connection to ZooKeeper is not "
                "authenticated: secure ACLs need TLS with a client certificate "
                "(zookeeper.ssl.client.enable=true and zookeeper.ssl.keystore.location); "
                "without one every znode would stay writable by anyone"
            )
