"""The Connect REST API answers every error in Kafka's JSON shape with the right status: herder
errors, bad bodies naming the field, unknown routes, wrong methods, oversize bodies, unexpected
exceptions (500, and the worker keeps serving), and forwards to the leader (at most two hops)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from odradek.connect.rest.app import REST_REQUEST_BODY_MAX_BYTES
from support.connect_rest import CLIENT_TIMEOUT_S, MemoryHerder, run_with_app, serving, url

SOURCE = {"connector.class": "FileStreamSource", "tasks.max": "1"}


async def expect_error(response: aiohttp.ClientResponse, status: int, *words: str) -> str:
    body = await response.json()
    assert response.status == status, body
    assert set(body) == {"error_code", "message"} and body["error_code"] == status
    for word in words:
        assert word in body["message"], body["message"]
    return body["message"]


def run(scenario, herder: MemoryHerder | None = None) -> None:
    run_with_app(scenario, herder or MemoryHerder())


def test_missing_connector_is_404_on_every_connector_route() -> None:
    routes = [
        ("GET", "/connectors/x"),
        ("GET", "/connectors/x/config"),
        ("GET", "/connectors/x/status"),
        ("GET", "/connectors/x/tasks"),
        ("GET", "/connectors/x/tasks/0/status"),
        ("POST", "/connectors/x/restart"),
        ("POST", "/connectors/x/tasks/0/restart"),
        ("PUT", "/connectors/x/pause"),
        ("PUT", "/connectors/x/resume"),
        ("PUT", "/connectors/x/stop"),
        ("DELETE", "/connectors/x"),
        ("GET", "/connectors/x/offsets"),
        ("DELETE", "/connectors/x/offsets"),
        ("PATCH", "/connectors/x/config"),
    ]

    async def scenario(server, client):
        for method, path in routes:
            body = {} if method == "PATCH" else None
            async with client.request(method, url(server, path), json=body) as r:
                await expect_error(r, 404, "x")

    run(scenario)


def test_create_twice_is_409() -> None:
    async def scenario(server, client):
        body = {"name": "a", "config": SOURCE}
        async with client.post(url(server, "/connectors"), json=body) as r:
            assert r.status == 201
        async with client.post(url(server, "/connectors"), json=body) as r:
            await expect_error(r, 409, "already exists")

    run(scenario)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"", ["empty"]),
        (b"{not json", ["not valid JSON", "line 1"]),
        (b"[1, 2]", ["JSON object", "an array"]),
        (b'{"name": "a"}', ['"config"']),
        (b'{"name": "a", "config": "x"}', ['"config"', "a string"]),
        (b'{"name": "a", "config": {"tasks.max": 1}}', ['"tasks.max"', "a number", 'write "1"']),
        (b'{"name": "a", "config": {"topic": null}}', ['"topic"', "null"]),
        (b'{"name": 5, "config": {}}', ['"name"', "a number"]),
        (b'{"name": "  ", "config": {}}', ["empty"]),
        (b'{"name": "a/b", "config": {}}', ["'/'"]),
        (b'{"name": "a\\u0001", "config": {}}', ["control"]),
        (b'{"name": "a", "config": {"name": "b"}}', ["'b'", "does not match", "'a'"]),
        (b'{"name": "a", "config": {}, "initial_state": "GONE"}', ['"initial_state"']),
        (b'{"name": "a", "config": {}, "extra": 1}', ["extra"]),
        (b'{"config": {}}', ['"name"']),
        (b"\xff\xfe", ["UTF-8"]),
    ],
)
def test_bad_create_bodies_are_400_naming_the_field(body: bytes, words: list[str]) -> None:
    herder = MemoryHerder()

    async def scenario(server, client):
        headers = {"Content-Type": "application/json"}
        async with client.post(url(server, "/connectors"), data=body, headers=headers) as r:
            await expect_error(r, 400, *words)
        assert not any(call == "put_connector_config" for call, _ in herder.calls)

    run(scenario, herder)


def test_herder_validation_error_is_400_with_its_message() -> None:
    async def scenario(server, client):
        body = {"name": "a", "config": {"tasks.max": "1"}}
        async with client.post(url(server, "/connectors"), json=body) as r:
            await expect_error(r, 400, "connector.class")

    run(scenario)


def test_bad_put_patch_offsets_and_query_bodies() -> None:
    async def scenario(server, client):
        async with client.post(url(server, "/connectors"), json={"name": "a", "config": SOURCE}):
            pass
        cases = [
            ("PUT", "/connectors/a/config", {"connector.class": ["x"]}, '"connector.class"'),
            ("PUT", "/connectors/a/config", {"name": "b", **SOURCE}, "does not match"),
            ("PATCH", "/connectors/a/config", {"tasks.max": 2}, '"tasks.max"'),
            ("PATCH", "/connectors/a/config", {"name": "b"}, "renamed"),
            ("PATCH", "/connectors/a/offsets", {}, '"offsets"'),
            ("PATCH", "/connectors/a/offsets", {"offsets": {}}, '"offsets" must be an array'),
            ("PATCH", "/connectors/a/offsets", {"offsets": []}, "must not be empty"),
            ("PATCH", "/connectors/a/offsets", {"offsets": [1]}, "offsets[0]"),
            ("PATCH", "/connectors/a/offsets", {"offsets": [{"partition": 1}]}, "partition"),
            (
                "PATCH",
                "/connectors/a/offsets",
                {"offsets": [{"partition": {}, "offset": 3}]},
                "offsets[0].offset",
            ),
            ("POST", "/connectors/a/restart?includeTasks=yes", None, "includeTasks"),
            ("GET", "/connectors/a/tasks/one/status", None, "task id"),
            ("GET", "/connectors/a/tasks/-1/status", None, "negative"),
            ("GET", "/connector-plugins?connectorsOnly=maybe", None, "connectorsOnly"),
        ]
        for method, path, body, word in cases:
            async with client.request(method, url(server, path), json=body) as r:
                await expect_error(r, 400, word)

    run(scenario)


def test_validate_refuses_a_plugin_that_does_not_match_connector_class() -> None:
    async def scenario(server, client):
        path = "/connector-plugins/FileStreamSink/config/validate"
        async with client.put(url(server, path), json={"connector.class": "FileStreamSource"}) as r:
            await expect_error(r, 400, "FileStreamSource", "FileStreamSink")
        async with client.get(url(server, "/connector-plugins/Nope/config")) as r:
            await expect_error(r, 404, "Nope")

    run(scenario)


def test_unknown_route_404_wrong_method_405_oversize_413_all_json() -> None:
    async def scenario(server, client):
        async with client.get(url(server, "/nope/x")) as r:
            await expect_error(r, 404, "/nope/x")
        async with client.post(url(server, "/connectors/a/status")) as r:
            await expect_error(r, 405, "POST", "GET")
        big = b'{"name": "a", "config": {"x": "' + b"y" * REST_REQUEST_BODY_MAX_BYTES + b'"}}'
        headers = {"Content-Type": "application/json"}
        async with client.post(url(server, "/connectors"), data=big, headers=headers) as r:
            await expect_error(r, 413, str(REST_REQUEST_BODY_MAX_BYTES))

    run(scenario)


def test_unexpected_exception_is_500_json_and_the_server_keeps_serving() -> None:
    herder = MemoryHerder()

    async def scenario(server, client):
        herder.fail_with = RuntimeError("disk on fire")
        async with client.get(url(server, "/connectors")) as r:
            await expect_error(r, 500, "RuntimeError", "disk on fire")
        herder.fail_with = None
        async with client.get(url(server, "/connectors")) as r:
            assert r.status == 200

    run(scenario, herder)


def test_not_leader_forwards_to_the_leader_and_answers_what_it_answers() -> None:
    async def main() -> None:
        leader = MemoryHerder("leader:1")
        follower = MemoryHerder("follower:2")
        leader_server = await serving(leader)
        follower_server = await serving(follower)
        follower.not_leader = True
        follower.leader_url = f"http://127.0.0.1:{leader_server.port}"
        try:
            timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_S)
            async with aiohttp.ClientSession(timeout=timeout) as client:
                body = {"name": "a", "config": SOURCE}
                async with client.post(url(follower_server, "/connectors"), json=body) as r:
                    assert r.status == 201 and r.headers["Location"] == "/connectors/a"
                    assert (await r.json())["name"] == "a"
                assert "a" in leader.configs and "a" not in follower.configs
                async with client.post(url(follower_server, "/connectors"), json=body) as r:
                    await expect_error(r, 409, "already exists")  # the leader's answer
                async with client.put(url(follower_server, "/connectors/a/pause")) as r:
                    assert r.status == 202
                async with client.post(url(follower_server, "/connectors/a/restart")) as r:
                    assert r.status == 204

                # A request already forwarded once (forward=false) is not forwarded again.
                path = "/connectors/a/pause?forward=false"
                async with client.put(url(follower_server, path)) as r:
                    await expect_error(r, 409, "already forwarded")
                # Two workers that each name the other never bounce a request forever.
                leader.not_leader = True
                leader.leader_url = f"http://127.0.0.1:{follower_server.port}"
                async with client.put(url(follower_server, "/connectors/a/resume")) as r:
                    await expect_error(r, 409, "already forwarded")
                # No known leader, or a leader that does not answer.
                follower.leader_url = None
                async with client.put(url(follower_server, "/connectors/a/resume")) as r:
                    await expect_error(r, 409, "no leader")
                follower.leader_url = "http://127.0.0.1:1"
                async with client.put(url(follower_server, "/connectors/a/resume")) as r:
                    await expect_error(r, 503, "could not forward", "127.0.0.1:1")
        finally:
            await follower_server.stop()
            await leader_server.stop()

    asyncio.run(main())
