"""Controller configuration: the keys of ``odradek controller``, read like ``server.properties``.

In Kafka's ZooKeeper mode the controller is a role inside a broker; Odradek runs it as its own
process, so it has its own small table. Keys keep Kafka's names where Kafka has them
(``zookeeper.*`` and the controller and leader-balancing keys of ``KafkaConfig``); the ZooKeeper
and admin listener rows are the broker's rows, so both processes parse them alike (only the admin
port's default differs, so a broker and a controller on one machine do not collide). So is
``control.plane.listener.name``: the controller sends its requests to the endpoint each broker
registered under that listener name, which must match the brokers' setting. The id is
``controller.id`` (Kafka's KRaft controllers use ``node.id``): it names the holder of the
``/controller`` node.

``listeners`` is the controller's own Kafka-protocol listener (brokers send it AlterPartition),
exactly one ``NAME://host:port`` with a host brokers can reach (it is published in
``/controller``); port 0 takes any free port. ``listener.security.protocol.map`` gives it
PLAINTEXT (the default) or SSL; an SSL listener takes the broker's ``ssl.*`` keys and
``listener.name.<l>.ssl.*`` overrides, and its key store is also the certificate the controller
presents to the brokers' control-plane listeners, its trust store what it checks theirs against
(``security.tls``). ``authorizer.class.name``, ``super.users`` and
``allow.everyone.if.no.acl.found`` are the brokers' (the same ACLs, from ZooKeeper): with an
authorizer, every request on the listener needs CLUSTER_ACTION on the cluster, which the brokers'
principals must hold (as super users, typically). ``unclean.leader.election.enable`` is the default
for topics that do not override it, as the broker key of the same name in Kafka's controller.
``max.connections``, ``max.connections.per.ip`` (and its overrides) and
``max.connection.creation.rate`` bound the listener as the brokers' keys bound theirs
(``connection_quotas``); brokers are the listener's only legitimate clients, so once
``max.connections`` is reached an idle connection that never carried a broker's request makes
room for a new one instead of the new one being refused.

Same file format, loader and guarantees as ``BrokerConfig`` (see ``properties.py``): build it with
``ControllerConfig.load(path, overrides)``; a ``ControllerConfig`` that exists is valid.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from odradek.config.broker import BROKER_KEYS
from odradek.config.endpoints import (
    Endpoint,
    HostPort,
    ListenerProtocol,
    SecurityProtocol,
    parse_listeners,
)
from odradek.config.keys import REQUIRED, ConfigKey, ConfigType
from odradek.config.properties import PropertiesConfig
from odradek.config.ssl import (
    LISTENER_PREFIX,
    SSL_KEYS,
    SslSettings,
    listener_override_properties,
    parse_listener_overrides,
    unsupported_key,
)
from odradek.config.zookeeper_tls import (
    ZK_CLIENT_KEYS,
    ZkClientSettings,
    unsupported_zk_key,
)
from odradek.errors import InvalidConfigError

__all__ = ["CONTROLLER_KEYS", "ControllerConfig"]

_T = ConfigType

CONTROLLER_LISTENER_NAME = "CONTROLLER"  # Kafka's KRaft controllers' conventional name
DEFAULT_CONTROLLER_LISTENERS = f"{CONTROLLER_LISTENER_NAME}://127.0.0.1:9093"

CONTROLLER_KEYS: Mapping[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey(
            "controller.id",
            _T.INT,
            REQUIRED,
            "This controller's id, unique among controllers; written in /controller.",
            minimum=0,
        ),
        BROKER_KEYS["zookeeper.connect"],
        BROKER_KEYS["zookeeper.session.timeout.ms"],
        BROKER_KEYS["zookeeper.connection.timeout.ms"],
        ConfigKey(
            "listeners",
            _T.LIST,
            DEFAULT_CONTROLLER_LISTENERS,
            "The controller's own listener, NAME://host:port (one): brokers send AlterPartition "
            "there; published in /controller. Port 0: any free port.",
            convert=parse_listeners,
        ),
        dataclasses.replace(
            BROKER_KEYS["listener.security.protocol.map"],
            default=f"{CONTROLLER_LISTENER_NAME}:PLAINTEXT",
            doc="Security protocol of the listener, NAME:PROTOCOL; PLAINTEXT or SSL.",
        ),
        *SSL_KEYS,
        BROKER_KEYS["authorizer.class.name"],
        BROKER_KEYS["super.users"],
        BROKER_KEYS["allow.everyone.if.no.acl.found"],
        *ZK_CLIENT_KEYS,
        BROKER_KEYS["unclean.leader.election.enable"],
        dataclasses.replace(BROKER_KEYS["odradek.admin.listener"], default="127.0.0.1:9645"),
        BROKER_KEYS["odradek.listeners.file"],
        dataclasses.replace(
            BROKER_KEYS["control.plane.listener.name"],
            doc="The brokers' listener this controller sends its requests to; as the brokers'.",
        ),
        dataclasses.replace(
            BROKER_KEYS["max.connections"],
            doc="Connections open at once on the listener. Once reached, a new connection is "
            "admitted and the least recently used idle connection that has not been served a "
            "broker's request is closed; it is refused only when none is (connection_quotas).",
        ),
        dataclasses.replace(
            BROKER_KEYS["max.connections.per.ip"],
            doc="Connections from one IP address at once on the listener, brokers' included; "
            "more are refused.",
        ),
        BROKER_KEYS["max.connections.per.ip.overrides"],
        dataclasses.replace(
            BROKER_KEYS["max.connection.creation.rate"],
            doc="New connections per second on the listener (KIP-612); a connection over the "
            "rate waits before it is served.",
        ),
        ConfigKey(
            "controller.socket.timeout.ms",
            _T.INT,
            30000,
            "How long a request to a broker (LeaderAndIsr, UpdateMetadata...) may take.",
            minimum=1,
        ),
        ConfigKey(
            "auto.leader.rebalance.enable",
            _T.BOOLEAN,
            True,
            "Whether leadership is moved back to preferred replicas when it drifts.",
        ),
        ConfigKey(
            "leader.imbalance.per.broker.percentage",
            _T.INT,
            10,
            "Share of a broker's partitions led elsewhere that triggers a rebalance.",
            minimum=0,
            maximum=100,
        ),
        ConfigKey(
            "leader.imbalance.check.interval.seconds",
            _T.LONG,
            300,
            "How often the controller checks leadership balance.",
            minimum=1,
        ),
    )
}


def _default(name: str) -> object:
    return CONTROLLER_KEYS[name].default


@dataclass(frozen=True, slots=True)
class ControllerConfig(PropertiesConfig):
    """A controller's static configuration; invalid values raise ``InvalidConfigError``."""

    KEYS: ClassVar[Mapping[str, ConfigKey]] = CONTROLLER_KEYS
    KIND: ClassVar[str] = "controller"

    controller_id: int
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int = _default("zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: int | None = None
    listeners: tuple[Endpoint, ...] = _default("listeners")
    listener_security_protocol_map: tuple[ListenerProtocol, ...] = _default(
        "listener.security.protocol.map"
    )
    ssl_keystore_type: str = _default("ssl.keystore.type")
    ssl_keystore_location: str | None = None
    ssl_keystore_key: str | None = None
    ssl_keystore_certificate_chain: str | None = None
    ssl_key_password: str | None = None
    ssl_truststore_type: str = _default("ssl.truststore.type")
    ssl_truststore_location: str | None = None
    ssl_truststore_certificates: str | None = None
    ssl_client_auth: str = _default("ssl.client.auth")
    ssl_enabled_protocols: tuple[str, ...] = _default("ssl.enabled.protocols")
    ssl_principal_mapping_rules: str = _default("ssl.principal.mapping.rules")
    authorizer_class_name: str = _default("authorizer.class.name")
    super_users: str = _default("super.users")
    allow_everyone_if_no_acl_found: bool = _default("allow.everyone.if.no.acl.found")
    zookeeper_set_acl: bool = False
    zookeeper_ssl_client_enable: bool = False
    zookeeper_clientCnxnSocket: str | None = None  # noqa: N815 (Kafka's key name)
    zookeeper_ssl_keystore_location: str | None = None
    zookeeper_ssl_keystore_password: str | None = None
    zookeeper_ssl_keystore_type: str | None = None
    zookeeper_ssl_truststore_location: str | None = None
    zookeeper_ssl_truststore_type: str | None = None
    zookeeper_ssl_endpoint_identification_algorithm: str = "HTTPS"
    zookeeper_ssl_protocol: str = "TLSv1.2"
    zookeeper_ssl_enabled_protocols: tuple[str, ...] | None = None
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    odradek_admin_listener: HostPort | None = _default("odradek.admin.listener")
    odradek_listeners_file: str = _default("odradek.listeners.file")
    control_plane_listener_name: str = _default("control.plane.listener.name")
    max_connections: int = _default("max.connections")
    max_connections_per_ip: int = _default("max.connections.per.ip")
    max_connections_per_ip_overrides: str = _default("max.connections.per.ip.overrides")
    max_connection_creation_rate: int = _default("max.connection.creation.rate")
    controller_socket_timeout_ms: int = _default("controller.socket.timeout.ms")
    auto_leader_rebalance_enable: bool = _default("auto.leader.rebalance.enable")
    leader_imbalance_per_broker_percentage: int = _default("leader.imbalance.per.broker.percentage")
    leader_imbalance_check_interval_seconds: int = _default(
        "leader.imbalance.check.interval.seconds"
    )

    # listener.name.<l>.ssl.* overrides as (LISTENER, key, value), sorted (config.ssl)
    listener_ssl_overrides: tuple[tuple[str, str, object], ...] = ()

    PATTERNED_FIELDS: ClassVar[tuple[str, ...]] = ("listener_ssl_overrides",)

    @classmethod
    def _split_patterned(
        cls, props: Mapping[str, object]
    ) -> tuple[Mapping[str, object], dict[str, object]]:
        for name in props:
            error = unsupported_key(name) or unsupported_zk_key(name)
            if error is not None:
                raise error
        rest, overrides = parse_listener_overrides(props)
        return rest, {"listener_ssl_overrides": overrides}

    def _patterned_properties(self) -> dict[str, str]:
        return listener_override_properties(self.listener_ssl_overrides)

    @property
    def security_protocol(self) -> SecurityProtocol:
        """The listener's protocol (checked to be in the map)."""
        return dict(self.listener_security_protocol_map)[self.listener.name]

    def ssl_settings(self) -> SslSettings:
        """What the listener uses when it is SSL: its overrides over the controller's keys."""
        wide = {key.name: getattr(self, key.attr) for key in SSL_KEYS}
        return SslSettings.resolve(self.listener.name, wide, self.listener_ssl_overrides)

    def zookeeper_client_settings(self) -> ZkClientSettings:
        """How this process connects to ZooKeeper (``zookeeper.ssl.*``, ``zookeeper.set.acl``)."""
        return ZkClientSettings.of(self)

    def _check(self) -> None:
        self.zookeeper_client_settings().check()
        if len(self.listeners) != 1:
            raise InvalidConfigError(
                "listeners: the controller serves exactly one listener, got "
                f"{','.join(map(str, self.listeners)) or 'none'}"
            )
        if not self.listeners[0].host:
            raise InvalidConfigError(
                f"listeners: {self.listeners[0]} has no host; the controller publishes it in "
                "/controller for brokers, so give one they can reach (e.g. 127.0.0.1)"
            )
        name = self.listener.name
        protocol = dict(self.listener_security_protocol_map).get(name)
        if protocol is None:
            raise InvalidConfigError(
                f"listeners: no security protocol for {name} in listener.security.protocol.map; "
                f"add {name}:PLAINTEXT or {name}:SSL"
            )
        if protocol not in (SecurityProtocol.PLAINTEXT, SecurityProtocol.SSL):
            raise InvalidConfigError(
                f"listener {name} is {protocol.name}: the controller's listener is PLAINTEXT or "
                f"SSL (mutual TLS), not SASL"
            )
        if protocol is SecurityProtocol.SSL:
            self.ssl_settings().check()
        for listener, key, _ in self.listener_ssl_overrides:
            if listener != name or protocol is not SecurityProtocol.SSL:
                raise InvalidConfigError(
                    f"{LISTENER_PREFIX}{listener.lower()}.{key} is set, but {listener} is not "
                    f"the controller's SSL listener ({self.listener})"
                )

    @property
    def listener(self) -> Endpoint:
        return self.listeners[0]

    @property
    def effective_zookeeper_connection_timeout_ms(self) -> int:
        if self.zookeeper_connection_timeout_ms is None:
            return self.zookeeper_session_timeout_ms
        return self.zookeeper_connection_timeout_ms


ControllerConfig.check_fields()
