"""The controller's channel to a broker honours controller.socket.timeout.ms: a broker that never
answers has its request retried on a new connection after that long, not after 30 s."""

from __future__ import annotations

import asyncio

from odradek.controller.channel import ControllerChannels
from odradek.protocol.interbroker import UpdateMetadataRequest
from odradek.zk.paths import BrokerInfo, Endpoint


def test_a_silent_broker_is_given_up_on_after_the_configured_timeout():
    async def scenario() -> int:
        accepted = 0

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal accepted
            accepted += 1
            await reader.read(1 << 20)  # takes the request, never answers

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        channels = ControllerChannels("CONTROL_PLANE", request_timeout_s=0.3)
        try:
            info = BrokerInfo(endpoints=(Endpoint("CONTROL_PLANE", "127.0.0.1", port),))
            await channels.set_brokers({1: info})
            request = UpdateMetadataRequest(
                controller_id=1, controller_epoch=1, topic_states=(), live_brokers=()
            )
            channels.send(1, request)
            for _ in range(60):  # bounded: at most 3 s
                if accepted >= 2:
                    break
                await asyncio.sleep(0.05)
        finally:
            await channels.close()
            server.close()
            await server.wait_closed()
        return accepted

    assert asyncio.run(scenario()) >= 2  # timed out, and retried on a new connection
