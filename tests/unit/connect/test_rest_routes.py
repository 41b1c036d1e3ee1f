"""Every route of the Connect REST API answers Kafka Connect's status and JSON shape (served on a
real 127.0.0.1 socket over an in-memory herder)."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from odradek.connect.herder import ConnectorTaskId, TargetState
from odradek.observability.metrics import connect_rest_metrics, new_registry
from support.connect_rest import MemoryHerder, run_with_app, url

SOURCE = {"connector.class": "FileStreamSource", "tasks.max": "2", "topic": "t"}


async def create(server, client, name: str = "a", config=SOURCE) -> dict:
    body = {"name": name, "config": config}
    async with client.post(url(server, "/connectors"), json=body) as r:
        assert r.status == 201, await r.text()
        assert r.headers["Location"] == f"/connectors/{name}"
        return await r.json()


def test_root_lists_version_commit_and_cluster_id() -> None:
    async def scenario(server, client):
        async with client.get(url(server, "/")) as r:
            body = await r.json()
        assert r.status == 200 and set(body) == {"version", "commit", "kafka_cluster_id"}
        assert body["kafka_cluster_id"] == "cluster-1"

    run_with_app(scenario, MemoryHerder())


def test_create_then_get_info_config_and_list() -> None:
    async def scenario(server, client):
        info = await create(server, client)
        assert info == {
            "name": "a",
            "config": {**SOURCE, "name": "a"},
            "tasks": [{"connector": "a", "task": 0}, {"connector": "a", "task": 1}],
            "type": "source",
        }
        async with client.get(url(server, "/connectors/a")) as r:
            assert r.status == 200 and await r.json() == info
        async with client.get(url(server, "/connectors/a/config")) as r:
            assert await r.json() == {**SOURCE, "name": "a"}
        async with client.get(url(server, "/connectors")) as r:
            assert await r.json() == ["a"]

    run_with_app(scenario, MemoryHerder())


def test_create_takes_the_name_from_the_config_and_kip980_initial_state() -> None:
    herder = MemoryHerder()

    async def scenario(server, client):
        body = {"config": {**SOURCE, "name": "b"}, "initial_state": "PAUSED"}
        async with client.post(url(server, "/connectors"), json=body) as r:
            assert r.status == 201
        assert herder.targets["b"] == TargetState.PAUSED

    run_with_app(scenario, herder)


def test_list_expands_status_info_and_both() -> None:
    async def scenario(server, client):
        await create(server, client)
        async with client.get(url(server, "/connectors?expand=status")) as r:
            body = await r.json()
        assert set(body["a"]) == {"status"}
        assert body["a"]["status"]["connector"] == {
            "state": "RUNNING",
            "worker_id": "127.0.0.1:8083",
        }
        async with client.get(url(server, "/connectors?expand=info")) as r:
            assert (await r.json())["a"]["info"]["type"] == "source"
        async with client.get(url(server, "/connectors?expand=status&expand=info")) as r:
            assert set((await r.json())["a"]) == {"status", "info"}

    run_with_app(scenario, MemoryHerder())


def test_put_config_creates_201_then_updates_200() -> None:
    async def scenario(server, client):
        async with client.put(url(server, "/connectors/c/config"), json=SOURCE) as r:
            assert r.status == 201 and r.headers["Location"] == "/connectors/c"
            assert (await r.json())["config"]["name"] == "c"
        async with client.put(url(server, "/connectors/c/config"), json=SOURCE) as r:
            assert r.status == 200

    run_with_app(scenario, MemoryHerder())


def test_patch_config_merges_and_null_removes() -> None:
    herder = MemoryHerder()

    async def scenario(server, client):
        await create(server, client)
        patch = {"tasks.max": "3", "topic": None, "batch.size": "10"}
        async with client.patch(url(server, "/connectors/a/config"), json=patch) as r:
            assert r.status == 200, await r.text()
            config = (await r.json())["config"]
        assert config["tasks.max"] == "3" and config["batch.size"] == "10"
        assert "topic" not in config and config["name"] == "a"

    run_with_app(scenario, herder)


def test_status_tasks_and_task_status() -> None:
    async def scenario(server, client):
        await create(server, client)
        async with client.get(url(server, "/connectors/a/status")) as r:
            status = await r.json()
        assert status["name"] == "a" and status["type"] == "source"
        assert [t["id"] for t in status["tasks"]] == [0, 1]
        async with client.get(url(server, "/connectors/a/tasks")) as r:
            tasks = await r.json()
        assert tasks[1] == {
            "id": {"connector": "a", "task": 1},
            "config": {"task.class": "T", "n": "1"},
        }
        async with client.get(url(server, "/connectors/a/tasks/1/status")) as r:
            assert await r.json() == {
                "id": 1,
                "state": "FAILED",
                "worker_id": "127.0.0.1:8083",
                "trace": "boom\n  at line 1",
            }

    run_with_app(scenario, MemoryHerder())


def test_restart_legacy_204_and_kip745_202_with_status() -> None:
    herder = MemoryHerder()

    async def scenario(server, client):
        await create(server, client)
        async with client.post(url(server, "/connectors/a/restart")) as r:
            assert r.status == 204
        assert herder.calls[-2] == ("restart_connector", ("a", False, False))
        path = "/connectors/a/restart?includeTasks=true&onlyFailed=false"
        async with client.post(url(server, path)) as r:
            assert r.status == 202
            body = await r.json()
        assert body["connector"]["state"] == "RESTARTING"
        assert {t["state"] for t in body["tasks"]} == {"RESTARTING"}
        async with client.post(url(server, "/connectors/a/tasks/0/restart")) as r:
            assert r.status == 204
        assert ("restart_task", ConnectorTaskId("a", 0)) in herder.calls

    run_with_app(scenario, herder)


def test_pause_resume_202_stop_204_delete_204() -> None:
    herder = MemoryHerder()

    async def scenario(server, client):
        await create(server, client)
        async with client.put(url(server, "/connectors/a/pause")) as r:
            assert r.status == 202
        assert herder.targets["a"] == TargetState.PAUSED
        async with client.put(url(server, "/connectors/a/resume")) as r:
            assert r.status == 202
        assert herder.targets["a"] == TargetState.STARTED
        async with client.put(url(server, "/connectors/a/stop")) as r:
            assert r.status == 204
        assert herder.targets["a"] == TargetState.STOPPED
        async with client.delete(url(server, "/connectors/a")) as r:
            assert r.status == 204
        async with client.get(url(server, "/connectors")) as r:
            assert await r.json() == []

    run_with_app(scenario, herder)


def test_offsets_get_patch_delete_kip875() -> None:
    async def scenario(server, client):
        await create(server, client)
        async with client.get(url(server, "/connectors/a/offsets")) as r:
            assert await r.json() == {"offsets": []}
        body = {"offsets": [{"partition": {"filename": "f"}, "offset": {"position": 7}}]}
        async with client.patch(url(server, "/connectors/a/offsets"), json=body) as r:
            assert r.status == 200
            assert "altered" in (await r.json())["message"]
        async with client.get(url(server, "/connectors/a/offsets")) as r:
            assert await r.json() == body
        async with client.delete(url(server, "/connectors/a/offsets")) as r:
            assert r.status == 200 and "reset" in (await r.json())["message"]

    run_with_app(scenario, MemoryHerder())


def test_connector_plugins_listing_config_and_validate() -> None:
    herder = MemoryHerder()

    async def scenario(server, client):
        async with client.get(url(server, "/connector-plugins")) as r:
            assert [p["type"] for p in await r.json()] == ["source"]
        async with client.get(url(server, "/connector-plugins?connectorsOnly=false")) as r:
            assert len(await r.json()) == 2
        async with client.get(url(server, "/connector-plugins/FileStreamSource/config")) as r:
            assert (await r.json())[0]["name"] == "file"
        path = "/connector-plugins/FileStreamSourceConnector/config/validate"
        full = {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector"}
        async with client.put(url(server, path), json=full) as r:
            assert r.status == 200 and (await r.json())["error_count"] == 0
        async with client.put(url(server, path), json={"topic": "t"}) as r:
            assert r.status == 200
        assert herder.calls[-1][1]["connector.class"] == "FileStreamSourceConnector"

    run_with_app(scenario, herder)


def test_requests_are_counted_by_route_pattern_and_served_at_metrics() -> None:
    registry = new_registry()
    metrics = connect_rest_metrics(registry)

    async def scenario(server, client: aiohttp.ClientSession):
        await create(server, client)
        async with client.get(url(server, "/connectors/a/status")) as r:
            assert r.status == 200
        async with client.get(url(server, "/nope")) as r:
            assert r.status == 404
        async with client.get(url(server, "/metrics")) as r:
            text = await r.text()
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        key = (
            "odradek_connect_rest_requests_total",
            (("method", "GET"), ("route", "/connectors/{name}/status"), ("status", "200")),
        )
        assert samples[key] == 1
        unmatched = (
            "odradek_connect_rest_requests_total",
            (("method", "GET"), ("route", "<other>"), ("status", "404")),
        )
        assert samples[unmatched] == 1

    run_with_app(scenario, MemoryHerder(), metrics=metrics, registry=registry)
