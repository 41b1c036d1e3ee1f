"""Ports chosen for a local cluster's ZooKeeper, and ports a broker or controller binds for port 0,
are never the same twice and never in the kernel's ephemeral range, where a bind to port 0 or an
outgoing connection could take them; a port found taken is passed over for another."""

from __future__ import annotations

import socket

from odradek import listeners
from odradek.listeners import PORT_RANGE_LOW, ephemeral_range_start
from odradek.local.zookeeper import free_loopback_port


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    ports = [free_loopback_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(PORT_RANGE_LOW <= port < ephemeral_range_start() for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))  # free a moment ago, and still


def test_port_zero_binds_below_the_ephemeral_range_and_retries_a_taken_port(monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    with taken:
        port = taken.getsockname()[1]
        picks = iter([port])
        choose = listeners._random.randrange
        monkeypatch.setattr(
            listeners._random, "randrange", lambda low, high: next(picks, None) or choose(low, high)
        )
        with listeners.bind_any_port("127.0.0.1") as bound:
            got = bound.getsockname()[1]
    assert got != port
    assert PORT_RANGE_LOW <= got < ephemeral_range_start()
