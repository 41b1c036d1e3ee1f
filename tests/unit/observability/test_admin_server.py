"""The admin server, on a real 127.0.0.1 socket, serves metrics, health and readiness over HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from odradek.observability.admin_server import (
    READY_REASONS_MAX,
    AdminServer,
    not_ready_reasons,
    start_admin_server,
)
from odradek.observability.metrics import broker_metrics, common_metrics, new_registry

Scenario = Callable[[AdminServer, aiohttp.ClientSession], Awaitable[None]]


def run_with_server(scenario: Scenario, registry=None, *, ready=lambda: True, health=None):
    """Start a server on 127.0.0.1 port 0, run ``scenario`` against it, stop it."""

    async def main() -> None:
        server = await start_admin_server(
            "127.0.0.1", 0, registry or new_registry(), ready=ready, health=health
        )
        try:
            timeout = aiohttp.ClientTimeout(total=10)
            async with aiohttp.ClientSession(timeout=timeout) as client:
                await scenario(server, client)
        finally:
            await server.stop()

    asyncio.run(main())


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_scrape_sees_counters_move():
    registry = new_registry()
    broker = broker_metrics(registry)
    common = common_metrics(registry)

    async def scenario(server: AdminServer, client: aiohttp.ClientSession) -> None:
        assert server.port > 0
        async with client.get(f"{server.url}/metrics") as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain; version=")
            before = samples(await response.text())
        assert ("odradek_broker_bytes_in_total", (("topic", "events"),)) not in before
        assert before[("odradek_zookeeper_session_state", (("state", "lost"),))] == 1

        broker.record_produce("events", bytes_in=2048, messages_in=2)
        broker.observe_request("Produce", 0.001)
        common.set_zookeeper_session_state("connected")

        async with client.get(f"{server.url}/metrics") as response:
            after = samples(await response.text())
        assert after[("odradek_broker_bytes_in_total", (("topic", "events"),))] == 2048
        assert after[("odradek_broker_messages_in_total", (("topic", "events"),))] == 2
        key = ("odradek_requests_total", (("api", "Produce"), ("error", "none")))
        assert after[key] == 1
        assert after[("odradek_zookeeper_session_state", (("state", "connected"),))] == 1
        assert after[("odradek_zookeeper_session_state", (("state", "lost"),))] == 0

    run_with_server(scenario, registry)


def test_metrics_speaks_openmetrics_when_asked():
    registry = new_registry()
    broker_metrics(registry)

    async def scenario(server: AdminServer, client: aiohttp.ClientSession) -> None:
        headers = {"Accept": "application/openmetrics-text; version=1.0.0"}
        async with client.get(f"{server.url}/metrics", headers=headers) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
            assert (await response.text()).endswith("# EOF\n")

    run_with_server(scenario, registry)


def test_readiness_flips_from_503_to_200():
    reasons = ["zookeeper session not connected"]

    async def scenario(server: AdminServer, client: aiohttp.ClientSession) -> None:
        async with client.get(f"{server.url}/readyz") as response:
            assert response.status == 503
            assert await response.json() == {"ready": False, "reasons": reasons}
        reasons.clear()
        async with client.get(f"{server.url}/readyz") as response:
            assert response.status == 200
            assert await response.json() == {"ready": True, "reasons": []}

    run_with_server(scenario, ready=lambda: list(reasons))


def test_readiness_accepts_a_plain_boolean_and_survives_a_failing_check():
    state = {"ready": False}

    def ready() -> bool:
        if state["ready"] is None:
            raise RuntimeError("boom")
        return state["ready"]

    async def scenario(server: AdminServer, client: aiohttp.ClientSession) -> None:
        async with client.get(f"{server.url}/readyz") as response:
            assert response.status == 503
            assert (await response.json())["reasons"] == ["not ready"]
        state["ready"] = None
        async with client.get(f"{server.url}/readyz") as response:
            assert response.status == 503
            assert "boom" in (await response.json())["reasons"][0]
        state["ready"] = True
        async with client.get(f"{server.url}/readyz") as response:
            assert response.status == 200

    run_with_server(scenario, ready=ready)


def test_health_is_200_while_the_loop_runs_and_503_when_the_check_says_so():
    healthy = {"value": True}

    async def scenario(server: AdminServer, client: aiohttp.ClientSession) -> None:
        async with client.get(f"{server.url}/healthz") as response:
            assert response.status == 200
            assert await response.text() == "ok\n"
        healthy["value"] = False
        async with client.get(f"{server.url}/healthz") as response:
            assert response.status == 503

    run_with_server(scenario, health=lambda: healthy["value"])


def test_unknown_paths_are_404_and_other_methods_405():
    async def scenario(server: AdminServer, client: aiohttp.ClientSession) -> None:
        async with client.get(f"{server.url}/nope") as response:
            assert response.status == 404
        async with client.post(f"{server.url}/metrics", data=b"x") as response:
            assert response.status == 405
        async with client.head(f"{server.url}/healthz") as response:
            assert response.status == 200

    run_with_server(scenario)


def test_stop_releases_the_port_and_a_taken_port_raises():
    async def main() -> None:
        server = await start_admin_server("127.0.0.1", 0, new_registry(), ready=lambda: True)
        port = server.port
        with pytest.raises(OSError):
            await start_admin_server("127.0.0.1", port, new_registry(), ready=lambda: True)
        await server.stop()
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            pass

    asyncio.run(main())


def test_not_ready_reasons_are_normalised_and_the_body_is_bounded():
    assert not_ready_reasons(True) == []
    assert not_ready_reasons(False) == ["not ready"]
    assert not_ready_reasons(()) == []
    many = [f"partition {i} offline" for i in range(READY_REASONS_MAX + 5)]

    async def scenario(server: AdminServer, client: aiohttp.ClientSession) -> None:
        async with client.get(f"{server.url}/readyz") as response:
            body = json.loads(await response.text())
        assert len(body["reasons"]) == READY_REASONS_MAX + 1
        assert body["reasons"][-1] == "... and 5 more"

    run_with_server(scenario, ready=lambda: many)
