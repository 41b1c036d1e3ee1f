"""A broker's AlterPartitionReassignments and ListPartitionReassignments handlers forward the
client's request over TCP to the controller's listener and return its answer (v0 and v1; a
listing that names partitions reduced to each once); with
no controller to reach they refuse with NOT_CONTROLLER or, past the request's timeout,
REQUEST_TIMED_OUT, for the whole request and every partition."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from controller_doubles import alter_request, list_request

from odradek.broker.context import BrokerContext, RequestContext
from odradek.broker.controller_link import ControllerLink
from odradek.broker.handlers import alter_partition_reassignments as alter_handler
from odradek.broker.handlers import list_partition_reassignments as list_handler
from odradek.config.endpoints import HostPort
from odradek.controller.handlers import served
from odradek.controller.model import ReplicaAssignment
from odradek.controller.server import ControllerServer
from odradek.errors import ErrorCode

TIMEOUT_S = 10.0
T = "orders"


def _context(link: ControllerLink | None) -> RequestContext:
    broker = BrokerContext(1, replica_manager=None, metadata=None, controller=link)  # type: ignore[arg-type]
    return RequestContext(header=None, broker=broker, listener=None, served_versions={})  # type: ignore[arg-type]


@pytest.mark.parametrize("version", [0, 1])
def test_the_broker_forwards_to_the_controller_and_returns_its_answer(harness, version):
    async def scenario():
        await harness.start(brokers=(1, 2, 3, 4))
        harness.store.create_topic(T, {0: (1, 2, 3)})
        await harness.settle()
        server = ControllerServer(served(harness.controller))
        port = await server.start("127.0.0.1", 0)
        stop = asyncio.Event()
        harness.controller.election = None  # run() must not campaign or resign here
        runner = asyncio.ensure_future(harness.controller.run(stop))

        async def find_controller():
            return HostPort("127.0.0.1", port)

        link = ControllerLink(find_controller)
        try:
            ctx = _context(link)
            response = await alter_handler.handle(ctx, alter_request({(T, 0): (4, 2, 3)}, version))
            assert type(response).__version__ == version
            assert response.error_code == ErrorCode.none
            assert [p.error_code for p in response.responses[0].partitions] == [ErrorCode.none]
            listed = await list_handler.handle(ctx, list_request())
            partition = listed.topics[0].partitions[0]
            assert (tuple(partition.replicas), tuple(partition.adding_replicas)) == (
                (4, 2, 3, 1),
                (4,),
            )
            assert harness.model.assignment((T, 0)) == ReplicaAssignment((4, 2, 3, 1), (4,), (1,))
            # Naming partitions (once, twice, a topic with none): reduced, then forwarded.
            named = await list_handler.handle(ctx, list_request({T: (0, 0, 1), "other": ()}))
            assert named.error_code == ErrorCode.none
            assert [(t.name, [p.partition_index for p in t.partitions]) for t in named.topics] == [
                (T, [0])
            ]
        finally:
            await link.close()
            stop.set()
            await asyncio.wait_for(runner, TIMEOUT_S)
            await server.stop()

    asyncio.run(scenario())


def test_without_a_controller_link_the_request_is_refused_with_not_controller():
    async def scenario():
        ctx = _context(None)
        response = await alter_handler.handle(ctx, alter_request({(T, 0): (1, 2)}))
        assert response.error_code == ErrorCode.not_controller
        assert response.responses[0].partitions[0].error_code == ErrorCode.not_controller
        listed = await list_handler.handle(ctx, list_request())
        assert listed.error_code == ErrorCode.not_controller

    asyncio.run(scenario())


def test_no_controller_within_the_timeout_answers_request_timed_out():
    async def scenario():
        async def nobody():
            return None

        ctx = _context(ControllerLink(nobody))
        request = alter_request({(T, 0): (1, 2), (T, 1): None}, timeout=timedelta(seconds=1))
        response = await asyncio.wait_for(alter_handler.handle(ctx, request), TIMEOUT_S)
        assert response.error_code == ErrorCode.request_timed_out
        codes = {p.error_code for p in response.responses[0].partitions}
        assert codes == {ErrorCode.request_timed_out}
        assert "No active controller" in response.error_message

    asyncio.run(scenario())
