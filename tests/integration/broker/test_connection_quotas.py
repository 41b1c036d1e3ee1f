"""The connection quotas on the broker's real server and real loopback sockets: per-IP limits and
their overrides (127.0.0.1 against 127.0.0.2), accept pacing by max.connection.creation.rate
(KIP-612) with nothing refused, and KIP-402's eviction for a protected listener."""

from __future__ import annotations

import socket
import time

import pytest
from tests.integration.broker.test_connection_limits import (
    api_versions,
    closed_by_broker,
    read_response,
)

from odradek.connection_quotas import ConnectionQuotas
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 10.0


def connect_from(source: str, port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S, source_address=(source, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def answered(sock: socket.socket, correlation_id: int = 1) -> bool:
    sock.settimeout(WAIT_S)
    sock.sendall(api_versions(correlation_id))
    try:
        return read_response(sock)[0] == correlation_id
    except (ConnectionError, TimeoutError):
        return False


def rejected(broker, listener: str, reason: str) -> float:
    return (
        broker.registry.get_sample_value(
            "odradek_connections_rejected_total", {"listener": listener, "reason": reason}
        )
        or 0.0
    )


def test_max_connections_per_ip_and_its_overrides(make_broker):
    quotas = ConnectionQuotas(
        max_connections_per_ip=3, max_connections_per_ip_overrides="127.0.0.2:6"
    )
    broker = make_broker(quotas=quotas)
    # the broker's registry, made after the quotas here
    quotas.metrics = broker.metrics.connection_quotas
    socks = []
    try:
        ones = [connect_from("127.0.0.1", broker.port) for _ in range(3)]
        twos = [connect_from("127.0.0.2", broker.port) for _ in range(6)]
        socks += ones + twos
        assert all(answered(s) for s in ones + twos)
        extra_one = connect_from("127.0.0.1", broker.port)
        extra_two = connect_from("127.0.0.2", broker.port)
        socks += [extra_one, extra_two]
        assert closed_by_broker(extra_one, WAIT_S) and closed_by_broker(extra_two, WAIT_S)
        assert rejected(broker, "PLAINTEXT", "max_connections_per_ip") == 2
        ones[0].close()  # a slot frees for its address only
        wait_until(lambda: quotas.per_ip.get("127.0.0.1") == 2, "the released slot", WAIT_S)
        again = connect_from("127.0.0.1", broker.port)
        socks.append(again)
        assert answered(again)
    finally:
        for s in socks:
            s.close()


def test_creation_rate_paces_accepts_without_refusing(make_broker):
    rate, n = 20, 50
    broker = make_broker(max_connection_creation_rate=rate)
    socks = []
    try:
        started = time.monotonic()
        socks = [connect_from("127.0.0.1", broker.port) for _ in range(n)]
        assert all(answered(s) for s in socks)  # every one served: waited, not refused
        elapsed_s = time.monotonic() - started
        throttled_s = broker.registry.get_sample_value(
            "odradek_connection_accept_throttle_seconds_total", {"listener": "PLAINTEXT"}
        )
        print(f"{n} connections at max.connection.creation.rate={rate}: {elapsed_s:.2f} s")
        # a second's burst of `rate`, then one every 1/rate s
        assert elapsed_s >= (n - rate) / rate * 0.9
        assert throttled_s and throttled_s > 0
    finally:
        for s in socks:
            s.close()


def test_a_protected_listener_over_max_connections_evicts_the_least_recently_used(make_broker):
    quotas = ConnectionQuotas(max_connections=4, protected_listeners=("CONTROL_PLANE",))
    broker = make_broker(quotas=quotas)
    # the broker's registry, made after the quotas here
    quotas.metrics = broker.metrics.connection_quotas
    socks = []
    try:
        clients = [connect_from("127.0.0.1", broker.port) for _ in range(4)]
        socks += clients
        for i, s in enumerate(clients):
            assert answered(s, i + 1)  # in order: the first is the least recently used
            time.sleep(0.01)
        refused = connect_from("127.0.0.1", broker.port)
        socks.append(refused)
        assert closed_by_broker(refused, WAIT_S)
        assert rejected(broker, "PLAINTEXT", "max_connections") == 1
        controller = connect_from("127.0.0.1", broker.control_port)
        socks.append(controller)
        assert answered(controller)
        assert closed_by_broker(clients[0], WAIT_S)
        assert all(answered(s, 10) for s in clients[1:])
    finally:
        for s in socks:
            s.close()
