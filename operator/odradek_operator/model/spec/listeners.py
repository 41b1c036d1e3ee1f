"""``spec.listeners``, ``spec.controlPlane``, ``spec.metrics`` and ``spec.authorization``: the
client listeners (Strimzi's shape), the brokers' other ports, and Kafka's ACL authorizer.

Absent ``spec.listeners``: one PLAINTEXT listener (``DEFAULT_LISTENERS``, port 9092); the mapping
form from before issue 24 (``{client: {port}, controlPlane: {port}}``) is still read, the same. A
listener with ``tls`` or ``authentication`` secures the cluster (``Listener.secured``), and
``spec.authorization`` needs such a listener. Every port is checked against the others and the
operator's own (``names.CONTROLLER_PORT``, ``names.INTERNAL_PORT``, ZooKeeper's). Bounds,
defaults and the authentication types are the CRD's (readers.crd_*).

Immutable, no I/O: any thread may call it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.config.authorizer import super_user_principals
from odradek_operator import names
from odradek_operator.model.spec.network import network_policy_peers
from odradek_operator.model.spec.readers import (
    _ABSENT,
    SpecError,
    _bool,
    _int,
    _kind,
    _mapping,
    _only,
    _str,
    crd_default,
    crd_enum,
    crd_fact,
    crd_range,
)

__all__ = [
    "DEFAULT_LISTENERS",
    "RESERVED_LISTENER_NAMES",
    "Authorization",
    "Listener",
    "Ports",
]

_CLUSTER = names.CLUSTER_KIND
PORTS = crd_range(_CLUSTER, "spec.controlPlane.port")
LISTENERS_MAX = crd_fact(_CLUSTER, "spec.listeners", "maxItems")
LISTENER_NAME = re.compile(crd_fact(_CLUSTER, "spec.listeners[].name", "pattern"))
AUTHENTICATION_TYPES = crd_enum(_CLUSTER, "spec.listeners[].authentication.type")
LISTENER_TLS_DEFAULT: bool = crd_default(_CLUSTER, "spec.listeners[].tls")
SUPER_USERS_MAX = crd_fact(_CLUSTER, "spec.authorization.superUsers", "maxItems")
DEFAULT_CLIENT_PORT = 9092  # the listener before spec.listeners (the CRD has no default list)
DEFAULT_CONTROL_PLANE_PORT: int = crd_default(_CLUSTER, "spec.controlPlane.port")
DEFAULT_METRICS_PORT: int = crd_default(_CLUSTER, "spec.metrics.port")
DEFAULT_LISTENER_NAME = "plaintext"  # Kafka name PLAINTEXT: the listener before spec.listeners
# Listener names the operator gives its own listeners (their Kafka names upper case).
RESERVED_LISTENER_NAMES = ("internal", "controller", "client", "metrics")  # and container ports


def _port(section: Mapping[str, Any], where: str, default: int) -> int:
    return _int(section, "port", where, default, *PORTS)


@dataclass(frozen=True, slots=True)
class Listener:
    """One client listener of ``spec.listeners``: its Kafka name is ``name`` upper case."""

    name: str
    port: int
    tls: bool = LISTENER_TLS_DEFAULT
    authentication: str = "none"  # none | scram-sha-512 | tls
    # spec.listeners[].networkPolicyPeers as given (checked); None: from anywhere.
    network_policy_peers: tuple[Mapping[str, Any], ...] | None = None

    @property
    def kafka_name(self) -> str:
        return self.name.upper()

    @property
    def security_protocol(self) -> str:
        sasl = self.authentication == "scram-sha-512"
        if self.tls:
            return "SASL_SSL" if sasl else "SSL"
        return "SASL_PLAINTEXT" if sasl else "PLAINTEXT"

    @property
    def secured(self) -> bool:
        return self.tls or self.authentication != "none"


DEFAULT_LISTENERS = (Listener(DEFAULT_LISTENER_NAME, DEFAULT_CLIENT_PORT),)


@dataclass(frozen=True, slots=True)
class Authorization:
    """``spec.authorization``: Kafka's ACL authorizer and the user's extra super users (the
    brokers', controllers' and operator's principals are always added)."""

    type: str = "simple"
    super_users: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Ports:
    client: int = DEFAULT_CLIENT_PORT
    control_plane: int = DEFAULT_CONTROL_PLANE_PORT
    metrics: int = DEFAULT_METRICS_PORT


def _listeners(value: object) -> tuple[Listener, ...]:
    where = "spec.listeners"
    if value is None:
        return DEFAULT_LISTENERS
    if isinstance(value, Mapping):
        # Before issue 24 (and what the API server's defaults wrote into every cluster then):
        # {client: {port}, controlPlane: {port}}, one PLAINTEXT listener. Still read, the same.
        _only(value, where, ("client", "controlPlane"))
        client = _mapping(value.get("client"), f"{where}.client")
        _only(client, f"{where}.client", ("port", "networkPolicyPeers"))
        port = _port(client, f"{where}.client", DEFAULT_CLIENT_PORT)
        peers = network_policy_peers(
            client.get("networkPolicyPeers"), f"{where}.client.networkPolicyPeers"
        )
        return (Listener(DEFAULT_LISTENER_NAME, port, network_policy_peers=peers),)
    if not isinstance(value, list) or not value:
        raise SpecError(where, "expected a list of at least one listener")
    if len(value) > LISTENERS_MAX:
        raise SpecError(where, f"{len(value)} listeners; at most {LISTENERS_MAX}")
    out: dict[str, Listener] = {}
    for i, item in enumerate(value):
        path = f"{where}[{i}]"
        entry = _mapping(item, path)
        _only(entry, path, ("name", "port", "tls", "authentication", "networkPolicyPeers"))
        name = _str(entry, "name", path, None)
        if name is None or not LISTENER_NAME.fullmatch(name):
            raise SpecError(
                f"{path}.name",
                f"{name!r}: lowercase letters and digits, starting with a letter, at most 11",
            )
        if name in RESERVED_LISTENER_NAMES:
            raise SpecError(f"{path}.name", f"{name!r} is the operator's own listener's name")
        if name in out:
            raise SpecError(f"{path}.name", f"listener {name!r} is listed twice")
        auth = _mapping(entry.get("authentication"), f"{path}.authentication")
        _only(auth, f"{path}.authentication", ("type",))
        auth_type = _str(auth, "type", f"{path}.authentication", "none")
        if auth_type not in AUTHENTICATION_TYPES:
            raise SpecError(
                f"{path}.authentication.type",
                f"{auth_type!r}: one of {', '.join(AUTHENTICATION_TYPES)}",
            )
        tls = _bool(entry, "tls", path, LISTENER_TLS_DEFAULT)
        if auth_type == "tls" and not tls:
            raise SpecError(
                f"{path}.authentication.type",
                "tls authentication (client certificates) needs tls: true on the listener",
            )
        peers = network_policy_peers(entry.get("networkPolicyPeers"), f"{path}.networkPolicyPeers")
        out[name] = Listener(name, _port(entry, path, _ABSENT), tls, auth_type or "none", peers)
    return tuple(out.values())


def _authorization(value: object, secured: bool) -> Authorization | None:
    where = "spec.authorization"
    if value is None:
        return Authorization() if secured else None
    section = _mapping(value, where)
    _only(section, where, ("type", "superUsers"))
    if section.get("type") != "simple":
        raise SpecError(f"{where}.type", f"{section.get('type')!r}: only simple (Kafka's ACLs)")
    if not secured:
        raise SpecError(
            where,
            "needs a listener with tls or authentication: without them every client and "
            "every broker is User:ANONYMOUS and the ACLs could tell no one apart",
        )
    users = section.get("superUsers", [])
    if not isinstance(users, list) or len(users) > SUPER_USERS_MAX:
        raise SpecError(f"{where}.superUsers", f"expected a list of at most {SUPER_USERS_MAX}")
    checked = []
    for i, user in enumerate(users):
        try:
            if not isinstance(user, str):
                raise ValueError(f"expected a string, got {_kind(user)}")
            checked.extend(super_user_principals(user))
        except ValueError as e:
            raise SpecError(f"{where}.superUsers[{i}]", f"{user!r}: {e}") from e
    return Authorization("simple", tuple(dict.fromkeys(checked)))


def _listener_port_path(spec: Mapping[str, Any], i: int) -> str:
    if isinstance(spec.get("listeners"), Mapping):
        return "spec.listeners.client.port"
    return f"spec.listeners[{i}].port"


def _ports(spec: Mapping[str, Any], listeners: tuple[Listener, ...]) -> Ports:
    where = "spec.controlPlane"
    legacy = spec.get("listeners")
    if "controlPlane" not in spec and isinstance(legacy, Mapping) and "controlPlane" in legacy:
        where = "spec.listeners.controlPlane"  # the form before issue 24 (_listeners)
        control_plane = _mapping(legacy.get("controlPlane"), where)
    else:
        control_plane = _mapping(spec.get("controlPlane"), where)
    metrics = _mapping(spec.get("metrics"), "spec.metrics")
    _only(control_plane, where, ("port",))
    _only(metrics, "spec.metrics", ("port",))
    ports = Ports(
        client=listeners[0].port,
        control_plane=_port(control_plane, where, DEFAULT_CONTROL_PLANE_PORT),
        metrics=_port(metrics, "spec.metrics", DEFAULT_METRICS_PORT),
    )
    taken = {
        names.CONTROLLER_PORT: "the controllers' own listener",
        names.INTERNAL_PORT: "the brokers' INTERNAL listener",
        names.ZOOKEEPER_CLIENT_PORT: "ZooKeeper",
    }
    for path, port in (
        *((_listener_port_path(spec, i), lst.port) for i, lst in enumerate(listeners)),
        (f"{where}.port", ports.control_plane),
        ("spec.metrics.port", ports.metrics),
    ):
        if port in taken:
            raise SpecError(path, f"{port} is already {taken[port]}'s port")
        taken[port] = path
    return ports
