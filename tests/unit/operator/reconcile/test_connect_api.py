"""The REST adapter against a small aiohttp server speaking Kafka Connect's shapes: paths and
bodies, 404 as an answer, 400 refused with Kafka Connect's message, 409 and a dead worker
skipped for the next one, nothing answering as ConnectUnavailable."""

from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web

from odradek_operator.reconcile.connect_api import (
    ConnectRefused,
    ConnectUnavailable,
    RestConnectApi,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def serve(handler_status: dict, seen: list) -> tuple[web.AppRunner, str]:
    async def handle(request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        seen.append((request.method, request.path, body))
        status, answer = handler_status.get((request.method, request.path), (404, None))
        if answer is None and status == 404:
            answer = {"error_code": 404, "message": "Connector lines not found"}
        return web.json_response(answer, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}"


def test_requests_answers_and_errors() -> None:
    async def main() -> None:
        seen: list = []
        routes = {
            ("PUT", "/connectors/lines/config"): (201, {"name": "lines"}),
            ("GET", "/connectors/lines/config"): (200, {"name": "lines", "tasks.max": "1"}),
            ("PUT", "/connectors/lines/pause"): (202, None),
            ("GET", "/connectors/lines/status"): (200, {"connector": {"state": "PAUSED"}}),
            ("DELETE", "/connectors/lines"): (204, None),
            ("PUT", "/connectors/bad/config"): (
                400,
                {"error_code": 400, "message": 'Missing required configuration "file"'},
            ),
            ("PUT", "/connectors/busy/config"): (
                409,
                {"error_code": 409, "message": "Cannot complete request because of a rebalance"},
            ),
        }
        runner, url = await serve(routes, seen)
        dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        api = RestConnectApi([dead, url])
        try:
            await api.put_config("lines", {"tasks.max": "1"})
            assert seen[-1] == ("PUT", "/connectors/lines/config", {"tasks.max": "1"})
            assert await api.config("lines") == {"name": "lines", "tasks.max": "1"}
            assert await api.config("other") is None
            await api.set_target_state("lines", "PAUSED")
            assert seen[-1][:2] == ("PUT", "/connectors/lines/pause")
            assert await api.status("lines") == {"connector": {"state": "PAUSED"}}
            assert await api.status("other") is None
            assert await api.delete("lines") is True
            assert await api.delete("other") is False
            with pytest.raises(ConnectRefused) as refused:
                await api.put_config("bad", {})
            assert refused.value.message == 'Missing required configuration "file"'
            with pytest.raises(ConnectUnavailable) as busy:
                await api.put_config("busy", {})
            assert "409 Cannot complete request because of a rebalance" in str(busy.value)
            assert "ClientConnectorError" in str(busy.value)  # the dead worker, then 409
        finally:
            await api.close()
            await runner.cleanup()
        lonely = RestConnectApi([dead])
        try:
            with pytest.raises(ConnectUnavailable):
                await lonely.status("lines")
        finally:
            await lonely.close()

    asyncio.run(main())
