"""A sink task's thread: consumer -> converters -> transforms -> ``put``, and its group offsets.

The consumer (confluent-kafka, group ``connect-<connector>``, ``enable.auto.commit=false``)
subscribes to ``topics`` or ``topics.regex``. Assignment changes call the task's ``open`` /
``close``; before partitions are revoked, and every ``offset.flush.interval.ms``, and on
``request_commit``, and on stop, the worker asks ``pre_commit(current offsets)`` (by default
``flush`` then all of them) and commits what it returns, synchronously: a committed offset is
always one the sink had made durable (at-least-once). Records reported to the dead letter queue
are acknowledged by it before their offsets are committed.

``put`` raising ``RetriableError``: every assigned partition is paused, the same batch is
redelivered after ``context.timeout(ms)`` (default ``RETRY_BACKOFF_DEFAULT_MS``), and the
partitions are resumed once ``put`` takes it. Any other exception from ``put`` fails the task.
``context.offset(tp, offset)`` seeks (a rewind or skip, applied before the next poll);
``context.pause``/``resume`` pause partitions until resumed (kept across rebalances).

Threading: everything runs on the task's thread, rebalance callbacks included (librdkafka calls
them inside ``consume``); ``stop`` from another thread only sets flags.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as CKTopicPartition

from odradek.connect.api import (
    ConnectError,
    RetriableError,
    SinkRecord,
    SinkTask,
    TimestampType,
    TopicPartition,
)
from odradek.connect.herder import ConnectorTaskId, State, TargetState
from odradek.connect.runtime.errors import (
    ErrorContext,
    ErrorHandler,
    Stage,
    ToleranceExceeded,
    class_name,
)
from odradek.connect.runtime.pipeline import Pipeline
from odradek.connect.runtime.status import StatusListener
from odradek.connect.runtime.task_base import TaskRunner

log = logging.getLogger(__name__)

CONSUME_BATCH_MAX = 500
CONSUME_TIMEOUT_S = 0.2
COMMIT_TIMEOUT_S = 30.0
RETRY_BACKOFF_DEFAULT_MS = 1_000  # Kafka's default when a task does not call context.timeout
RETRY_BACKOFF_MAX_MS = 60_000


def subscription(config: Mapping[str, str]) -> tuple[list[str], str | None]:
    """(topics, regex) of a sink connector's config; exactly one must be set (``ConnectError``)."""
    topics = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
    regex = config.get("topics.regex", "").strip() or None
    if topics and regex:
        raise ConnectError("a sink connector takes topics or topics.regex, not both")
    if not topics and not regex:
        raise ConnectError("a sink connector needs topics or topics.regex")
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as e:
            raise ConnectError(f"topics.regex: {e}") from e
    return topics, regex


class SinkContext:
    """The ``SinkTaskContext`` a sink task gets; its methods are called from the task thread."""

    def __init__(self, runner: SinkTaskRunner, configs: Mapping[str, str], reporter: Any):
        self._runner = runner
        self._configs = dict(configs)
        self._reporter = reporter

    @property
    def configs(self) -> Mapping[str, str]:
        return self._configs

    def offset(self, partition: TopicPartition, offset: int) -> None:
        self._runner.rewinds[partition] = offset

    def timeout(self, timeout_ms: int) -> None:
        self._runner.retry_backoff_ms = max(0, min(int(timeout_ms), RETRY_BACKOFF_MAX_MS))

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self._runner.assignment)

    def pause(self, *partitions: TopicPartition) -> None:
        self._runner.task_paused.update(partitions)
        self._runner.apply_pauses()

    def resume(self, *partitions: TopicPartition) -> None:
        self._runner.task_paused.difference_update(partitions)
        self._runner.apply_pauses()

    def request_commit(self) -> None:
        self._runner.commit_requested = True

    @property
    def errant_record_reporter(self) -> Any:
        return self._reporter


class ErrantReporter:
    """``context.errant_record_reporter``: the record's consumed original goes to the error
    reporters (log, DLQ) when ``errors.tolerance=all``; with ``none`` the task fails."""

    def __init__(self, runner: SinkTaskRunner):
        self._runner = runner

    def report(self, record: SinkRecord, error: Exception) -> None:
        runner = self._runner
        msg = runner.originals.get(id(record)) or runner.by_position.get(
            (record.topic, record.partition, record.kafka_offset)
        )
        context = _context(msg, Stage.TASK_PUT, class_name(runner.task))
        if msg is None:
            context.topic, context.partition = record.topic, record.partition
            context.offset = record.kafka_offset
        context.error = error
        try:
            runner.errors.fail(context)
        except ToleranceExceeded as e:
            runner.errant_failure = e
            raise


def _context(msg: Any, stage: Stage, executing_class: str) -> ErrorContext:
    if msg is None:
        return ErrorContext(stage, executing_class)
    return ErrorContext(
        stage,
        executing_class,
        topic=msg.topic(),
        partition=msg.partition(),
        offset=msg.offset(),
        key=msg.key(),
        value=msg.value(),
        headers=list(msg.headers() or []),
    )


def _ck(tp: TopicPartition) -> CKTopicPartition:
    return CKTopicPartition(tp.topic, tp.partition)


class SinkTaskRunner(TaskRunner):
    def __init__(
        self,
        task_id: ConnectorTaskId,
        task: SinkTask,
        task_config: Mapping[str, str],
        *,
        connector_config: Mapping[str, str],
        pipeline: Pipeline,
        errors: ErrorHandler,
        consumer_factory: Callable[[], Any],
        status: StatusListener,
        worker_id: str,
        target: TargetState,
        generation: Callable[[], int],
        flush_interval_ms: int,
        flush_timeout_ms: int,
    ):
        super().__init__(task_id, status, worker_id, target, generation)
        self.task = task
        self.task_config = dict(task_config)
        self.topics, self.regex = subscription(connector_config)
        self.pipeline = pipeline
        self.errors = errors
        errors.stopping = self.stopping
        self._consumer_factory = consumer_factory
        self.flush_interval_s = flush_interval_ms / 1000
        self.flush_timeout_s = flush_timeout_ms / 1000
        self.consumer: Any = None
        self.assignment: set[TopicPartition] = set()
        self.current: dict[TopicPartition, int] = {}  # next offset to consume, per partition
        self.committed: dict[TopicPartition, int] = {}
        self.rewinds: dict[TopicPartition, int] = {}
        self.task_paused: set[TopicPartition] = set()
        self.retry_paused = False
        self.retry_backoff_ms = RETRY_BACKOFF_DEFAULT_MS
        self.commit_requested = False
        self.errant_failure: BaseException | None = None
        self.callback_failure: BaseException | None = None
        self.drop_batch = False
        self.originals: dict[int, Any] = {}
        self.by_position: dict[tuple[str, int, int], Any] = {}
        self._opened = False
        self.records_put = 0

    # -------------------------------------------------------------- task thread

    def run(self) -> None:
        self.consumer = self._consumer_factory()
        self.task.initialize(SinkContext(self, self.task_config, ErrantReporter(self)))
        self.task.start(self.task_config)
        self._opened = True
        if self.regex is not None:
            # librdkafka takes a subscription starting with ^ as a regex.
            pattern = self.regex if self.regex.startswith("^") else "^" + self.regex
            topics = [pattern]
        else:
            topics = self.topics
        self.consumer.subscribe(
            topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        last_commit = time.monotonic()
        reported: State | None = None
        batch: list[SinkRecord] = []
        while not self.stopping.is_set():
            want = State.PAUSED if self.paused else State.RUNNING
            if reported is not want:
                self.report(reported := want)
                self.apply_pauses()
            if not batch:
                batch = self._poll()
            else:
                self.consumer.poll(0)  # keep the group membership alive while retrying
            if self.callback_failure is not None:
                raise self.callback_failure
            if self.drop_batch:  # partitions were revoked: their records go to the new owner
                self.drop_batch = False
                batch = [
                    r for r in batch if TopicPartition(r.topic, r.partition) in self.assignment
                ]
            if self.stopping.is_set():
                break
            if not self.paused or batch:
                batch = self._deliver(batch)
            if (
                self.commit_requested or time.monotonic() - last_commit >= self.flush_interval_s
            ) and not batch:
                self.commit_requested = False
                self.commit_offsets(self.assignment)
                last_commit = time.monotonic()
        self.close_partitions(set(self.assignment), commit=True)

    def close(self) -> None:
        try:
            if self._opened:
                self.task.stop()
        finally:
            if self.consumer is not None:
                try:
                    self.consumer.close()
                except Exception:  # noqa: BLE001
                    log.warning("task %s: consumer close failed", self.id, exc_info=True)
                self.consumer = None
            self.pipeline.close()
            self.errors.close()

    def _poll(self) -> list[SinkRecord]:
        self._apply_rewinds()
        messages = self.consumer.consume(CONSUME_BATCH_MAX, CONSUME_TIMEOUT_S)
        self.originals.clear()
        self.by_position.clear()
        records = []
        for msg in messages:
            if msg.error() is not None:
                if msg.error().fatal():
                    raise ConnectError(f"consumer failed: {msg.error()}")
                log.warning("task %s: consumer error: %s", self.id, msg.error())
                continue
            tp = TopicPartition(msg.topic(), msg.partition())
            if tp not in self.assignment:
                continue
            self.current[tp] = msg.offset() + 1
            record = self._convert(msg)
            if record is not None:
                records.append(record)
        return records

    def _convert(self, msg: Any) -> SinkRecord | None:
        topic = msg.topic()
        context = _context(msg, Stage.KEY_CONVERTER, "")
        converted = self.pipeline.convert(
            self.errors,
            context,
            key=lambda c: c.to_connect(topic, msg.key()),
            value=lambda c: c.to_connect(topic, msg.value()),
            headers=lambda c: tuple(
                (k, c.to_connect_header(topic, k, v).value) for k, v in (msg.headers() or [])
            ),
        )
        if converted is None:
            return None
        key, value, headers = converted
        ts_type, ts = msg.timestamp()
        record = SinkRecord(
            topic=topic,
            partition=msg.partition(),
            key_schema=key.schema,
            key=key.value,
            value_schema=value.schema,
            value=value.value,
            timestamp=ts if ts_type != 0 else None,
            headers=headers,
            kafka_offset=msg.offset(),
            timestamp_type=(
                TimestampType.LOG_APPEND_TIME if ts_type == 2 else TimestampType.CREATE_TIME
            )
            if ts_type != 0
            else TimestampType.NO_TIMESTAMP_TYPE,
        )
        ok, out = self.pipeline.transform(record, self.errors, context)
        if not ok or out is None:
            return None
        self.originals[id(out)] = msg
        self.by_position[(topic, msg.partition(), msg.offset())] = msg
        return out  # type: ignore[return-value]

    def _deliver(self, batch: list[SinkRecord]) -> list[SinkRecord]:
        """``put(batch)``; returns the batch to redeliver (after a ``RetriableError``) or []."""
        try:
            self.task.put(list(batch))
        except RetriableError as e:
            log.info(
                "task %s: put is retriable (%s); redelivering in %d ms",
                self.id,
                e,
                self.retry_backoff_ms,
            )
            if not self.retry_paused:
                self.retry_paused = True
                self.apply_pauses()
            self.stopping.wait(self.retry_backoff_ms / 1000)
            return batch
        except ToleranceExceeded:
            raise
        except Exception as e:
            if self.errant_failure is not None:
                raise self.errant_failure from e
            raise ConnectError(f"{class_name(self.task)}.put() failed: {e}") from e
        if self.errant_failure is not None:
            raise self.errant_failure
        self.records_put += len(batch)
        if self.retry_paused:
            self.retry_paused = False
            self.apply_pauses()
        return []

    def apply_pauses(self) -> None:
        """Pause what should be paused (target PAUSED, a retry, or the task's own), resume the
        rest of the assignment."""
        if self.consumer is None or not self.assignment:
            return
        if self.paused or self.retry_paused:
            paused = set(self.assignment)
        else:
            paused = self.task_paused & self.assignment
        running = self.assignment - paused
        if paused:
            self.consumer.pause([_ck(tp) for tp in paused])
        if running:
            self.consumer.resume([_ck(tp) for tp in running])

    def _apply_rewinds(self) -> None:
        if not self.rewinds:
            return
        for tp, offset in list(self.rewinds.items()):
            if tp in self.assignment:
                ck = _ck(tp)
                ck.offset = offset
                self.consumer.seek(ck)
                self.current[tp] = offset
        self.rewinds.clear()

    def commit_offsets(self, partitions: set[TopicPartition]) -> None:
        """``pre_commit`` then a synchronous commit of what it returns (for ``partitions``)."""
        if self.cancelled or not partitions:
            return
        current = {tp: o for tp, o in self.current.items() if tp in partitions}
        self.errors.flush(self.flush_timeout_s)
        try:
            offsets = self.task.pre_commit(current)
        except Exception:  # noqa: BLE001 - Kafka logs, does not commit, and goes on
            log.exception("task %s: pre_commit failed; offsets not committed", self.id)
            return
        todo = {
            tp: o
            for tp, o in (offsets or {}).items()
            if tp in partitions and self.committed.get(tp) != o
        }
        if not todo:
            return
        cks = []
        for tp, o in todo.items():
            ck = _ck(tp)
            ck.offset = o
            cks.append(ck)
        try:
            self.consumer.commit(offsets=cks, asynchronous=False)
        except KafkaException as e:
            # A rebalance in progress, a coordinator moving: the offsets stay uncommitted and
            # are committed by the next attempt (or redelivered to the partition's next owner).
            log.warning("task %s: offset commit failed, retried at the next one: %s", self.id, e)
            return
        self.committed.update(todo)

    def close_partitions(self, partitions: set[TopicPartition], *, commit: bool) -> None:
        if not partitions:
            return
        try:
            if commit:
                self.commit_offsets(partitions)
        finally:
            self.task.close(sorted(partitions, key=lambda tp: (tp.topic, tp.partition)))
            self.assignment -= partitions
            for tp in partitions:
                self.current.pop(tp, None)
                self.committed.pop(tp, None)

    # -------------------------------------------------------------- rebalance callbacks

    def _on_assign(self, consumer: Any, partitions: Sequence[Any]) -> None:
        new = [TopicPartition(p.topic, p.partition) for p in partitions]
        self.assignment.update(new)
        try:
            self.task.open(new)
        except Exception as e:  # noqa: BLE001 - remembered: fails the task after the callback
            self.callback_failure = ConnectError(f"{class_name(self.task)}.open() failed: {e}")
        for p in partitions:  # context.offset() called in open(): start there
            offset = self.rewinds.pop(TopicPartition(p.topic, p.partition), None)
            if offset is not None:
                p.offset = offset
        consumer.assign(partitions)
        self.apply_pauses()

    def _on_revoke(self, consumer: Any, partitions: Sequence[Any]) -> None:
        revoked = {TopicPartition(p.topic, p.partition) for p in partitions}
        self.drop_batch = True
        try:
            self.close_partitions(revoked & self.assignment, commit=not self.cancelled)
        except Exception:  # noqa: BLE001 - librdkafka swallows it: log it here
            log.exception("task %s: closing revoked partitions failed", self.id)

    def _on_lost(self, consumer: Any, partitions: Sequence[Any]) -> None:
        lost = {TopicPartition(p.topic, p.partition) for p in partitions}
        try:
            self.close_partitions(lost & self.assignment, commit=False)
        except Exception:  # noqa: BLE001
            log.exception("task %s: closing lost partitions failed", self.id)
