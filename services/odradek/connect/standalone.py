"""Standalone mode: one worker, its connectors' configs in memory, Kafka's ``StandaloneHerder``.

Connectors come from the command line (``.properties`` or ``.json`` files) and from the REST API;
nothing about them survives a restart except source offsets (``offset.storage.file.filename``,
``FileOffsetStore``) and sink offsets (their consumer groups), as in Kafka. Statuses are kept in
memory (``MemoryStatusListener``).

What the herder keeps per connector: its config, its target state (STARTED, PAUSED, STOPPED) and
the task configs last generated. Task configs are regenerated when the connector starts, when
its config changes, when it is resumed from STOPPED, and when the connector asks for it
(``request_task_reconfiguration``, from its own thread: handed to the loop); tasks are restarted
only when the generated configs differ from the running ones, as Kafka does.

Concurrency: every coroutine runs on the worker's event loop; one ``asyncio.Lock`` serialises
what changes state (Kafka's ``synchronized``). The ``Worker``'s methods block (bounded by
``task.shutdown.graceful.timeout.ms`` and the worker's connector call timeout), so they run in
threads (``asyncio.to_thread``); so do the consumer group admin calls of sink offsets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from odradek.connect.api import ConfigException, SinkConnector
from odradek.connect.herder import (
    AlreadyExistsError,
    BadRequestError,
    ConnectorInfo,
    ConnectorStateInfo,
    ConnectorTaskId,
    ConnectorType,
    HerderError,
    NotFoundError,
    State,
    StatusEntry,
    TargetState,
)
from odradek.connect.runtime.offsets import OffsetStore
from odradek.connect.runtime.status import MemoryStatusListener
from odradek.connect.sink_offsets import SinkOffsets, parse_sink_offsets, sink_group_id

__all__ = ["StandaloneHerder", "config_errors_message", "TASKS_MAX_LIMIT"]

log = logging.getLogger(__name__)

TASKS_MAX_LIMIT = 1024  # tasks one connector may ask for on one standalone worker
RECONFIGURE_PENDING_MAX = 1024  # connectors with a reconfiguration queued at once

Validator = Callable[[Mapping[str, str]], dict[str, Any]]


class WorkerLike(Protocol):
    """What the herder asks of ``odradek.connect.runtime.worker.Worker``."""

    def connector_class(self, config: Mapping[str, str]) -> type: ...

    def start_connector(
        self,
        name: str,
        config: Mapping[str, str],
        target: TargetState,
        on_reconfigure: Callable[[], None],
    ) -> None: ...

    def connector_task_configs(self, name: str, max_tasks: int) -> list[dict[str, str]]: ...

    def set_target_state(self, name: str, target: TargetState) -> None: ...

    def stop_connector(self, name: str) -> None: ...

    def start_task(
        self,
        task_id: ConnectorTaskId,
        connector_config: Mapping[str, str],
        task_config: Mapping[str, str],
        target: TargetState,
    ) -> None: ...

    def stop_tasks(self, ids: Sequence[ConnectorTaskId]) -> None: ...

    def close(self) -> None: ...


def config_errors_message(infos: Mapping[str, Any]) -> str:
    """Kafka's message for a config that does not validate, from its ConfigInfos JSON."""
    errors = [
        f'"{c["value"]["name"]}": {e}'
        for c in infos.get("configs", [])
        for e in c.get("value", {}).get("errors", [])
    ]
    count = infos.get("error_count", len(errors))
    return (
        f"Connector configuration is invalid and contains the following {count} error(s):\n"
        + "\n".join(errors)
        + "\nYou can also find the above list of errors at the endpoint "
        "`/connector-plugins/{connectorType}/config/validate`"
    )


class StandaloneHerder:
    def __init__(
        self,
        worker: WorkerLike,
        status: MemoryStatusListener,
        offset_store: OffsetStore,
        *,
        worker_id: str,
        validate: Validator,
        sink_offsets: SinkOffsets,
        kafka_cluster_id: str | None = None,
    ) -> None:
        self._worker = worker
        self._status = status
        self._offsets = offset_store
        self._worker_id = worker_id
        self._validate = validate
        self._sink_offsets = sink_offsets
        self._cluster_id = kafka_cluster_id
        self._configs: dict[str, dict[str, str]] = {}
        self._targets: dict[str, TargetState] = {}
        self._task_configs: dict[str, list[dict[str, str]]] = {}
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending_reconfigure: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False

    # -------------------------------------------------------------- identity

    @property
    def worker_id(self) -> str:
        return self._worker_id

    @property
    def kafka_cluster_id(self) -> str | None:
        return self._cluster_id

    # -------------------------------------------------------------- helpers

    def _config(self, name: str) -> dict[str, str]:
        config = self._configs.get(name)
        if config is None:
            raise NotFoundError(f"Connector {name} not found")
        return config

    def _type(self, config: Mapping[str, str]) -> ConnectorType:
        try:
            cls = self._worker.connector_class(config)
        except Exception:  # noqa: BLE001 - a class that cannot be loaded has no known type
            return ConnectorType.UNKNOWN
        return ConnectorType.SINK if issubclass(cls, SinkConnector) else ConnectorType.SOURCE

    def _task_ids(self, name: str) -> list[ConnectorTaskId]:
        return [ConnectorTaskId(name, i) for i in range(len(self._task_configs.get(name, [])))]

    def _info(self, name: str) -> ConnectorInfo:
        config = self._config(name)
        return ConnectorInfo(name, dict(config), self._task_ids(name), self._type(config))

    def _tasks_max(self, config: Mapping[str, str]) -> int:
        raw = config.get("tasks.max", "1")
        try:
            tasks_max = int(raw)
        except ValueError:
            raise BadRequestError(f'"tasks.max" must be an integer, not {raw!r}') from None
        if not 1 <= tasks_max <= TASKS_MAX_LIMIT:
            raise BadRequestError(f'"tasks.max" must be between 1 and {TASKS_MAX_LIMIT}')
        return tasks_max

    def _on_reconfigure(self, name: str) -> Callable[[], None]:
        """A connector's request for new task configs, from its thread, handed to the loop."""
        loop = self._loop

        def request() -> None:
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(self._schedule_reconfigure, name)

        return request

    def _schedule_reconfigure(self, name: str) -> None:
        if self._closed or name in self._pending_reconfigure:
            return
        if len(self._pending_reconfigure) >= RECONFIGURE_PENDING_MAX:
            log.warning("dropping a task reconfiguration request of %s: too many pending", name)
            return
        self._pending_reconfigure.add(name)

        async def run() -> None:
            async with self._lock:
                self._pending_reconfigure.discard(name)
                if name in self._configs and self._targets.get(name) is TargetState.STARTED:
                    await self._update_tasks(name)

        task = asyncio.get_running_loop().create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _start_connector(self, name: str) -> None:
        """Start the connector in its target state; tasks follow when it is STARTED."""
        self._loop = asyncio.get_running_loop()
        config = self._configs[name]
        target = self._targets[name]
        await asyncio.to_thread(
            self._worker.start_connector, name, config, target, self._on_reconfigure(name)
        )
        if target is TargetState.STARTED:
            await self._update_tasks(name)

    async def _update_tasks(self, name: str) -> None:
        """Regenerate the task configs; restart the tasks only if they changed (as Kafka)."""
        config = self._configs[name]
        try:
            new = await asyncio.to_thread(
                self._worker.connector_task_configs, name, self._tasks_max(config)
            )
        except Exception as exc:  # noqa: BLE001 - the connector reports its own failure
            log.warning("connector %s: could not generate task configs: %s", name, exc)
            return
        old = self._task_configs.get(name, [])
        if new == old and all(t in self._running_tasks() for t in self._task_ids(name)):
            return
        await asyncio.to_thread(self._worker.stop_tasks, self._task_ids(name))
        self._task_configs[name] = new
        await self._start_tasks(name)

    def _running_tasks(self) -> frozenset[ConnectorTaskId]:
        return getattr(self._worker, "tasks", frozenset())

    async def _start_tasks(self, name: str, ids: Sequence[ConnectorTaskId] | None = None) -> None:
        config = self._configs[name]
        target = self._targets[name]
        for task_id in self._task_ids(name) if ids is None else ids:
            task_config = self._task_configs[name][task_id.task]
            await asyncio.to_thread(self._worker.start_task, task_id, config, task_config, target)

    async def _stop_all(self, name: str) -> None:
        await asyncio.to_thread(self._worker.stop_tasks, self._task_ids(name))
        await asyncio.to_thread(self._worker.stop_connector, name)

    # -------------------------------------------------------------- configs

    async def connectors(self) -> list[str]:
        return sorted(self._configs)

    async def connector_info(self, name: str) -> ConnectorInfo:
        return self._info(name)

    async def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._config(name))

    async def validate(self, config: Mapping[str, str]) -> dict[str, Any]:
        return await asyncio.to_thread(self._validate, dict(config))

    async def put_connector_config(
        self,
        name: str,
        config: Mapping[str, str],
        *,
        allow_replace: bool,
        initial_state: TargetState = TargetState.STARTED,
    ) -> tuple[bool, ConnectorInfo]:
        config = {**config, "name": name}
        self._tasks_max(config)
        if not config.get("connector.class"):
            raise BadRequestError('Missing required configuration "connector.class"')
        infos = await self.validate(config)
        if infos.get("error_count", 0):
            raise BadRequestError(config_errors_message(infos))
        async with self._lock:
            if self._closed:
                raise HerderError("the worker is shutting down")
            exists = name in self._configs
            if exists and not allow_replace:
                raise AlreadyExistsError(f"Connector {name} already exists")
            if exists:
                await self._stop_all(name)
            else:
                self._targets[name] = initial_state
            self._configs[name] = config
            self._task_configs.pop(name, None)
            try:
                await self._start_connector(name)
            except ConfigException as exc:
                # Validation passed but the class did not load: nothing is left half-made.
                del self._configs[name]
                self._targets.pop(name, None)
                raise BadRequestError(str(exc)) from exc
            log.info("connector %s %s", name, "updated" if exists else "created")
            return not exists, self._info(name)

    async def delete_connector(self, name: str) -> None:
        async with self._lock:
            self._config(name)
            await self._stop_all(name)
            del self._configs[name]
            self._targets.pop(name, None)
            self._task_configs.pop(name, None)
            self._status.forget(name)
            log.info("connector %s deleted", name)

    async def task_configs(self, name: str) -> list[tuple[ConnectorTaskId, dict[str, str]]]:
        self._config(name)
        return list(zip(self._task_ids(name), self._task_configs.get(name, []), strict=True))

    # -------------------------------------------------------------- status

    def _connector_entry(self, name: str) -> StatusEntry:
        entry = self._status.get_connector(name)
        return entry or StatusEntry(State.UNASSIGNED, self._worker_id)

    def _task_entries(self, name: str) -> dict[int, StatusEntry]:
        reported = self._status.tasks_of(name)
        unassigned = StatusEntry(State.UNASSIGNED, self._worker_id)
        return {t.task: reported.get(t.task, unassigned) for t in self._task_ids(name)}

    async def connector_status(self, name: str) -> ConnectorStateInfo:
        config = self._config(name)
        return ConnectorStateInfo(
            name, self._connector_entry(name), self._task_entries(name), self._type(config)
        )

    async def task_status(self, task: ConnectorTaskId) -> StatusEntry:
        self._config(task.connector)
        entries = self._task_entries(task.connector)
        if task.task not in entries:
            raise NotFoundError(f"No status found for task {task.connector}-{task.task}")
        return entries[task.task]

    # -------------------------------------------------------------- restarts

    async def restart_connector(
        self, name: str, *, include_tasks: bool, only_failed: bool
    ) -> ConnectorStateInfo:
        """KIP-745: restart the connector unless ``only_failed`` and it is not FAILED; with
        ``include_tasks``, the tasks too (only the FAILED ones with ``only_failed``)."""
        async with self._lock:
            status = await self.connector_status(name)
            restart_connector = not only_failed or status.connector.state is State.FAILED
            tasks = [
                ConnectorTaskId(name, i)
                for i, e in status.tasks.items()
                if include_tasks and (not only_failed or e.state is State.FAILED)
            ]
            restarting = StatusEntry(State.RESTARTING, self._worker_id)
            plan = ConnectorStateInfo(
                name,
                restarting if restart_connector else status.connector,
                {
                    i: restarting if ConnectorTaskId(name, i) in tasks else e
                    for i, e in status.tasks.items()
                },
                status.type,
            )
            if tasks:
                await asyncio.to_thread(self._worker.stop_tasks, tasks)
            if restart_connector:
                await asyncio.to_thread(self._worker.stop_connector, name)
                await asyncio.to_thread(
                    self._worker.start_connector,
                    name,
                    self._configs[name],
                    self._targets[name],
                    self._on_reconfigure(name),
                )
            if tasks:
                await self._start_tasks(name, tasks)
            return plan

    async def restart_task(self, task: ConnectorTaskId) -> None:
        async with self._lock:
            await self.task_status(task)
            await asyncio.to_thread(self._worker.stop_tasks, [task])
            await self._start_tasks(task.connector, [task])

    # -------------------------------------------------------------- target states

    async def set_target_state(self, name: str, state: TargetState) -> None:
        async with self._lock:
            self._config(name)
            previous = self._targets[name]
            self._targets[name] = state
            if state is TargetState.STOPPED:
                # KIP-875: the tasks are shut down and their configs emptied.
                await asyncio.to_thread(self._worker.stop_tasks, self._task_ids(name))
                self._task_configs[name] = []
            await asyncio.to_thread(self._worker.set_target_state, name, state)
            if state is TargetState.STARTED and (
                previous is TargetState.STOPPED or not self._task_configs.get(name)
            ):
                await self._update_tasks(name)
            log.info("connector %s: target state %s", name, state.value)

    # -------------------------------------------------------------- offsets (KIP-875)

    def _is_sink(self, name: str) -> bool:
        return self._type(self._config(name)) is ConnectorType.SINK

    def _require_stopped(self, name: str) -> None:
        if self._targets.get(name) is not TargetState.STOPPED:
            raise BadRequestError(
                "Connectors must be in the STOPPED state before their offsets can be modified. "
                f"This can be done for the specified connector by issuing a 'PUT' request to the "
                f"'/connectors/{name}/stop' endpoint"
            )

    async def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        config = self._config(name)
        if self._is_sink(name):
            return await asyncio.to_thread(self._sink_offsets.get, sink_group_id(name, config))
        pairs = await asyncio.to_thread(self._offsets.all, name)
        return [{"partition": p, "offset": o} for p, o in pairs]

    async def alter_offsets(self, name: str, offsets: Sequence[Mapping[str, Any]]) -> str:
        async with self._lock:
            config = self._config(name)
            self._require_stopped(name)
            if self._is_sink(name):
                parsed = parse_sink_offsets(offsets)
                group = sink_group_id(name, config)
                await asyncio.to_thread(self._sink_offsets.alter, group, parsed)
            else:
                pairs = [(dict(o["partition"]), o["offset"]) for o in offsets]
                await asyncio.to_thread(self._offsets.put, name, pairs)
            return "The offsets for this connector have been altered successfully"

    async def reset_offsets(self, name: str) -> str:
        async with self._lock:
            config = self._config(name)
            self._require_stopped(name)
            if self._is_sink(name):
                group = sink_group_id(name, config)
                await asyncio.to_thread(self._sink_offsets.reset, group)
            else:
                pairs = await asyncio.to_thread(self._offsets.all, name)
                await asyncio.to_thread(self._offsets.put, name, [(p, None) for p, _ in pairs])
            return "The offsets for this connector have been reset successfully"

    # -------------------------------------------------------------- lifecycle

    async def close(self) -> None:
        """Stop every task and connector (offsets are flushed as tasks stop), then the worker."""
        async with self._lock:
            self._closed = True
            for task in list(self._background):
                task.cancel()
            await asyncio.to_thread(self._worker.close)
