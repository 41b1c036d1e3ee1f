"""Network addresses in configuration: listeners, ``host:port`` pairs, ZooKeeper connect strings.

Formats, as Kafka and ZooKeeper write them:

- a listener is ``NAME://host:port``; ``listeners`` is a comma-separated list of them. An empty
  host binds every interface (``PLAINTEXT://:9092``), an IPv6 host is bracketed
  (``PLAINTEXT://[::1]:9092``), port 0 lets the system choose. Only the ``PLAINTEXT`` listener
  exists for now: Odradek has no TLS or SASL yet, so any other name is refused with that reason;
- an address is ``host:port`` (same host rules);
- ``zookeeper.connect`` is ``host[:port][,host[:port]...][/chroot]``; the port defaults to
  ZooKeeper's 2181 and the chroot follows ZooKeeper's path rules.

Each ``parse_*`` function takes the configuration key's name (for the error message) and a string
or its own output, so it can serve as a ``ConfigKey.convert``. Pure functions: any thread.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from odradek.config.keys import invalid_value

__all__ = [
    "SUPPORTED_LISTENERS",
    "ZOOKEEPER_DEFAULT_PORT",
    "Endpoint",
    "HostPort",
    "ZooKeeperConnect",
    "parse_address",
    "parse_listeners",
    "parse_zookeeper_connect",
]

SUPPORTED_LISTENERS = ("PLAINTEXT",)
ZOOKEEPER_DEFAULT_PORT = 2181
PORT_MAX = 65535

# A host name or IPv4 address, or a bracketed IPv6 address (with an optional %zone).
_HOST = r"(?P<host>\[[0-9A-Fa-f:.]+(?:%[0-9A-Za-z._-]+)?\]|[0-9A-Za-z._-]*)"
_LISTENER = re.compile(rf"(?P<name>[A-Za-z0-9_]+)://{_HOST}:(?P<port>[0-9]+)")
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
    """A listener (Kafka's ``EndPoint``): name (also the security protocol), host, port."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{_format_host(self.host)}:{self.port}"

    @property
    def address(self) -> HostPort:
        return HostPort(self.host, self.port)


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


def _csv(name: str, raw: object) -> list[str]:
    """Kafka's ``parseCsvList``: split on commas, trim, drop empty entries."""
    if isinstance(raw, str):
        parts = raw.split(",")
    elif isinstance(raw, Iterable) and all(isinstance(p, str | Endpoint) for p in raw):
        parts = [str(p) for p in raw]
    else:
        raise invalid_value(name, raw, "Expected a value of type LIST")
    return [p.strip() for p in parts if p.strip()]


def parse_listeners(name: str, raw: object) -> tuple[Endpoint, ...]:
    """``PLAINTEXT://host:port[,...]`` into endpoints; names are unique and upper-cased."""
    endpoints: list[Endpoint] = []
    for text in _csv(name, raw):
        match = _LISTENER.fullmatch(text)
        if match is None:
            example = "PLAINTEXT://127.0.0.1:9092"
            raise invalid_value(name, text, f"expected NAME://host:port, for example {example}")
        listener = match["name"].upper()
        if listener not in SUPPORTED_LISTENERS:
            raise invalid_value(
                name,
                text,
                f"only {', '.join(SUPPORTED_LISTENERS)} listeners are supported for now "
                f"(no TLS or SASL yet), not {listener}",
            )
        if any(e.name == listener for e in endpoints):
            raise invalid_value(name, raw, f"each listener must have a different name: {listener}")
        endpoints.append(Endpoint(listener, _host(match), _port(name, text, match["port"], 0)))
    if not endpoints:
        raise invalid_value(name, raw, "at least one listener is required")
    return tuple(endpoints)


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
