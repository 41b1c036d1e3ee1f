"""Ports handed to the processes of a local cluster are never the same twice and never in the
kernel's ephemeral range, where a bind to port 0 or an outgoing connection could take them."""

from __future__ import annotations

import socket

from odradek.local.zookeeper import PORT_RANGE_LOW, _ephemeral_range_start, free_loopback_port


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    ports = [free_loopback_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(PORT_RANGE_LOW <= port < _ephemeral_range_start() for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))  # free a moment ago, and still
