"""Network addresses in configuration: listeners and their table, ``host:port`` pairs, ZooKeeper.

Formats, as Kafka and ZooKeeper write them:

- a listener is ``NAME://host:port``; ``listeners`` is a comma-separated list of them. The name is
  any of letters, digits and ``_``, upper-cased as Kafka's ``ListenerName.normalised`` does, and
  unique in the list. An empty host binds every interface (``PLAINTEXT://:9092``), an IPv6 host
  is bracketed (``PLAINTEXT://[::1]:9092``), port 0 lets the system choose. In ``listeners`` two
  entries may share a port only if one is an IPv4 and the other an IPv6 address (Kafka's rule);
  ``advertised.listeners`` may repeat ports (a proxy in front);
- ``listener.security.protocol.map`` is ``NAME:PROTOCOL[,...]``, Kafka's map from a listener
  name to its security protocol; Kafka's four protocols are known, names unique;
- an address is ``host:port`` (same host rules);
- ``zookeeper.connect`` is ``host[:port][,host[:port]...][/chroot]``; the port defaults to
  ZooKeeper's 2181 and the chroot follows ZooKeeper's path rules.

``Listener`` is one row of a broker's listener table: name, security protocol, host, port and
role (``ListenerRole``: which APIs it serves). It is what a listener's server and every request
it reads carry, so a principal (from the protocol's TLS or SASL handshake) and an authorizer can
be added next to it later without new plumbing. Only the PLAINTEXT protocol is implemented:
``BrokerConfig`` refuses a listener mapped to another one.

Each ``parse_*`` function takes the configuration key's name (for the error message) and a string
or its own output, so it can serve as a ``ConfigKey.convert``. Pure functions: any thread.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from odradek.config.keys import invalid_value

__all__ = [
    "CONTROL_PLANE_LISTENER_NAME",
    "DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP",
    "SASL_SECURITY_PROTOCOLS",
    "TLS_SECURITY_PROTOCOLS",
    "ZOOKEEPER_DEFAULT_PORT",
    "Endpoint",
    "HostPort",
    "Listener",
    "ListenerProtocol",
    "ListenerRole",
    "SecurityProtocol",
    "ZooKeeperConnect",
    "parse_address",
    "parse_advertised_listeners",
    "parse_listener_name",
    "parse_listeners",
    "parse_security_protocol_map",
    "parse_zookeeper_connect",
]

ZOOKEEPER_DEFAULT_PORT = 2181
PORT_MAX = 65535
CONTROL_PLANE_LISTENER_NAME = "CONTROL_PLANE"


class SecurityProtocol(enum.IntEnum):
    """Kafka's security protocols; the values are the ids UpdateMetadata carries."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3


SASL_SECURITY_PROTOCOLS = frozenset({SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL})
TLS_SECURITY_PROTOCOLS = frozenset({SecurityProtocol.SSL, SecurityProtocol.SASL_SSL})

# Kafka's default (every protocol as a listener of its own name), plus the control-plane listener
# Odradek's default ``listeners`` has: Kafka has none by default (docs/configuration.md).
DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP = ",".join(
    [f"{p.name}:{p.name}" for p in SecurityProtocol] + [f"{CONTROL_PLANE_LISTENER_NAME}:PLAINTEXT"]
)

_NAME = r"[A-Za-z0-9_]+"
# A host name or IPv4 address, or a bracketed IPv6 address (with an optional %zone).
_HOST = r"(?P<host>\[[0-9A-Fa-f:.]+(?:%[0-9A-Za-z._-]+)?\]|[0-9A-Za-z._-]*)"
_LISTENER = re.compile(rf"(?P<name>{_NAME})://{_HOST}:(?P<port>[0-9]+)")
_ADDRESS = re.compile(rf"{_HOST}:(?P<port>[0-9]+)")
_ZK_HOST = re.compile(rf"{_HOST}(?::(?P<port>[0-9]+))?")


def _format_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class HostPort(NamedTuple):
    """A ``host:port`` address; an empty host means every interface."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{_format_host(self.host)}:{self.port}"


class Endpoint(NamedTuple):
    """One entry of ``listeners`` (Kafka's ``EndPoint`` before its protocol is looked up)."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{_format_host(self.host)}:{self.port}"

    @property
    def address(self) -> HostPort:
        return HostPort(self.host, self.port)


class ListenerProtocol(NamedTuple):
    """One entry of ``listener.security.protocol.map``."""

    name: str
    protocol: SecurityProtocol

    def __str__(self) -> str:
        return f"{self.name}:{self.protocol.name}"


class ListenerRole(enum.Enum):
    """Which APIs a listener serves.

    CLIENT listeners serve the clients' APIs (the inter-broker listener, which followers will
    fetch from, is one of them); the CONTROL_PLANE listener serves only the controller's requests
    (LeaderAndIsr, StopReplica, UpdateMetadata) and ApiVersions.
    """

    CLIENT = "client"
    CONTROL_PLANE = "control-plane"


@dataclass(frozen=True, slots=True)
class Listener:
    """One row of a broker's listener table; a server per row, named in each request's context."""

    name: str
    security_protocol: SecurityProtocol
    host: str
    port: int
    role: ListenerRole

    @property
    def control_plane(self) -> bool:
        return self.role is ListenerRole.CONTROL_PLANE

    def __str__(self) -> str:
        return f"{self.name}://{_format_host(self.host)}:{self.port}"


class ZooKeeperConnect(NamedTuple):
    """A parsed ``zookeeper.connect``; ``str()`` gives the string kazoo takes."""

    hosts: tuple[HostPort, ...]
    chroot: str  # "" for the root

    def __str__(self) -> str:
        return ",".join(map(str, self.hosts)) + self.chroot


def _port(name: str, raw: object, text: str, low: int) -> int:
    port = int(text)
    if not low <= port <= PORT_MAX:
        raise invalid_value(name, raw, f"port must be between {low} and {PORT_MAX}")
    return port


def _host(match: re.Match[str]) -> str:
    return match["host"].removeprefix("[").removesuffix("]")


def _csv(name: str, raw: object, element: type | tuple[type, ...] = Endpoint) -> list[str]:
    """Kafka's ``parseCsvList``: split on commas, trim, drop empty entries."""
    if isinstance(raw, str):
        parts = raw.split(",")
    elif isinstance(raw, Iterable) and all(isinstance(p, str | element) for p in raw):
        parts = [str(p) for p in raw]
    else:
        raise invalid_value(name, raw, "Expected a value of type LIST")
    return [p.strip() for p in parts if p.strip()]


def parse_listener_name(name: str, raw: object) -> str:
    """A listener name, upper-cased (Kafka's ``ListenerName.normalised``)."""
    if not isinstance(raw, str):
        raise invalid_value(name, raw, "Expected a value of type STRING")
    text = raw.strip()
    if re.fullmatch(_NAME, text) is None:
        raise invalid_value(name, raw, "a listener name is letters, digits and _, not empty")
    return text.upper()


def _ip_version(host: str) -> int | None:
    try:
        return ipaddress.ip_address(host.partition("%")[0]).version
    except ValueError:
        return None


def _check_ports(name: str, raw: object, endpoints: list[Endpoint]) -> None:
    """Kafka's rule: different ports, unless exactly two share one, an IPv4 and an IPv6 address.

    Port 0 (the system chooses) never collides.
    """
    by_port: dict[int, list[Endpoint]] = {}
    for endpoint in endpoints:
        if endpoint.port != 0:
            by_port.setdefault(endpoint.port, []).append(endpoint)
    for port, sharing in by_port.items():
        versions = sorted(str(_ip_version(e.host)) for e in sharing)
        if len(sharing) > 1 and versions != ["4", "6"]:
            raise invalid_value(
                name,
                raw,
                f"each listener must have a different port unless exactly one listener has an "
                f"IPv4 address and the other an IPv6 address (port {port})",
            )


def _parse_endpoints(name: str, raw: object, *, distinct_ports: bool) -> tuple[Endpoint, ...]:
    endpoints: list[Endpoint] = []
    for text in _csv(name, raw):
        match = _LISTENER.fullmatch(text)
        if match is None:
            example = "PLAINTEXT://127.0.0.1:9092"
            raise invalid_value(name, text, f"expected NAME://host:port, for example {example}")
        listener = match["name"].upper()
        if any(e.name == listener for e in endpoints):
            raise invalid_value(name, raw, f"each listener must have a different name: {listener}")
        endpoints.append(Endpoint(listener, _host(match), _port(name, text, match["port"], 0)))
    if not endpoints:
        raise invalid_value(name, raw, "at least one listener is required")
    if distinct_ports:
        _check_ports(name, raw, endpoints)
    return tuple(endpoints)


def parse_listeners(name: str, raw: object) -> tuple[Endpoint, ...]:
    """``NAME://host:port[,...]`` into endpoints: names unique and upper-cased, ports distinct."""
    return _parse_endpoints(name, raw, distinct_ports=True)


def parse_advertised_listeners(name: str, raw: object) -> tuple[Endpoint, ...]:
    """As ``parse_listeners``, but ports may repeat (Kafka's ``requireDistinctPorts=false``)."""
    return _parse_endpoints(name, raw, distinct_ports=False)


def parse_security_protocol_map(name: str, raw: object) -> tuple[ListenerProtocol, ...]:
    """``NAME:PROTOCOL[,...]`` (Kafka's ``parseCsvMap``: split at each entry's last ``:``)."""
    entries: list[ListenerProtocol] = []
    for text in _csv(name, raw, ListenerProtocol):
        listener, colon, protocol = text.rpartition(":")
        if not colon or re.fullmatch(_NAME, listener.strip()) is None:
            raise invalid_value(
                name, text, "expected LISTENER_NAME:SECURITY_PROTOCOL, for example CLIENT:PLAINTEXT"
            )
        known = SecurityProtocol.__members__.get(protocol.strip().upper())
        if known is None:
            raise invalid_value(
                name,
                text,
                f"invalid security protocol `{protocol.strip()}`; Kafka's are "
                f"{', '.join(p.name for p in SecurityProtocol)}",
            )
        entry = ListenerProtocol(listener.strip().upper(), known)
        if any(e.name == entry.name for e in entries):
            raise invalid_value(name, raw, f"listener {entry.name} is mapped twice")
        entries.append(entry)
    return tuple(entries)


def parse_address(name: str, raw: object) -> HostPort | None:
    """``host:port`` into a ``HostPort``; an empty value means "off" and gives ``None``."""
    if raw is None:
        return None
    if isinstance(raw, HostPort):
        raw = str(raw)
    if not isinstance(raw, str):
        raise invalid_value(name, raw, "Expected a value of type STRING")
    text = raw.strip()
    if not text:
        return None
    match = _ADDRESS.fullmatch(text)
    if match is None:
        raise invalid_value(name, raw, "expected host:port, for example 127.0.0.1:9644")
    return HostPort(_host(match), _port(name, raw, match["port"], 0))


def _check_chroot(name: str, raw: object, chroot: str) -> str:
    """ZooKeeper's path rules (``PathUtils.validatePath``); "/" alone means no chroot."""
    if chroot == "/":
        return ""
    if chroot.endswith("/") or any(part in ("", ".", "..") for part in chroot[1:].split("/")):
        raise invalid_value(name, raw, f"invalid chroot path {chroot}")
    if any(c == "\0" or c.isspace() for c in chroot):
        raise invalid_value(name, raw, f"invalid chroot path {chroot}")
    return chroot


def parse_zookeeper_connect(name: str, raw: object) -> ZooKeeperConnect:
    """``host[:port][,host[:port]...][/chroot]`` into hosts and chroot."""
    if isinstance(raw, ZooKeeperConnect):
        raw = str(raw)
    if not isinstance(raw, str):
        raise invalid_value(name, raw, "Expected a value of type STRING")
    text = raw.strip()
    hosts_text, slash, chroot = text.partition("/")
    hosts: list[HostPort] = []
    for part in hosts_text.split(","):
        match = _ZK_HOST.fullmatch(part.strip())
        if match is None or not match["host"]:
            raise invalid_value(
                name, raw, "expected host:port[,host:port...][/chroot], for example 127.0.0.1:2181"
            )
        port = ZOOKEEPER_DEFAULT_PORT if match["port"] is None else match["port"]
        hosts.append(HostPort(_host(match), _port(name, raw, str(port), 1)))
    return ZooKeeperConnect(tuple(hosts), _check_chroot(name, raw, slash + chroot) if slash else "")
