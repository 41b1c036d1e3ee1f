"""Standalone mode: one worker, its connectors' configs in memory, Kafka's ``StandaloneHerder``.

Connectors come from the command line (``.properties`` or ``.json`` files) and from the REST API;
nothing about them survives a restart except source offsets (``offset.storage.file.filename``,
``FileOffsetStore``) and sink offsets (their consumer groups), as in Kafka. Statuses are kept in
memory (``MemoryStatusListener``).

What the herder keeps per connector: its config, its target state (STARTED, PAUSED, STOPPED) and
the task configs last generated. Task configs are regenerated when the connector starts, when
its config changes, when it is resumed from STOPPED, and when the connector asks for it
(``request_task_reconfiguration``, from its own thread: handed to the loop); tasks are restarted
only when the generated configs differ from the running ones, as Kafka does (and when the
connector is restarted, so one that failed before generating any gets its tasks).

Offsets (KIP-875) change only while the connector is STOPPED; a change is shown to the
connector's ``alter_offsets`` first, which may refuse it (400 with its reason).

Concurrency: every coroutine runs on the worker's event loop; one ``asyncio.Lock`` serialises
what changes state (Kafka's ``synchronized``); once ``close`` has begun, changes are refused
with 503. The ``Worker``'s methods block (bounded by
``task.shutdown.graceful.timeout.ms`` and the worker's connector call timeout), so they run in
threads (``asyncio.to_thread``); so do the consumer group admin calls of sink offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

from odradek.connect.api import ConfigException, TopicPartition
from odradek.connect.connector_checks import (
    TASKS_MAX_LIMIT,
    check_connector_config,
    config_errors_message,
    connector_type,
    raise_on_config_errors,
    require_stopped,
    tasks_max,
)
from odradek.connect.herder import (
    AlreadyExistsError,
    BadRequestError,
    ConnectorInfo,
    ConnectorStateInfo,
    ConnectorTaskId,
    ConnectorType,
    NotFoundError,
    ServiceUnavailableError,
    State,
    StatusEntry,
    TargetState,
)
from odradek.connect.runtime.offsets import OffsetStore
from odradek.connect.runtime.status import MemoryStatusListener
from odradek.connect.sink_offsets import SinkOffsets, parse_sink_offsets, sink_group_id
from odradek.connect.storage_format import partition_key

__all__ = ["StandaloneHerder", "config_errors_message", "TASKS_MAX_LIMIT"]

log = logging.getLogger(__name__)

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

    @contextlib.asynccontextmanager
    async def _changing(self) -> AsyncIterator[None]:
        """The lock every state change holds; refused (503) once the worker is stopping."""
        async with self._lock:
            if self._closed:
                raise ServiceUnavailableError("the worker is shutting down")
            yield

    def _config(self, name: str) -> dict[str, str]:
        config = self._configs.get(name)
        if config is None:
            raise NotFoundError(f"Connector {name} not found")
        return config

    def _type(self, config: Mapping[str, str]) -> ConnectorType:
        return connector_type(self._worker.connector_class, config)

    def _task_ids(self, name: str) -> list[ConnectorTaskId]:
        return [ConnectorTaskId(name, i) for i in range(len(self._task_configs.get(name, [])))]

    def _info(self, name: str) -> ConnectorInfo:
        config = self._config(name)
        return ConnectorInfo(name, dict(config), self._task_ids(name), self._type(config))

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
                self._worker.connector_task_configs, name, tasks_max(config)
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
        config = check_connector_config(name, config)
        raise_on_config_errors(await self.validate(config))
        async with self._changing():
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
        async with self._changing():
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
        async with self._changing():
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
            if restart_connector and self._targets[name] is TargetState.STARTED:
                # A connector that failed before generating task configs gets its tasks now;
                # running tasks restart only if their configs changed.
                await self._update_tasks(name)
            return plan

    async def restart_task(self, task: ConnectorTaskId) -> None:
        async with self._changing():
            await self.task_status(task)
            await asyncio.to_thread(self._worker.stop_tasks, [task])
            await self._start_tasks(task.connector, [task])

    # -------------------------------------------------------------- target states

    async def set_target_state(self, name: str, state: TargetState) -> None:
        async with self._changing():
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
        require_stopped(name, self._targets.get(name))

    async def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        config = self._config(name)
        if self._is_sink(name):
            return await asyncio.to_thread(self._sink_offsets.get, sink_group_id(name, config))
        pairs = await asyncio.to_thread(self._offsets.all, name)
        return [{"partition": p, "offset": o} for p, o in pairs]

    def _consult(self, name: str, config: Mapping[str, str], offsets: Mapping[Any, Any]) -> bool:
        """KIP-875: the connector's ``alter_offsets`` sees the change first and may refuse it
        (400 with its reason); True when it also handled offsets it keeps itself."""
        try:
            connector = self._worker.connector_class(config)()
            return bool(connector.alter_offsets(dict(config), offsets))
        except Exception as exc:  # noqa: BLE001 - the connector's refusal, told to the user
            raise BadRequestError(
                f"connector {name} refused the offsets: {type(exc).__name__}: {exc}"
            ) from exc

    @staticmethod
    def _offsets_message(verb: str, consulted: bool) -> str:
        if consulted:
            return f"The offsets for this connector have been {verb} successfully"
        return (
            f"The Connect framework-managed offsets for this connector have been {verb} "
            "successfully. However, if this connector manages offsets externally, they will "
            f"need to be manually {verb} in the system that the connector uses."
        )

    async def alter_offsets(self, name: str, offsets: Sequence[Mapping[str, Any]]) -> str:
        async with self._changing():
            config = self._config(name)
            self._require_stopped(name)
            if self._is_sink(name):
                parsed = parse_sink_offsets(offsets)
                seen = {TopicPartition(t, p): o for t, p, o in parsed}
                consulted = await asyncio.to_thread(self._consult, name, config, seen)
                group = sink_group_id(name, config)
                await asyncio.to_thread(self._sink_offsets.alter, group, parsed)
            else:
                pairs = [(dict(o["partition"]), o["offset"]) for o in offsets]
                seen = {partition_key(p): o for p, o in pairs}
                consulted = await asyncio.to_thread(self._consult, name, config, seen)
                await asyncio.to_thread(self._offsets.put, name, pairs)
            return self._offsets_message("altered", consulted)

    async def reset_offsets(self, name: str) -> str:
        async with self._changing():
            config = self._config(name)
            self._require_stopped(name)
            if self._is_sink(name):
                current = await asyncio.to_thread(
                    self._sink_offsets.get, sink_group_id(name, config)
                )
                seen = {
                    TopicPartition(
                        o["partition"]["kafka_topic"], o["partition"]["kafka_partition"]
                    ): None
                    for o in current
                }
                consulted = await asyncio.to_thread(self._consult, name, config, seen)
                await asyncio.to_thread(self._sink_offsets.reset, sink_group_id(name, config))
            else:
                pairs = await asyncio.to_thread(self._offsets.all, name)
                seen = {partition_key(p): None for p, _ in pairs}
                consulted = await asyncio.to_thread(self._consult, name, config, seen)
                await asyncio.to_thread(self._offsets.put, name, [(p, None) for p, _ in pairs])
            return self._offsets_message("reset", consulted)

    # -------------------------------------------------------------- lifecycle

    async def close(self) -> None:
        """Stop every task and connector (offsets are flushed as tasks stop), then the worker."""
        async with self._lock:
            self._closed = True
            for task in list(self._background):
                task.cancel()
            await asyncio.to_thread(self._worker.close)
