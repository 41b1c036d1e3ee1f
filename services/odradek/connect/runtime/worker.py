"""The Worker: runs connectors and tasks in threads on behalf of a herder.

A herder (standalone or distributed) decides what runs where; the Worker only does it:
``start_connector`` / ``stop_connector``, ``connector_task_configs``, ``start_task`` /
``stop_tasks``, ``set_target_state``. It reports every state change to its ``StatusListener``
and stores source offsets in its ``OffsetStore``.

Threads: each connector instance has a thread of its own (a one-thread executor: its ``start``,
``task_configs`` and ``stop`` run there in order, never concurrently); each task has its own
thread (``source_task``, ``sink_task``). Worker methods may be called from any thread (a herder's
event loop calls them through ``asyncio.to_thread`` or directly: they block at most
``task.shutdown.graceful.timeout.ms`` plus ``CONNECTOR_CALL_TIMEOUT_S``). A lock guards the maps
of what runs here.

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
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from odradek.connect.api import (
    ConfigException,
    ConnectError,
    Connector,
    SinkConnector,
    SinkTask,
    SourceConnector,
    SourceTask,
)
from odradek.connect.herder import ConnectorTaskId, State, StatusEntry, TargetState
from odradek.connect.runtime.errors import (
    DeadLetterQueueReporter,
    ErrorConfig,
    ErrorHandler,
    ErrorReporter,
    LogReporter,
)
from odradek.connect.runtime.offsets import OffsetStore
from odradek.connect.runtime.pipeline import Pipeline, load_class
from odradek.connect.runtime.sink_task import SinkTaskRunner, subscription
from odradek.connect.runtime.source_task import SourceTaskRunner
from odradek.connect.runtime.status import StatusListener
from odradek.connect.runtime.task_base import TaskRunner
from odradek.connect.worker_config import WorkerConfig

log = logging.getLogger(__name__)

CONNECTOR_CALL_TIMEOUT_S = 30.0
"""Longest wait for a connector's ``start``/``task_configs``/``stop`` on its thread."""
DLQ_PARTITIONS = 1
ADMIN_TIMEOUT_S = 15.0
TASK_CLASS_CONFIG = "task.class"


def _client_overrides(config: Mapping[str, str], client: str) -> dict[str, str]:
    prefix = f"{client}.override."
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


class _ConnectorContext:
    def __init__(self, runner: ConnectorRunner):
        self._runner = runner

    def request_task_reconfiguration(self) -> None:
        self._runner.request_reconfiguration()

    def raise_error(self, error: Exception) -> None:
        self._runner.fail(error)


class ConnectorRunner:
    """One connector instance and its thread."""

    def __init__(
        self,
        name: str,
        connector: Connector,
        config: Mapping[str, str],
        worker: Worker,
        on_reconfigure: Callable[[], None],
    ):
        self.name = name
        self.connector = connector
        self.config = dict(config)
        self.worker = worker
        self.on_reconfigure = on_reconfigure
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"connect-connector-{name}")
        self.started = False
        self.failed: BaseException | None = None
        self.target = TargetState.STARTED

    def _report(self, state: State, error: BaseException | None = None) -> None:
        trace = "".join(traceback.format_exception(error)) if error is not None else None
        self.worker._report_connector(self.name, state, trace)

    def fail(self, error: BaseException) -> None:
        log.error("connector %s failed", self.name, exc_info=error)
        self.failed = error
        self._report(State.FAILED, error)

    def request_reconfiguration(self) -> None:
        if self.failed is None and self.started:
            try:
                self.on_reconfigure()
            except Exception:  # noqa: BLE001
                log.exception("connector %s: reconfiguration request failed", self.name)

    def submit(self, fn: Callable[[], Any]) -> Future:
        return self.executor.submit(fn)

    def transition(self, target: TargetState) -> Future:
        """Start, pause or stop the connector object on its thread (in order)."""
        return self.submit(lambda: self._transition(target))

    def _transition(self, target: TargetState) -> None:
        self.target = target
        if self.failed is not None:
            return
        try:
            if target is TargetState.STOPPED:
                if self.started:
                    self.started = False
                    self.connector.stop()
                self._report(State.STOPPED)
                return
            if not self.started:
                self.connector.start(self.config)
                self.started = True
            self._report(State.RUNNING if target is TargetState.STARTED else State.PAUSED)
        except Exception as e:  # noqa: BLE001 - a connector's failure fails it, not the worker
            self.fail(e)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        def call() -> list[dict[str, str]]:
            if self.failed is not None:
                raise ConnectError(f"connector {self.name} has failed: {self.failed}")
            if not self.started:
                raise ConnectError(f"connector {self.name} is not started ({self.target})")
            return [dict(c) for c in self.connector.task_configs(max_tasks)]

        return self.submit(call).result(CONNECTOR_CALL_TIMEOUT_S)

    def shutdown(self, timeout_s: float) -> bool:
        def stop() -> None:
            if self.started:
                self.started = False
                self.connector.stop()

        future = self.submit(stop)
        try:
            future.result(timeout_s)
            ok = True
        except FutureTimeout:
            log.error("connector %s did not stop within %.1f s; abandoned", self.name, timeout_s)
            ok = False
        except Exception:  # noqa: BLE001
            log.exception("connector %s: stop() failed", self.name)
            ok = True
        self.executor.shutdown(wait=False)
        return ok


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
        self._producer_factory = producer_factory or _confluent("Producer")
        self._consumer_factory = consumer_factory or _confluent("Consumer")
        self._admin_factory = admin_factory or _admin

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
        cls = load_class(self.plugins, "connector", name)
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
        runner = ConnectorRunner(name, connector, config, self, on_reconfigure)
        connector.initialize(_ConnectorContext(runner))
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
            runner = self._build_task(task_id, connector_config, task_config, target)
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

    def _build_task(
        self,
        task_id: ConnectorTaskId,
        connector_config: Mapping[str, str],
        task_config: Mapping[str, str],
        target: TargetState,
    ) -> TaskRunner:
        connector_cls = self.connector_class(connector_config)
        task_cls = connector_cls().task_class()
        task = task_cls()
        pipeline = Pipeline.build(connector_config, self.config, self.plugins)
        error_config = ErrorConfig.from_connector_config(connector_config)
        reporters: list[ErrorReporter] = []
        if error_config.log_enable:
            reporters.append(LogReporter(str(task_id), error_config.log_include_messages))
        common = {
            "pipeline": pipeline,
            "status": self.status,
            "worker_id": self.worker_id,
            "target": target,
            "generation": lambda: self.generation,
            "flush_interval_ms": self.config.offset_flush_interval_ms,
            "flush_timeout_ms": self.config.offset_flush_timeout_ms,
        }
        if isinstance(task, SourceTask):
            return self._build_source(
                task_id, task, connector_config, task_config, error_config, reporters, common
            )
        if isinstance(task, SinkTask):
            if error_config.dlq_topic:
                reporters.append(self._dlq_reporter(task_id, connector_config, error_config))
            consumer_config = self.config.consumer_config(
                f"connect-{task_id.connector}", _client_overrides(connector_config, "consumer")
            )
            return SinkTaskRunner(
                task_id,
                task,
                task_config,
                connector_config=connector_config,
                errors=ErrorHandler(error_config, reporters),
                consumer_factory=lambda: self._consumer_factory(consumer_config),
                **common,
            )
        raise ConnectError(f"{task_cls.__name__} is neither a SourceTask nor a SinkTask")

    def _build_source(
        self,
        task_id: ConnectorTaskId,
        task: SourceTask,
        connector_config: Mapping[str, str],
        task_config: Mapping[str, str],
        error_config: ErrorConfig,
        reporters: list[ErrorReporter],
        common: dict[str, Any],
    ) -> SourceTaskRunner:
        producer_config = self.config.producer_config(
            _client_overrides(connector_config, "producer")
        )
        eos_topic = None
        if self.config.exactly_once_source_enabled:
            if not self.config.distributed:
                raise ConnectError("exactly.once.source.support needs distributed mode")
            boundary = connector_config.get("transaction.boundary", "poll")
            if boundary != "poll":
                raise ConfigException(
                    "transaction.boundary", f"{boundary!r} is not implemented (only poll)"
                )
            eos_topic = connector_config.get("offsets.storage.topic") or self.config.get(
                "offset.storage.topic"
            )
            producer_config["transactional.id"] = (
                f"{self.config.group_id}-{task_id.connector}-{task_id.task}"
            )
            # librdkafka refuses a delivery timeout above the transaction timeout.
            txn_timeout = int(producer_config.setdefault("transaction.timeout.ms", 60_000))
            producer_config["delivery.timeout.ms"] = min(
                int(producer_config.get("delivery.timeout.ms", txn_timeout)), txn_timeout
            )
        elif connector_config.get("exactly.once.support", "requested") == "required":
            raise ConfigException(
                "exactly.once.support",
                "required, but the worker's exactly.once.source.support is not enabled",
            )
        return SourceTaskRunner(
            task_id,
            task,
            task_config,
            errors=ErrorHandler(error_config, reporters),
            producer_factory=lambda: self._producer_factory(producer_config),
            offset_store=self.offset_store,
            transactional_offsets_topic=eos_topic,
            **common,
        )

    def _dlq_reporter(
        self,
        task_id: ConnectorTaskId,
        connector_config: Mapping[str, str],
        error_config: ErrorConfig,
    ) -> DeadLetterQueueReporter:
        self._ensure_topic(error_config.dlq_topic, error_config.dlq_replication_factor)
        producer = self._producer_factory(
            self.config.producer_config(_client_overrides(connector_config, "producer"))
        )
        return DeadLetterQueueReporter(
            producer,
            error_config.dlq_topic,
            task_id.connector,
            task_id.task,
            error_config.dlq_context_headers,
        )

    def _ensure_topic(self, topic: str, replication_factor: int) -> None:
        """Create the DLQ topic if the cluster does not have it (as Kafka's DLQ reporter does)."""
        from confluent_kafka.admin import NewTopic

        admin = self._admin_factory(self.config.admin_config())
        if topic in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics:
            return
        futures = admin.create_topics(
            [NewTopic(topic, DLQ_PARTITIONS, replication_factor)],
            request_timeout=ADMIN_TIMEOUT_S,
        )
        for future in futures.values():
            try:
                future.result(ADMIN_TIMEOUT_S)
            except Exception as e:  # noqa: BLE001
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise ConnectError(
                        f"could not create the dead letter queue {topic}: {e}"
                    ) from e

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


def _confluent(kind: str) -> Callable[[dict[str, Any]], Any]:
    def make(config: dict[str, Any]) -> Any:
        import confluent_kafka

        return getattr(confluent_kafka, kind)(config)

    return make


def _admin(config: dict[str, Any]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(config)
