"""A small in-memory ``Herder`` and a runner that serves the Connect REST app on 127.0.0.1, for the
REST unit tests (``tests/unit/connect/test_rest_*.py``): routing, status codes, error shapes and
forwarding are the REST layer's; what a real herder does is tested with the real worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp

from odradek.connect.herder import (
    AlreadyExistsError,
    BadRequestError,
    ConnectorInfo,
    ConnectorStateInfo,
    ConnectorTaskId,
    ConnectorType,
    NotFoundError,
    NotLeaderError,
    State,
    StatusEntry,
    TargetState,
)
from odradek.connect.rest.app import PluginCatalog
from odradek.connect.rest.server import RestServer, start_rest_server
from odradek.observability.metrics import ConnectRestMetrics

CLIENT_TIMEOUT_S = 10

_STATE_OF = {
    TargetState.STARTED: State.RUNNING,
    TargetState.PAUSED: State.PAUSED,
    TargetState.STOPPED: State.STOPPED,
}


class MemoryHerder:
    """Connectors as dicts; every task RUNNING; ``leader_url`` set -> writes raise NotLeader."""

    def __init__(self, worker_id: str = "127.0.0.1:8083") -> None:
        self._worker_id = worker_id
        self.configs: dict[str, dict[str, str]] = {}
        self.targets: dict[str, TargetState] = {}
        self.offsets: dict[str, list[dict[str, Any]]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.leader_url: str | None = None
        self.not_leader = False
        self.fail_with: BaseException | None = None

    @property
    def worker_id(self) -> str:
        return self._worker_id

    @property
    def kafka_cluster_id(self) -> str | None:
        return "cluster-1"

    def _check(self, call: str, arg: Any = None, *, write: bool = False) -> None:
        self.calls.append((call, arg))
        if self.fail_with is not None:
            raise self.fail_with
        if write and self.not_leader:
            raise NotLeaderError("not the leader", self.leader_url)

    def _get(self, name: str) -> dict[str, str]:
        if name not in self.configs:
            raise NotFoundError(f"Connector {name} not found")
        return self.configs[name]

    def _type(self, name: str) -> ConnectorType:
        cls = self._get(name).get("connector.class", "")
        return ConnectorType.SINK if "Sink" in cls else ConnectorType.SOURCE

    def _tasks(self, name: str) -> list[ConnectorTaskId]:
        if self.targets.get(name) == TargetState.STOPPED:
            return []
        return [ConnectorTaskId(name, i) for i in range(int(self._get(name).get("tasks.max", 1)))]

    async def connectors(self) -> list[str]:
        self._check("connectors")
        return list(self.configs)

    async def connector_info(self, name: str) -> ConnectorInfo:
        self._check("connector_info", name)
        return ConnectorInfo(name, self._get(name), self._tasks(name), self._type(name))

    async def connector_config(self, name: str) -> dict[str, str]:
        self._check("connector_config", name)
        return dict(self._get(name))

    async def put_connector_config(
        self,
        name: str,
        config: Mapping[str, str],
        *,
        allow_replace: bool,
        initial_state: TargetState = TargetState.STARTED,
    ) -> tuple[bool, ConnectorInfo]:
        self._check("put_connector_config", (name, dict(config), initial_state), write=True)
        if "connector.class" not in config:
            raise BadRequestError('Missing required configuration "connector.class"')
        exists = name in self.configs
        if exists and not allow_replace:
            raise AlreadyExistsError(f"Connector {name} already exists")
        self.configs[name] = dict(config)
        if not exists:
            self.targets[name] = initial_state
        return not exists, await self.connector_info(name)

    async def delete_connector(self, name: str) -> None:
        self._check("delete_connector", name, write=True)
        self._get(name)
        del self.configs[name]

    async def task_configs(self, name: str) -> list[tuple[ConnectorTaskId, dict[str, str]]]:
        self._check("task_configs", name)
        return [(t, {"task.class": "T", "n": str(t.task)}) for t in self._tasks(name)]

    async def connector_status(self, name: str) -> ConnectorStateInfo:
        self._check("connector_status", name)
        state = _STATE_OF[self.targets[name]] if name in self.configs else None
        if state is None:
            raise NotFoundError(f"No status found for connector {name}")
        entry = StatusEntry(state, self._worker_id)
        tasks = {t.task: entry for t in self._tasks(name)}
        return ConnectorStateInfo(name, entry, tasks, self._type(name))

    async def task_status(self, task: ConnectorTaskId) -> StatusEntry:
        self._check("task_status", task)
        if task not in self._tasks(task.connector):
            raise NotFoundError(f"No status found for task {task.connector}-{task.task}")
        return StatusEntry(State.FAILED, self._worker_id, trace="boom\n  at line 1")

    async def restart_connector(
        self, name: str, *, include_tasks: bool, only_failed: bool
    ) -> ConnectorStateInfo:
        self._check("restart_connector", (name, include_tasks, only_failed), write=True)
        status = await self.connector_status(name)
        restarting = StatusEntry(State.RESTARTING, self._worker_id)
        tasks = {i: restarting for i in status.tasks} if include_tasks else status.tasks
        return ConnectorStateInfo(name, restarting, tasks, status.type)

    async def restart_task(self, task: ConnectorTaskId) -> None:
        self._check("restart_task", task, write=True)
        await self.task_status(task)

    async def set_target_state(self, name: str, state: TargetState) -> None:
        self._check("set_target_state", (name, state), write=True)
        self._get(name)
        self.targets[name] = state

    async def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        self._check("connector_offsets", name)
        self._get(name)
        return self.offsets.get(name, [])

    async def alter_offsets(self, name: str, offsets: Sequence[Mapping[str, Any]]) -> str:
        self._check("alter_offsets", (name, list(offsets)), write=True)
        self._get(name)
        self.offsets[name] = [dict(o) for o in offsets]
        return "The offsets for this connector have been altered successfully"

    async def reset_offsets(self, name: str) -> str:
        self._check("reset_offsets", name, write=True)
        self._get(name)
        self.offsets.pop(name, None)
        return "The offsets for this connector have been reset successfully"

    async def validate(self, config: Mapping[str, str]) -> dict[str, Any]:
        self._check("validate", dict(config))
        return {"name": config["connector.class"], "error_count": 0, "groups": [], "configs": []}


class StaticPlugins(PluginCatalog):
    PLUGINS = [
        {
            "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "type": "source",
            "version": "1",
        },
        {
            "class": "org.apache.kafka.connect.storage.StringConverter",
            "type": "converter",
            "version": "1",
        },
    ]

    def connector_plugins(self, *, connectors_only: bool) -> list[dict[str, Any]]:
        return [p for p in self.PLUGINS if not connectors_only or p["type"] in ("source", "sink")]

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        if not plugin.startswith("FileStream"):
            raise NotFoundError(f"Unknown plugin {plugin}")
        return [{"name": "file", "type": "STRING", "required": False}]


Scenario = Callable[[RestServer, aiohttp.ClientSession], Awaitable[None]]


async def serving(herder: MemoryHerder, metrics: ConnectRestMetrics | None = None, registry=None):
    return await start_rest_server(
        herder, StaticPlugins(), host="127.0.0.1", port=0, metrics=metrics, registry=registry
    )


def run_with_app(scenario: Scenario, herder: MemoryHerder, **kwargs: Any) -> None:
    """Serve ``herder`` on 127.0.0.1 port 0, run ``scenario`` against it, stop it."""

    async def main() -> None:
        server = await serving(herder, **kwargs)
        try:
            timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_S)
            async with aiohttp.ClientSession(timeout=timeout) as client:
                await scenario(server, client)
        finally:
            await server.stop()

    asyncio.run(main())


def url(server: RestServer, path: str) -> str:
    return f"http://127.0.0.1:{server.port}{path}"
