"""Error handling of a task's record pipeline: Kafka Connect's ``RetryWithToleranceOperator``,
its log reporter and its dead letter queue.

Every step that can fail on one record (converting, transforming, producing) runs through
``ErrorHandler.execute``:

- a ``RetriableError`` (or a librdkafka error marked retriable) is retried with exponential
  backoff, starting at ``RETRY_DELAY_MIN_MS`` and capped by ``errors.retry.delay.max.ms``, until
  ``errors.retry.timeout`` ms have passed (0, the default: no retry; -1: forever, until the task
  stops);
- a failure that remains is tolerated or not: ``errors.tolerance=none`` (the default) raises
  ``ToleranceExceeded`` and the task fails; ``all`` skips the record after reporting it: logged
  when ``errors.log.enable`` (with its key/value when ``errors.log.include.messages``), and, for a
  sink, sent to ``errors.deadletterqueue.topic.name`` with the consumed record's original key,
  value and headers, plus Kafka's ``__connect.errors.*`` headers when
  ``errors.deadletterqueue.context.headers.enable``.

Failures of ``put``/``poll`` themselves are not tolerated (as Kafka's): a sink task reports the
records it cannot write through the errant record reporter (``ErrantReporter``).

One ``ErrorHandler`` per task, used from the task's thread only; the clock and sleep are injected
(unit tests run without waiting).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from odradek.connect.api import ConfigException, ConnectError, RetriableError

log = logging.getLogger(__name__)

RETRY_DELAY_MIN_MS = 300
"""First backoff of a retried operation (Kafka's RETRIES_DELAY_MIN_MS)."""

CLOSE_FLUSH_TIMEOUT_S = 5.0
"""How long a closing DLQ reporter waits for records still on their way."""

HEADER_PREFIX = "__connect.errors."
H_TOPIC = HEADER_PREFIX + "topic"
H_PARTITION = HEADER_PREFIX + "partition"
H_OFFSET = HEADER_PREFIX + "offset"
H_CONNECTOR = HEADER_PREFIX + "connector.name"
H_TASK = HEADER_PREFIX + "task.id"
H_STAGE = HEADER_PREFIX + "stage"
H_CLASS = HEADER_PREFIX + "class.name"
H_EXCEPTION = HEADER_PREFIX + "exception.class.name"
H_MESSAGE = HEADER_PREFIX + "exception.message"
H_TRACE = HEADER_PREFIX + "exception.stacktrace"

T = TypeVar("T")


class Stage(StrEnum):
    """Kafka's Stage: where in the pipeline a record failed."""

    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"
    TASK_POLL = "TASK_POLL"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"


class ToleranceExceeded(ConnectError):
    """A record failed and ``errors.tolerance`` does not let the task skip it."""


def _bool(config: Mapping[str, str], name: str, default: bool) -> bool:
    raw = config.get(name)
    if raw is None:
        return default
    low = str(raw).strip().lower()
    if low not in ("true", "false"):
        raise ConfigException(name, f"{raw!r} is not true or false")
    return low == "true"


def _int(config: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = config.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError as e:
        raise ConfigException(name, f"{raw!r} is not an integer") from e
    if value < minimum:
        raise ConfigException(name, f"{value} is below the minimum {minimum}")
    return value


@dataclass(frozen=True)
class ErrorConfig:
    """A connector's ``errors.*`` keys, with Kafka's defaults."""

    tolerance_all: bool = False
    retry_timeout_ms: int = 0
    retry_delay_max_ms: int = 60_000
    log_enable: bool = False
    log_include_messages: bool = False
    dlq_topic: str = ""
    dlq_replication_factor: int = 3
    dlq_context_headers: bool = False

    @classmethod
    def from_connector_config(cls, config: Mapping[str, str]) -> ErrorConfig:
        tolerance = str(config.get("errors.tolerance", "none")).strip().lower()
        if tolerance not in ("none", "all"):
            raise ConfigException("errors.tolerance", f"{tolerance!r} is not none or all")
        return cls(
            tolerance_all=tolerance == "all",
            retry_timeout_ms=_int(config, "errors.retry.timeout", 0, -1),
            retry_delay_max_ms=_int(config, "errors.retry.delay.max.ms", 60_000, 1),
            log_enable=_bool(config, "errors.log.enable", False),
            log_include_messages=_bool(config, "errors.log.include.messages", False),
            dlq_topic=str(config.get("errors.deadletterqueue.topic.name", "")).strip(),
            dlq_replication_factor=_int(
                config, "errors.deadletterqueue.topic.replication.factor", 3, -1
            ),
            dlq_context_headers=_bool(
                config, "errors.deadletterqueue.context.headers.enable", False
            ),
        )


@dataclass
class ErrorContext:
    """What failed: the stage and class, and the record (consumed or produced) it failed on."""

    stage: Stage
    executing_class: str
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    key: bytes | None = None  # the consumed record's original bytes (sinks)
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] | None = None
    record: Any = None  # the source record, for the log
    error: BaseException | None = None

    def describe(self, include_messages: bool) -> str:
        where = f"Executing stage '{self.stage}' with class '{self.executing_class}'"
        if self.topic is not None and self.offset is not None:
            where += (
                f", where consumed record is {{topic='{self.topic}', "
                f"partition={self.partition}, offset={self.offset}}}"
            )
        elif self.record is not None:
            where += ", where source record is " + (
                repr(self.record) if include_messages else f"{{topic='{self.topic}'}}"
            )
        if include_messages and self.offset is not None:
            where += f", key={self.key!r}, value={self.value!r}"
        return where + "."


class ErrorReporter(Protocol):
    def report(self, context: ErrorContext) -> None: ...

    def flush(self, timeout_s: float) -> None: ...

    def close(self) -> None: ...


class LogReporter:
    """``errors.log.enable``: one ERROR line per failed record, with the stage and record."""

    def __init__(self, task: str, include_messages: bool):
        self.task = task
        self.include_messages = include_messages

    def report(self, context: ErrorContext) -> None:
        log.error(
            "Error encountered in task %s. %s",
            self.task,
            context.describe(self.include_messages),
            exc_info=context.error,
        )

    def flush(self, timeout_s: float) -> None:
        pass

    def close(self) -> None:
        pass


def dlq_headers(context: ErrorContext, connector: str, task: int) -> list[tuple[str, bytes]]:
    """Kafka's ``__connect.errors.*`` context headers, values as UTF-8 strings."""
    error = context.error
    headers = [
        (H_TOPIC, context.topic or ""),
        (H_PARTITION, "" if context.partition is None else str(context.partition)),
        (H_OFFSET, "" if context.offset is None else str(context.offset)),
        (H_CONNECTOR, connector),
        (H_TASK, str(task)),
        (H_STAGE, str(context.stage)),
        (H_CLASS, context.executing_class),
    ]
    if error is not None:
        headers += [
            (H_EXCEPTION, f"{type(error).__module__}.{type(error).__qualname__}"),
            (H_MESSAGE, str(error)),
            (H_TRACE, "".join(traceback.format_exception(error))),
        ]
    return [(k, v.encode("utf-8")) for k, v in headers]


class DeadLetterQueueReporter:
    """Sends a failed consumed record to the DLQ topic through ``producer`` (a confluent-kafka
    Producer the caller owns and closes). The topic is created if missing (as Kafka does) by
    ``ensure_topic`` before the first record."""

    def __init__(self, producer: Any, topic: str, connector: str, task: int, headers: bool):
        self.producer = producer
        self.topic = topic
        self.connector = connector
        self.task = task
        self.headers = headers
        self.failed: BaseException | None = None

    def report(self, context: ErrorContext) -> None:
        if context.offset is None:
            return  # a source record: Kafka's DLQ is for sink connectors only
        headers = list(context.headers or [])
        if self.headers:
            headers += dlq_headers(context, self.connector, self.task)
        while True:
            try:
                self.producer.produce(
                    self.topic,
                    key=context.key,
                    value=context.value,
                    headers=headers,
                    on_delivery=self._delivered,
                )
                break
            except BufferError:
                self.producer.poll(0.1)
        self.producer.poll(0)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None and self.failed is None:
            self.failed = ConnectError(
                f"could not write to the dead letter queue {self.topic}: {err}"
            )

    def flush(self, timeout_s: float) -> None:
        """Wait until every reported record is in the DLQ; ``ConnectError`` if one failed."""
        remaining = self.producer.flush(timeout_s)
        if self.failed is not None:
            raise self.failed
        if remaining:
            raise ConnectError(
                f"{remaining} records not acknowledged by the dead letter queue {self.topic} "
                f"within {timeout_s:.1f} s"
            )

    def close(self) -> None:
        remaining = self.producer.flush(CLOSE_FLUSH_TIMEOUT_S)
        if remaining:
            log.error(
                "%d records lost on their way to the dead letter queue %s", remaining, self.topic
            )


def is_retriable(error: BaseException) -> bool:
    if isinstance(error, RetriableError):
        return True
    kafka_error = error.args[0] if error.args else None
    retriable = getattr(kafka_error, "retriable", None)
    return bool(retriable()) if callable(retriable) else False


class ErrorHandler:
    """Runs pipeline steps with retries and tolerance (see the module doc). Task thread only."""

    def __init__(
        self,
        config: ErrorConfig,
        reporters: list[ErrorReporter],
        *,
        stopping: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.config = config
        self.reporters = reporters
        self.stopping = stopping or threading.Event()
        self.clock = clock
        self.records_failed = 0
        self.records_skipped = 0
        self.retries = 0

    def execute(
        self, stage: Stage, executing_class: str, fn: Callable[[], T], context: ErrorContext
    ) -> tuple[bool, T | None]:
        """(True, result) or, when the failure is tolerated, (False, None) after reporting it."""
        deadline = None
        if self.config.retry_timeout_ms >= 0:
            deadline = self.clock() + self.config.retry_timeout_ms / 1000
        delay_ms = RETRY_DELAY_MIN_MS
        while True:
            try:
                return True, fn()
            except Exception as e:  # noqa: BLE001 - every plugin failure goes through tolerance
                if is_retriable(e) and not self.stopping.is_set():
                    now = self.clock()
                    if deadline is None or now < deadline:
                        wait_ms = (
                            delay_ms if deadline is None else min(delay_ms, (deadline - now) * 1000)
                        )
                        self.retries += 1
                        self.stopping.wait(max(wait_ms, 0) / 1000)
                        delay_ms = min(delay_ms * 2, self.config.retry_delay_max_ms)
                        continue
                context.stage = stage
                context.executing_class = executing_class
                context.error = e
                self.fail(context)
                return False, None

    def fail(self, context: ErrorContext) -> None:
        """A record failed for good: raise ``ToleranceExceeded`` or report and skip it."""
        self.records_failed += 1
        if not self.config.tolerance_all:
            raise ToleranceExceeded(
                f"Tolerance exceeded in error handler: {context.describe(False)}"
            ) from context.error
        self.records_skipped += 1
        for reporter in self.reporters:
            reporter.report(context)

    def flush(self, timeout_s: float) -> None:
        for reporter in self.reporters:
            reporter.flush(timeout_s)

    def close(self) -> None:
        for reporter in self.reporters:
            try:
                reporter.close()
            except Exception:  # noqa: BLE001
                log.exception("closing an error reporter failed")


def class_name(obj: Any) -> str:
    """Kafka-style name of a plugin instance's class, for contexts and headers."""
    return _class_name(obj if isinstance(obj, type) else type(obj))


@functools.cache
def _class_name(cls: type) -> str:
    # cached: every record's conversions and transforms are named, three or more times each
    kafka_name = getattr(cls, "KAFKA_NAME", None) or getattr(cls, "KAFKA_CLASS", None)
    return kafka_name or f"{cls.__module__}.{cls.__qualname__}"
