"""Brokers find the active controller's listener in /controller, and follow it when another
controller takes over (``zk.controller_locator``), on a real ZooKeeper."""

from __future__ import annotations

import asyncio

import pytest

from odradek.zk.client import ZkClient
from odradek.zk.controller_locator import ControllerLocator, active_controller_endpoint
from odradek.zk.election import ControllerElection, read_controller

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = 4.0
WAIT_S = 20.0


async def _client(hosts: str) -> ZkClient:
    client = ZkClient(hosts, session_timeout_s=SESSION_TIMEOUT_S, connect_timeout_s=WAIT_S)
    await client.astart()
    return client


def test_the_locator_follows_the_active_controllers_endpoint(hosts):
    async def scenario():
        broker_zk = await _client(hosts)
        first_zk, second_zk = await _client(hosts), await _client(hosts)
        locator = ControllerLocator(broker_zk)
        first = ControllerElection(first_zk, 1000, endpoint=("127.0.0.1", 19093))
        second = ControllerElection(second_zk, 1001, endpoint=("127.0.0.1", 19094))
        try:
            await locator.start()
            assert locator.endpoint is None  # nobody campaigns yet
            assert await active_controller_endpoint(broker_zk) is None
            waiting = asyncio.ensure_future(locator.wait_for_endpoint(WAIT_S))
            first.start()
            assert await waiting == ("127.0.0.1", 19093)
            assert await active_controller_endpoint(broker_zk) == ("127.0.0.1", 19093)
            info, epoch = await read_controller(broker_zk)
            assert (info.controller_id, info.endpoint) == (1000, ("127.0.0.1", 19093))
            assert locator.epoch == epoch
            second.start()
            await first.resign()  # the second takes over; the watch tells the locator
            async with asyncio.timeout(WAIT_S):
                while locator.endpoint != ("127.0.0.1", 19094):
                    await asyncio.sleep(0.05)
            assert locator.current.controller_id == 1001 and locator.epoch == epoch + 1
        finally:
            await locator.stop()
            await second.resign()
            await first.resign()
            for client in (broker_zk, first_zk, second_zk):
                await client.aclose()

    asyncio.run(scenario())
