"""One broker process with tight connection limits and room for 64 MiB requests, shared by the
tests that push a broker hard (hostile connections, stalls of its event loop)."""

from __future__ import annotations

import pytest

MIB = 1024 * 1024
POOL_BYTES = 128 * MIB  # queued.max.request.bytes
IDLE_MS = 3_000  # connections.max.idle.ms
RECEIVE_TIMEOUT_MS = 6_000  # odradek.socket.request.receive.timeout.ms
MESSAGE_MAX_BYTES = 80 * MIB  # message.max.bytes: a 64 MiB batch fits


@pytest.fixture(scope="package")
def hardened_broker(tmp_path_factory, local_cluster):
    """(the broker member, its bootstrap address) of a 1-broker cluster with the limits above."""
    overrides = {
        "queued.max.request.bytes": str(POOL_BYTES),
        "connections.max.idle.ms": str(IDLE_MS),
        "odradek.socket.request.receive.timeout.ms": str(RECEIVE_TIMEOUT_MS),
        "message.max.bytes": str(MESSAGE_MAX_BYTES),
    }
    data_dir = tmp_path_factory.mktemp("hardened")
    with local_cluster(data_dir, brokers=1, broker_overrides=overrides) as state:
        broker = next(m for m in state.members if m.role == "broker")
        yield broker, state.bootstrap_servers
