"""The broker epoch fence: only the czxid of this broker's current registration passes.

A controller can read a broker's new registration before the broker has recorded its epoch;
the broker then reads its own znode in a real ZooKeeper and takes the request only if that
znode, held by its own session, was created at exactly the epoch the request carries.
"""

from __future__ import annotations

import asyncio

import pytest

from odradek.broker import controller_requests
from odradek.broker.context import BrokerContext
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.replica_manager import ReplicaManager
from odradek.storage.manager import LogManager
from odradek.zk.client import ZkClient
from odradek.zk.paths import BrokerInfo, Endpoint, broker_path
from odradek.zk.registration import BrokerRegistrar

pytestmark = pytest.mark.integration

INFO = BrokerInfo(endpoints=(Endpoint("CONTROL_PLANE", "127.0.0.1", 9091),))


@pytest.fixture
def clients(hosts):
    made = [ZkClient(hosts, session_timeout_s=4.0, connect_timeout_s=10.0) for _ in range(2)]
    for client in made:
        client.start()
        client.ensure_paths()
    yield made
    for client in made:
        client.close()


def _context(broker_id: int, zk: ZkClient, tmp_path) -> BrokerContext:
    logs = LogManager([tmp_path / f"broker-{broker_id}"])
    return BrokerContext(broker_id, ReplicaManager(broker_id, logs), MetadataCache(), zk=zk)


def test_only_the_current_registration_passes(clients, tmp_path):
    mine, other = clients

    async def scenario() -> None:
        # Registered, but (as in the race) not yet recorded in the broker's context.
        await BrokerRegistrar(mine, 9, INFO).register()
        epoch = (await mine.aexists(broker_path(9))).czxid
        context = _context(9, mine, tmp_path)
        assert context.broker_epoch is None
        for wrong in (-1, epoch - 1, epoch + 1):
            assert not await controller_requests.accept_broker_epoch(context, wrong, "test")
        assert context.broker_epoch is None
        assert await controller_requests.accept_broker_epoch(context, epoch, "test")
        assert context.broker_epoch == epoch  # learnt from its own znode
        assert await controller_requests.accept_broker_epoch(context, epoch, "test")
        assert not await controller_requests.accept_broker_epoch(context, epoch - 1, "test")

        # A znode at that epoch held by another session is not this broker's registration.
        await BrokerRegistrar(other, 10, INFO).register()
        theirs = (await other.aexists(broker_path(10))).czxid
        impostor = _context(10, mine, tmp_path)
        assert not await controller_requests.accept_broker_epoch(impostor, theirs, "test")
        assert impostor.broker_epoch is None

    asyncio.run(scenario())
