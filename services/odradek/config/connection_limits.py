"""The connection limits' per-listener keys and the per-IP overrides list, as Kafka spells them.

Kafka's broker-wide ``max.connections`` and ``max.connection.creation.rate`` (KIP-402, KIP-612)
are also set per listener as ``listener.name.<l>.max.connections`` and
``listener.name.<l>.max.connection.creation.rate``; ``max.connections.per.ip.overrides`` is a
comma-separated ``host:count`` list (an IPv6 host splits at its last colon). Parsing only: what
the limits do at run time is ``odradek.connection_quotas``'s. Pure functions: any thread.
"""

from __future__ import annotations

from odradek.common.limits import INT32_MAX
from odradek.config.keys import invalid_value

__all__ = [
    "INT_MAX",
    "LISTENER_CONNECTION_KEYS",
    "listener_connection_properties",
    "normalize_ip_overrides",
    "parse_ip_overrides",
    "parse_listener_connection_key",
    "parse_listener_connection_value",
]

_PREFIX = "listener.name."
LISTENER_CONNECTION_KEYS = ("max.connections", "max.connection.creation.rate")
INT_MAX = INT32_MAX


def parse_listener_connection_key(name: str) -> tuple[str, str] | None:
    """``listener.name.<l>.max.connections`` (or ``.max.connection.creation.rate``) into
    (LISTENER, key); None for any other key."""
    if not name.startswith(_PREFIX):
        return None
    listener, dot, key = name[len(_PREFIX) :].partition(".")
    if not dot or not listener or key not in LISTENER_CONNECTION_KEYS:
        return None
    return listener.upper(), key


def parse_listener_connection_value(name: str, raw: object) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise invalid_value(name, raw, "Expected a value of type INT") from None
    if not 0 <= value <= INT_MAX:
        raise invalid_value(name, raw, f"Value must be between 0 and {INT_MAX}")
    return value


def listener_connection_properties(overrides: tuple[tuple[str, str, int], ...]) -> dict[str, str]:
    """The per-listener limits as properties again (``to_properties``)."""
    return {f"{_PREFIX}{listener.lower()}.{key}": str(value) for listener, key, value in overrides}


def parse_ip_overrides(name: str, raw: object) -> tuple[tuple[str, int], ...]:
    """``host:count[,host:count...]`` (Kafka's ``max.connections.per.ip.overrides``)."""
    if isinstance(raw, tuple):
        return raw
    if not isinstance(raw, str):
        raise invalid_value(name, raw, "Expected a value of type STRING")
    overrides: dict[str, int] = {}
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        host, colon, count = entry.rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        if not colon or not host or not count.strip().isdigit():
            raise invalid_value(name, raw, f"entry {entry!r} is not host:count")
        if host in overrides:
            raise invalid_value(name, raw, f"host {host} is listed twice")
        overrides[host] = min(int(count), INT_MAX)
    return tuple(sorted(overrides.items()))


def normalize_ip_overrides(name: str, raw: object) -> str:
    """The ``ConfigKey.convert`` of ``max.connections.per.ip.overrides``: the list checked and
    written back sorted (the field stays a string, as Kafka prints it)."""
    return ",".join(f"{host}:{count}" for host, count in parse_ip_overrides(name, raw))
