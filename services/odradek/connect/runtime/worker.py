"""The Worker: runs connectors and tasks in threads on behalf of a herder.

A herder (standalone or distributed) decides what runs where; the Worker only does it:
``start_connector`` / ``stop_connector``, ``connector_task_configs``, ``start_task`` /
``stop_tasks``, ``set_target_state``. It reports every state change to its ``StatusListener``
and stores source offsets in its ``OffsetStore``.

Threads: each connector instance has a thread of its own (``connector_runner``: its ``start``,
``task_configs`` and ``stop`` run there in order, never concurrently); each task has its own
thread (``source_task``, ``sink_task``). Worker methods may be called from any thread (a herder's
event loop calls them through ``asyncio.to_thread`` or directly: they block at most
``task.shutdown.graceful.timeout.ms`` plus ``CONNECTOR_CALL_TIMEOUT_S``). A lock guards the maps
of what runs here.

``on_reconfigure`` (given to ``start_connector``) is called from the connector's thread when it
asks for new task configs: a herder on an event loop hands it over with
``loop.call_soon_threadsafe``.

Stopping is bounded: tasks are asked to stop together and awaited until the graceful timeout;
a task still running then is abandoned (cancelled: it reports and commits nothing more) and
logged, as Kafka does.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from odradek.connect.api import (
    ConfigException,
    ConnectError,
    Connector,
    SinkConnector,
    SourceConnector,
)
from odradek.connect.herder import ConnectorTaskId, State, StatusEntry, TargetState
from odradek.connect.runtime.connector_runner import ConnectorRunner
from odradek.connect.runtime.offsets import OffsetStore
from odradek.connect.runtime.pipeline import load_class
from odradek.connect.runtime.sink_task import subscription
from odradek.connect.runtime.status import StatusListener
from odradek.connect.runtime.task_base import TaskRunner
from odradek.connect.runtime.task_builder import TaskBuilder
from odradek.connect.worker_config import WorkerConfig

log = logging.getLogger(__name__)

TASK_CLASS_CONFIG = "task.class"


class Worker:
    def __init__(
        self,
        config: WorkerConfig,
        plugins: Any,
        offset_store: OffsetStore,
        status: StatusListener,
        *,
        worker_id: str,
        producer_factory: Callable[[dict[str, Any]], Any] | None = None,
        consumer_factory: Callable[[dict[str, Any]], Any] | None = None,
        admin_factory: Callable[[dict[str, Any]], Any] | None = None,
    ):
        self.config = config
        self.plugins = plugins
        self.offset_store = offset_store
        self.status = status
        self.worker_id = worker_id
        self.generation = 0
        """The group generation statuses report; set by the distributed herder."""
        self._lock = threading.Lock()
        self._connectors: dict[str, ConnectorRunner] = {}
        self._tasks: dict[ConnectorTaskId, TaskRunner] = {}
        self._builder = TaskBuilder(
            config,
            plugins,
            offset_store,
            status,
            worker_id,
            lambda: self.generation,
            self.connector_class,
            producer_factory=producer_factory,
            consumer_factory=consumer_factory,
            admin_factory=admin_factory,
        )

    @property
    def connectors(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._connectors)

    @property
    def tasks(self) -> frozenset[ConnectorTaskId]:
        with self._lock:
            return frozenset(self._tasks)

    def task_runner(self, task_id: ConnectorTaskId) -> TaskRunner | None:
        with self._lock:
            return self._tasks.get(task_id)

    def _report_connector(self, name: str, state: State, trace: str | None = None) -> None:
        try:
            self.status.connector(name, StatusEntry(state, self.worker_id, trace, self.generation))
        except Exception:  # noqa: BLE001
            log.exception("connector %s: could not report %s", name, state)

    # -------------------------------------------------------------- connectors

    def connector_class(self, config: Mapping[str, str]) -> type[Connector]:
        name = config.get("connector.class")
        if not name:
            raise ConfigException("connector.class", "required")
        cls = load_class(self.plugins, "connector", name, "connector.class")
        if not (isinstance(cls, type) and issubclass(cls, (SourceConnector, SinkConnector))):
            raise ConfigException("connector.class", f"{name} is not a source or sink connector")
        return cls

    def start_connector(
        self,
        name: str,
        config: Mapping[str, str],
        target: TargetState,
        on_reconfigure: Callable[[], None],
    ) -> None:
        """Start ``name`` (asynchronously, on its thread) in ``target``; a failure to start is
        reported as FAILED, never raised (a bad class is: ``ConfigException``)."""
        with self._lock:
            if name in self._connectors:
                raise ConnectError(f"connector {name} is already running on this worker")
        cls = self.connector_class(config)
        if issubclass(cls, SinkConnector):
            subscription(config)
        connector = cls()
        runner = ConnectorRunner(name, connector, config, self._report_connector, on_reconfigure)
        with self._lock:
            self._connectors[name] = runner
        runner.transition(target)

    def connector_task_configs(self, name: str, max_tasks: int) -> list[dict[str, str]]:
        """The running connector's task configs, each with ``task.class`` and, for sinks, the
        connector's ``topics``/``topics.regex`` (as Kafka adds them)."""
        with self._lock:
            runner = self._connectors.get(name)
        if runner is None:
            raise ConnectError(f"connector {name} is not running on this worker")
        configs = runner.task_configs(max_tasks)
        task_cls = runner.connector.task_class()
        extra = {TASK_CLASS_CONFIG: f"{task_cls.__module__}:{task_cls.__qualname__}"}
        if isinstance(runner.connector, SinkConnector):
            for key in ("topics", "topics.regex"):
                if runner.config.get(key):
                    extra[key] = runner.config[key]
        return [{**c, **extra} for c in configs[:max_tasks]]

    def set_target_state(self, name: str, target: TargetState) -> None:
        """The connector and its tasks on this worker go to ``target`` (tasks of a STOPPED
        connector are stopped; the herder starts them again after a resume)."""
        with self._lock:
            runner = self._connectors.get(name)
            tasks = [t for t in self._tasks.values() if t.id.connector == name]
        if runner is not None:
            runner.transition(target)
        if target is TargetState.STOPPED:
            self.stop_tasks([t.id for t in tasks])
        else:
            for task in tasks:
                task.set_target(target)

    def stop_connector(self, name: str) -> None:
        with self._lock:
            runner = self._connectors.pop(name, None)
        if runner is None:
            return
        runner.shutdown(self.config.task_shutdown_graceful_timeout_ms / 1000)
        if runner.failed is None:
            self._report_connector(name, State.UNASSIGNED)

    # -------------------------------------------------------------- tasks

    def start_task(
        self,
        task_id: ConnectorTaskId,
        connector_config: Mapping[str, str],
        task_config: Mapping[str, str],
        target: TargetState,
    ) -> None:
        """Start a task thread; a failure to build it is reported as the task FAILED."""
        with self._lock:
            if task_id in self._tasks:
                raise ConnectError(f"task {task_id} is already running on this worker")
        try:
            runner = self._builder.build(task_id, connector_config, task_config, target)
        except Exception as e:  # noqa: BLE001 - reported, as Kafka reports a task it cannot build
            log.error("task %s could not start", task_id, exc_info=e)
            self.status.task(
                task_id,
                StatusEntry(
                    State.FAILED,
                    self.worker_id,
                    "".join(traceback.format_exception(e)),
                    self.generation,
                ),
            )
            return
        with self._lock:
            self._tasks[task_id] = runner
        runner.start()

    def stop_tasks(self, ids: Iterable[ConnectorTaskId]) -> None:
        """Stop ``ids`` in parallel, waiting at most ``task.shutdown.graceful.timeout.ms`` in
        all; tasks still running then are abandoned (logged)."""
        with self._lock:
            runners = [self._tasks.pop(i) for i in ids if i in self._tasks]
        for runner in runners:
            runner.stop()
        deadline = time.monotonic() + self.config.task_shutdown_graceful_timeout_ms / 1000
        for runner in runners:
            if not runner.join(deadline - time.monotonic()):
                runner.cancel()
                log.error(
                    "task %s did not stop within task.shutdown.graceful.timeout.ms=%d; abandoned",
                    runner.id,
                    self.config.task_shutdown_graceful_timeout_ms,
                )

    def close(self) -> None:
        """Stop every task, then every connector."""
        self.stop_tasks(self.tasks)
        for name in self.connectors:
            self.stop_connector(name)
