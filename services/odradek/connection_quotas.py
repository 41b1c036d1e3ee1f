"""Connection quotas: how many connections, from whom, and how fast (Kafka's
``ConnectionQuotas``, KIP-402 and KIP-612). One instance per broker, shared by its listeners'
servers, and one for the controller's listener; the one home of these limits, for both.

- ``max.connections`` bounds all listeners together and is each listener's default;
  ``listener.name.<l>.max.connections`` bounds one listener. A connection over a bound is refused
  (Kafka's acceptor leaves it in the backlog until a slot frees; refusing at once keeps a flood
  from filling the backlog too, and the client retries).
- The protected listeners (the inter-broker listener and the control-plane listener) are exempt
  from the broker-wide bound, as Kafka's inter-broker listener is (KIP-402): a connection there
  that takes the total over ``max.connections`` is admitted, and the least recently active idle
  connection of another listener is closed to make room (Kafka's ``closeExcessConnections``).
- ``max.connections.per.ip`` and ``max.connections.per.ip.overrides`` bound the connections of
  one IP address on client listeners; more are refused. Protected listeners are exempt (Kafka
  counts them too; here a broker never loses a connection to another broker for a limit a
  client can fill, and brokers often share an address).
- ``max.connection.creation.rate`` (all client listeners) and
  ``listener.name.<l>.max.connection.creation.rate`` (one listener, protected ones included)
  bound new connections per second (KIP-612): over the rate, the listener's accept loop waits
  (``accept_delay_s``) before it hands the connection over and accepts the next, so the excess
  waits in the kernel's backlog, as Kafka's acceptor does. The rate is a token bucket holding up
  to one second of connections (Kafka measures it over its quota window).

The controller (``controller.server``) has one listener, which brokers and anyone else reach
alike, so no listener can be protected there; a connection is protected instead once it has
been served a request the controller answers for brokers (``proven``: past the CLUSTER_ACTION
check when there is one). With ``evict_to_admit`` (the controller's), a new connection that
finds ``max.connections`` (or its listener's bound) reached is admitted, and the least recently
active idle connection that is not proven is closed to make room; it is refused only when every
open connection is busy or proven. A flood of idle connections thus evicts itself, and a broker
that reconnects (a restart, a lost connection) always gets in.

Refusals are counted in ``odradek_connections_rejected_total`` (listener, reason), evictions in
``odradek_connections_evicted_total`` (listener) and accept delays in
``odradek_connection_accept_throttle_seconds_total`` (listener), Kafka's
``connection-accept-throttle-time`` (``ConnectionQuotaMetrics``, on the broker's and the
controller's registries). The clock is injected. Event loop only (not thread-safe).
"""

from __future__ import annotations

import enum
import logging
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from odradek.config.connection_limits import INT_MAX, parse_ip_overrides
from odradek.observability.metrics import ConnectionQuotaMetrics

log = logging.getLogger(__name__)


class Refusal(enum.Enum):
    """Why a connection was refused (the metric's ``reason``)."""

    LISTENER_MAX_CONNECTIONS = "listener_max_connections"
    MAX_CONNECTIONS = "max_connections"
    MAX_CONNECTIONS_PER_IP = "max_connections_per_ip"


class Evictable(Protocol):
    """What eviction needs of a connection (the broker's ``connection.KafkaConnection``, the
    controller's ``server._Connection``)."""

    busy: bool
    closed: bool
    last_activity: float
    proven: bool  # served a broker's request (the controller's): never evicted

    def evict(self) -> None: ...


class _Rate:
    """A token bucket of ``rate_per_s`` tokens a second holding at most ``rate_per_s``."""

    def __init__(self, rate_per_s: int, now: float):
        self.rate_per_s = rate_per_s
        self.tokens = float(rate_per_s)
        self.updated = now

    def record(self, now: float) -> float:
        """Take one token; the seconds until it was there (0: at once)."""
        self.tokens = min(self.rate_per_s, self.tokens + (now - self.updated) * self.rate_per_s)
        self.updated = now
        self.tokens -= 1
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate_per_s


@dataclass
class _Listener:
    name: str
    max_connections: int
    rate: _Rate | None
    protected: bool
    connections: set = field(default_factory=set)


class ConnectionQuotas:
    """Admits, counts and paces the broker's connections; see the module."""

    def __init__(
        self,
        *,
        max_connections: int = INT_MAX,
        max_connections_per_ip: int = INT_MAX,
        max_connections_per_ip_overrides: str = "",
        max_connection_creation_rate: int = INT_MAX,
        protected_listeners: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        metrics: ConnectionQuotaMetrics | None = None,
        evict_to_admit: bool = False,
    ):
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.ip_overrides = _resolve(
            dict(
                parse_ip_overrides(
                    "max.connections.per.ip.overrides", max_connections_per_ip_overrides
                )
            )
        )
        self.protected = frozenset(protected_listeners)
        self.evict_to_admit = evict_to_admit
        self.clock = clock
        self.metrics = metrics
        now = clock()
        self.broker_rate = (
            _Rate(max_connection_creation_rate, now)
            if max_connection_creation_rate < INT_MAX
            else None
        )
        self.listeners: dict[str, _Listener] = {}
        self.per_ip: dict[str, int] = {}
        self.total = 0

    def add_listener(self, name: str, max_connections: int, max_creation_rate: int) -> None:
        rate = _Rate(max_creation_rate, self.clock()) if max_creation_rate < INT_MAX else None
        self.listeners[name] = _Listener(name, max_connections, rate, name in self.protected)

    # -- pacing --------------------------------------------------------------------------

    def accept_delay_s(self, listener: str) -> float:
        """Record one new connection on ``listener``; how long to wait before handing it over."""
        now = self.clock()
        state = self.listeners[listener]
        delay_s = 0.0
        if state.rate is not None:
            delay_s = state.rate.record(now)
        if self.broker_rate is not None and not state.protected:
            delay_s = max(delay_s, self.broker_rate.record(now))
        if delay_s > 0 and self.metrics is not None:
            self.metrics.connection_accept_throttle.labels(listener=listener).inc(delay_s)
        return delay_s

    # -- admission -----------------------------------------------------------------------

    def admit(self, listener: str, host: str, connection: Evictable) -> Refusal | None:
        """Count ``connection`` from ``host`` in, or say why not (counted and logged)."""
        state = self.listeners[listener]
        refusal = None
        if len(state.connections) >= state.max_connections:
            refusal = Refusal.LISTENER_MAX_CONNECTIONS
        elif not state.protected and self.total >= self.max_connections:
            refusal = Refusal.MAX_CONNECTIONS
        elif not state.protected and self.per_ip.get(host, 0) >= self.max_for(host):
            refusal = Refusal.MAX_CONNECTIONS_PER_IP
        if (
            refusal in (Refusal.LISTENER_MAX_CONNECTIONS, Refusal.MAX_CONNECTIONS)
            and self.evict_to_admit
            and self._evict_for(listener, within=state)
        ):
            refusal = None
        if refusal is not None:
            if self.metrics is not None:
                self.metrics.connections_rejected.labels(
                    listener=listener, reason=refusal.value
                ).inc()
            return refusal
        state.connections.add(connection)
        self.total += 1
        if not state.protected:
            self.per_ip[host] = self.per_ip.get(host, 0) + 1
        if state.protected and self.total > self.max_connections:
            self._evict_for(listener)
        return None

    def release(self, listener: str, host: str, connection: Evictable) -> None:
        state = self.listeners[listener]
        if connection not in state.connections:
            return
        state.connections.discard(connection)
        self.total -= 1
        if not state.protected:
            left = self.per_ip.get(host, 0) - 1
            if left > 0:
                self.per_ip[host] = left
            else:
                self.per_ip.pop(host, None)

    def max_for(self, host: str) -> int:
        return self.ip_overrides.get(host, self.max_connections_per_ip)

    def _evict_for(self, listener: str, within: _Listener | None = None) -> bool:
        """Close the least recently active idle connection that is not proven (Kafka's
        ``lowestPriorityChannel``) of an unprotected listener (of ``within`` only, when given),
        making room for one on ``listener``; False if there is none."""
        states = [within] if within is not None else list(self.listeners.values())
        candidates = [
            (c, state.name)
            for state in states
            if not state.protected
            for c in state.connections
            if not c.busy and not c.closed and not c.proven
        ]
        if not candidates:
            log.warning(
                "max.connections (%d) exceeded for a connection on %s: no idle client "
                "connection to close",
                self.max_connections,
                listener,
            )
            return False
        victim, on = min(candidates, key=lambda candidate: candidate[0].last_activity)
        log.info(
            "max.connections (%d) reached: closing the least recently used client connection "
            "for one on listener %s (KIP-402)",
            self.max_connections,
            listener,
        )
        victim.evict()
        if self.metrics is not None:
            self.metrics.connections_evicted.labels(listener=on).inc()
        return True


def _resolve(overrides: Mapping[str, int]) -> dict[str, int]:
    """Host names to addresses, once at start (Kafka resolves them as it reads the config)."""
    resolved: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            addresses = {
                info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
            }
        except OSError as e:
            log.warning("max.connections.per.ip.overrides: cannot resolve %s (%s)", host, e)
            addresses = {host}
        for address in addresses:
            resolved[address] = count
    return resolved
