"""A local cluster grows and shrinks: `add_broker` starts a new broker (with its rack) that
every broker's Metadata lists; `stop_broker(forget=True)` stops it by its pid and drops it from
the state file, so `down` no longer knows it."""

from __future__ import annotations

import asyncio

import pytest

from odradek.client.connection import BrokerConnection
from odradek.local import cluster
from odradek.local.cluster import ClusterState, pid_alive
from odradek.protocol import schemas
from support.waiting import wait_equal

pytestmark = pytest.mark.integration

WAIT_S = 30.0


async def _brokers(address: str) -> dict[int, str | None]:
    host, port = address.rsplit(":", 1)
    async with await BrokerConnection.open(host, int(port), connect_timeout_s=2) as connection:
        response = await connection.send(schemas.request_schema(3, 1)(topics=()), timeout_s=5)
    return {int(b.node_id): b.rack for b in response.brokers}


def test_add_and_remove_a_broker(tmp_path, local_cluster):
    with local_cluster(tmp_path / "cluster", brokers=1, racks={1: "r1"}) as state:
        added = cluster.add_broker(tmp_path / "cluster", rack="r2")
        assert added.id == 2
        recorded = ClusterState.read(tmp_path / "cluster")
        assert recorded is not None and added.address in recorded.bootstrap_servers
        wait_equal(
            lambda: asyncio.run(_brokers(state.bootstrap_servers)),
            {1: "r1", 2: "r2"},
            "the brokers Metadata lists",
            WAIT_S,
        )

        stopped = cluster.stop_broker(tmp_path / "cluster", 2, forget=True)
        assert not pid_alive(stopped.pid)
        recorded = ClusterState.read(tmp_path / "cluster")
        assert recorded is not None
        assert [m.id for m in recorded.members if m.role == "broker"] == [1]
        assert stopped.address not in recorded.bootstrap_servers
        wait_equal(
            lambda: asyncio.run(_brokers(state.bootstrap_servers)),
            {1: "r1"},
            "the brokers Metadata lists",
            WAIT_S,
        )
