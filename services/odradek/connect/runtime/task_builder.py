"""How a worker builds a task runner from a connector's and a task's configs.

``TaskBuilder.build`` instantiates the task class the connector names, its pipeline (converters,
transforms), its error handling (log and dead letter queue reporters; the DLQ topic is created if
missing, as Kafka does), its Kafka clients (from the worker's ``producer.*``/``consumer.*`` and the
connector's ``*.override.*`` keys), and, for exactly-once sources, the transactional producer's
``transactional.id`` (``<group.id>-<connector>-<task>``). Configuration errors raise
``ConfigException`` naming the key; the worker reports them as the task FAILED. Stateless apart
from what it was given; any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from odradek.connect.api import (
    ConfigException,
    ConnectError,
    Connector,
    ExactlyOnceSupport,
    SinkTask,
    SourceTask,
)
from odradek.connect.herder import ConnectorTaskId, TargetState
from odradek.connect.runtime.errors import (
    DeadLetterQueueReporter,
    ErrorConfig,
    ErrorHandler,
    ErrorReporter,
    LogReporter,
)
from odradek.connect.runtime.offsets import OffsetStore
from odradek.connect.runtime.pipeline import Pipeline
from odradek.connect.runtime.sink_task import SinkTaskRunner
from odradek.connect.runtime.source_task import SourceTaskRunner
from odradek.connect.runtime.status import StatusListener
from odradek.connect.runtime.task_base import TaskRunner
from odradek.connect.worker_config import WorkerConfig

DLQ_PARTITIONS = 1
ADMIN_TIMEOUT_S = 15.0

ClientFactory = Callable[[dict[str, Any]], Any]


def _client_overrides(
    config: Mapping[str, str], client: str, worker: WorkerConfig
) -> dict[str, str]:
    """A connector's ``<client>.override.*`` keys, as the worker's
    ``connector.client.config.override.policy`` allows them (``worker_security``)."""
    return worker.client_overrides(config, client)


class TaskBuilder:
    def __init__(
        self,
        config: WorkerConfig,
        plugins: Any,
        offset_store: OffsetStore,
        status: StatusListener,
        worker_id: str,
        generation: Callable[[], int],
        connector_class: Callable[[Mapping[str, str]], type[Connector]],
        *,
        producer_factory: ClientFactory | None = None,
        consumer_factory: ClientFactory | None = None,
        admin_factory: ClientFactory | None = None,
    ):
        self.config = config
        self.plugins = plugins
        self.offset_store = offset_store
        self.status = status
        self.worker_id = worker_id
        self.generation = generation
        self.connector_class = connector_class
        self._producer_factory = producer_factory or _confluent("Producer")
        self._consumer_factory = consumer_factory or _confluent("Consumer")
        self._admin_factory = admin_factory or _admin

    def build(
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
            "generation": self.generation,
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
                f"connect-{task_id.connector}",
                _client_overrides(connector_config, "consumer", self.config),
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
            _client_overrides(connector_config, "producer", self.config)
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
            if connector_config.get("exactly.once.support", "requested") == "required":
                connector = self.connector_class(connector_config)()
                if connector.exactly_once_support(connector_config) is not (
                    ExactlyOnceSupport.SUPPORTED
                ):
                    raise ConfigException(
                        "exactly.once.support",
                        f"required, but {type(connector).__name__} does not declare it SUPPORTED",
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
        self._ensure_topic(
            error_config.dlq_topic,
            error_config.dlq_replication_factor,
            _client_overrides(connector_config, "admin", self.config),
        )
        producer = self._producer_factory(
            self.config.producer_config(
                _client_overrides(connector_config, "producer", self.config)
            )
        )
        return DeadLetterQueueReporter(
            producer,
            error_config.dlq_topic,
            task_id.connector,
            task_id.task,
            error_config.dlq_context_headers,
        )

    def _ensure_topic(
        self, topic: str, replication_factor: int, overrides: Mapping[str, str]
    ) -> None:
        """Create the DLQ topic if the cluster does not have it (as Kafka's DLQ reporter does)."""
        from confluent_kafka.admin import NewTopic

        admin = self._admin_factory(self.config.admin_config(overrides))
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


def _confluent(kind: str) -> Callable[[dict[str, Any]], Any]:
    def make(config: dict[str, Any]) -> Any:
        import confluent_kafka

        return getattr(confluent_kafka, kind)(config)

    return make


def _admin(config: dict[str, Any]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(config)
