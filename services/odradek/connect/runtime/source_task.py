"""A source task's thread: ``poll()`` -> transforms -> converters -> producer, and its offsets.

At-least-once (the default): records go to a confluent-kafka Producer (``acks=all``, idempotent);
each record's source offset is submitted in poll order and becomes committable when it and every
earlier record of its source partition are acknowledged (``SubmittedOffsets``). Every
``offset.flush.interval.ms`` and on stop, committable offsets are written to the ``OffsetStore``
(durable when ``put`` returns), then ``task.commit()`` is called. A record filtered out by a
transform, or skipped by ``errors.tolerance=all``, counts as acknowledged.

Exactly-once (KIP-618, ``exactly.once.source.support=enabled`` on the worker, distributed mode,
``transaction.boundary=poll``): a transactional producer (``transactional.id`` =
``<group.id>-<connector>-<task>``; ``init_transactions`` fences an older instance of the task);
each poll batch's records and the latest source offset of each partition it touched, written to
the offset topic with ``storage_format``'s key and value, are committed in one transaction. A
failed transaction is aborted and fails the task (its records and offsets are never visible).

Topics are not created: a record for a topic the cluster does not have fails the task with a
message that names it (``topic.creation.*`` is not implemented).

Threading: everything here, delivery callbacks included (they run inside ``producer.poll``), runs
on the task's thread; ``stop`` (another thread) sets a flag and calls ``task.stop()`` so a
blocked ``poll`` returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError

from odradek.connect import storage_format as sf
from odradek.connect.api import (
    ConnectError,
    RecordMetadata,
    RetriableError,
    SourceRecord,
    SourceTask,
)
from odradek.connect.herder import ConnectorTaskId, State, TargetState
from odradek.connect.runtime.errors import ErrorContext, ErrorHandler, Stage, class_name
from odradek.connect.runtime.offsets import OffsetStore, StoreOffsetReader, SubmittedOffsets
from odradek.connect.runtime.pipeline import Pipeline
from odradek.connect.runtime.status import StatusListener
from odradek.connect.runtime.task_base import PAUSED_WAIT_S, TaskRunner
from odradek.connect.storage_format import partition_key

log = logging.getLogger(__name__)

PRODUCE_BACKOFF_S = 0.05
"""Wait inside ``producer.poll`` when the producer's queue is full, before producing again."""
METADATA_TIMEOUT_S = 10.0
TOPIC_WAIT_S = 3.0
"""How long a source task looks for a topic it does not see before failing."""
TOPIC_RETRY_S = 0.2
# Metadata answers for a topic that may yet appear (just created, or being auto-created).
TOPIC_ERRORS_TO_WAIT_OUT = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE}
)
TRANSACTION_TIMEOUT_S = 30.0
IN_FLIGHT_MAX = 10_000
"""Unacknowledged records above which the task stops polling until acks arrive; also how many
acknowledged ones are kept before their offsets are folded into the next flush."""


class SourceContext:
    def __init__(self, configs: Mapping[str, str], reader: StoreOffsetReader):
        self._configs = dict(configs)
        self._reader = reader

    @property
    def configs(self) -> Mapping[str, str]:
        return self._configs

    @property
    def offset_storage_reader(self) -> StoreOffsetReader:
        return self._reader


class SourceTaskRunner(TaskRunner):
    def __init__(
        self,
        task_id: ConnectorTaskId,
        task: SourceTask,
        task_config: Mapping[str, str],
        *,
        pipeline: Pipeline,
        errors: ErrorHandler,
        producer_factory: Callable[[], Any],
        offset_store: OffsetStore,
        status: StatusListener,
        worker_id: str,
        target: TargetState,
        generation: Callable[[], int],
        flush_interval_ms: int,
        flush_timeout_ms: int,
        transactional_offsets_topic: str | None = None,
    ):
        super().__init__(task_id, status, worker_id, target, generation)
        self.task = task
        self.task_config = dict(task_config)
        self.pipeline = pipeline
        self.errors = errors
        errors.stopping = self.stopping
        self._producer_factory = producer_factory
        self.offset_store = offset_store
        self.flush_interval_s = flush_interval_ms / 1000
        self.flush_timeout_s = flush_timeout_ms / 1000
        self.eos_offsets_topic = transactional_offsets_topic
        self.producer: Any = None
        self.submitted = SubmittedOffsets()
        self._unflushed: dict[sf.PartitionKey, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
        self._known_topics: set[str] = set()
        self._delivery_error: BaseException | None = None
        self._task_started = False
        self._task_stopped = False
        self.records_sent = 0

    # -------------------------------------------------------------- other threads

    def stop(self) -> None:
        super().stop()
        self._stop_task()

    def _stop_task(self) -> None:
        if self._task_started and not self._task_stopped:
            self._task_stopped = True
            try:
                self.task.stop()
            except Exception:  # noqa: BLE001
                log.exception("task %s: stop() failed", self.id)

    # -------------------------------------------------------------- task thread

    def run(self) -> None:
        self.producer = self._producer_factory()
        if self.eos_offsets_topic is not None:
            self.producer.init_transactions(TRANSACTION_TIMEOUT_S)
        reader = StoreOffsetReader(self.offset_store, self.id.connector)
        self.task.initialize(SourceContext(self.task_config, reader))
        self._task_started = True
        self.task.start(self.task_config)
        last_flush = time.monotonic()
        reported: State | None = None
        while not self.stopping.is_set():
            if self.paused:
                if reported is not State.PAUSED:
                    self.report(reported := State.PAUSED)
                self.wakeup.wait(PAUSED_WAIT_S)
                self.wakeup.clear()
            else:
                if reported is not State.RUNNING:
                    self.report(reported := State.RUNNING)
                if self.submitted.in_flight >= IN_FLIGHT_MAX:
                    self.producer.poll(PRODUCE_BACKOFF_S)
                else:
                    self._poll_and_send()
            self._check_delivery()
            if self.submitted.pending >= IN_FLIGHT_MAX:
                self._collect_committable()  # bounds the bookkeeping between flushes
            if (
                self.eos_offsets_topic is None
                and time.monotonic() - last_flush >= self.flush_interval_s
            ):
                self.commit_offsets()
                last_flush = time.monotonic()
        self._stop_task()
        if self.eos_offsets_topic is None:
            remaining = self.producer.flush(self.flush_timeout_s)
            if remaining:
                log.warning("task %s: %d records unacknowledged at stop", self.id, remaining)
            self._check_delivery()
            self.commit_offsets()

    def close(self) -> None:
        self._stop_task()
        if self.producer is not None:
            if self.failed is not None and self.eos_offsets_topic is None:
                # Keep what was acknowledged before the failure: fewer duplicates on restart.
                try:
                    self.producer.flush(self.flush_timeout_s)
                    self.commit_offsets()
                except Exception:  # noqa: BLE001 - the task has failed already
                    log.warning("task %s: last offset flush failed", self.id, exc_info=True)
            self.producer.flush(0)
            self.producer = None
        self.pipeline.close()
        self.errors.close()

    def _check_delivery(self) -> None:
        self.producer.poll(0)
        if self._delivery_error is not None:
            raise self._delivery_error

    def _poll_and_send(self) -> None:
        try:
            records = self.task.poll()
        except RetriableError as e:  # as Kafka: log it and poll again
            log.warning("task %s: poll() failed, will poll again: %s", self.id, e)
            self.stopping.wait(PRODUCE_BACKOFF_S)
            return
        except Exception as e:
            if self.stopping.is_set():
                return
            raise ConnectError(f"{class_name(self.task)}.poll() failed: {e}") from e
        if not records or self.stopping.is_set():
            return
        if self.eos_offsets_topic is not None:
            self._send_transaction(records)
            return
        for record in records:
            self._send(record, self._submit(record))

    def _submit(self, record: SourceRecord) -> Any:
        if not record.source_partition and not record.source_offset:
            return None
        return self.submitted.submit(record.source_partition, record.source_offset)

    def _convert(self, record: SourceRecord) -> tuple[SourceRecord, dict[str, Any]] | None:
        """The transformed record and the producer's arguments; None when it is filtered out or
        skipped (tolerated failure)."""
        context = ErrorContext(Stage.TRANSFORMATION, "", topic=record.topic, record=record)
        ok, out = self.pipeline.transform(record, self.errors, context)
        if not ok or out is None:
            return None
        topic = out.topic
        context.topic = topic
        converted = self.pipeline.convert(
            self.errors,
            context,
            key=lambda c: c.from_connect(topic, out.key_schema, out.key),
            value=lambda c: c.from_connect(topic, out.value_schema, out.value),
            headers=lambda c: [
                (k, c.from_connect_header(topic, k, None, v)) for k, v in out.headers
            ],
        )
        if converted is None:
            return None
        key, value, headers = converted
        self._check_topic(topic)
        kwargs: dict[str, Any] = {"key": key, "value": value}
        if headers:
            kwargs["headers"] = headers
        if out.partition is not None:
            kwargs["partition"] = out.partition
        if out.timestamp is not None:
            kwargs["timestamp"] = out.timestamp
        return out, kwargs  # type: ignore[return-value]

    def _check_topic(self, topic: str) -> None:
        """Refuse a topic the cluster does not have, as Kafka Connect's producer would fail.

        The Metadata request names the topic, so brokers with ``auto.create.topics.enable``
        create it, as they do for Kafka Connect's producer. A topic created a moment ago may be
        missing from a broker's metadata for a little while: look again for ``TOPIC_WAIT_S``. An
        error that waiting cannot cure (an invalid name, no authorization) fails at once.
        """
        if topic in self._known_topics:
            return
        deadline = time.monotonic() + TOPIC_WAIT_S
        error = None
        while True:
            metadata = self.producer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
            found = metadata.topics.get(topic)
            error = None if found is None else found.error
            if found is not None and error is None:
                self._known_topics.add(topic)
                return
            if error is not None and error.code() not in TOPIC_ERRORS_TO_WAIT_OUT:
                break
            if time.monotonic() >= deadline or self.stopping.wait(TOPIC_RETRY_S):
                break
        reason = f": {error.str()}" if error is not None else ""
        raise ConnectError(
            f"topic {topic!r} does not exist and was not created{reason} (create it before "
            "starting the connector, or let the brokers auto-create topics; topic.creation.* is "
            "not implemented)"
        )

    def _produce(self, topic: str, kwargs: dict[str, Any], on_delivery: Any) -> None:
        while True:
            try:
                self.producer.produce(topic, on_delivery=on_delivery, **kwargs)
                return
            except BufferError:
                if self.stopping.is_set():
                    raise ConnectError("stopped while the producer's queue was full") from None
                self.producer.poll(PRODUCE_BACKOFF_S)

    def _send(self, record: SourceRecord, submitted: Any) -> None:
        converted = self._convert(record)
        if converted is None:
            if submitted is not None:
                self.submitted.ack(submitted)
            self._commit_record(record, None)
            return
        out, kwargs = converted

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                error = ConnectError(f"could not produce to {out.topic}: {err}")
                context = ErrorContext(Stage.KAFKA_PRODUCE, "", topic=out.topic, record=record)
                context.error = error
                try:
                    self.errors.fail(context)
                except ConnectError as e:
                    if self._delivery_error is None:
                        self._delivery_error = e
                    return
                metadata = None
            else:
                self.records_sent += 1
                metadata = RecordMetadata(msg.topic(), msg.partition(), msg.offset(), _ts(msg))
            if submitted is not None:
                self.submitted.ack(submitted)
            self._commit_record(record, metadata)

        self._produce(out.topic, kwargs, delivered)

    def _commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        try:
            self.task.commit_record(record, metadata)
        except Exception:  # noqa: BLE001 - Kafka logs and goes on
            log.exception("task %s: commit_record failed", self.id)

    def _collect_committable(self) -> None:
        for partition, offset in self.submitted.committable():
            self._unflushed[partition_key(partition)] = (partition, offset)

    def commit_offsets(self) -> None:
        """Write what is committable to the offset store, then ``task.commit()``."""
        if self.cancelled:
            return
        self.producer.poll(0)
        self._collect_committable()
        if not self._unflushed:
            return
        pairs = list(self._unflushed.values())
        try:
            self.offset_store.put(self.id.connector, pairs)
        except Exception:  # noqa: BLE001 - kept for the next flush, as Kafka does
            log.exception("task %s: offset flush failed; retried at the next flush", self.id)
            return
        self._unflushed.clear()
        try:
            self.task.commit()
        except Exception:  # noqa: BLE001
            log.exception("task %s: commit() failed", self.id)

    # -------------------------------------------------------------- exactly-once

    def _send_transaction(self, records: list[SourceRecord]) -> None:
        producer = self.producer
        producer.begin_transaction()
        acked: list[tuple[SourceRecord, RecordMetadata | None]] = []
        offsets: dict[sf.PartitionKey, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
        try:
            for record in records:
                if record.source_partition or record.source_offset:
                    offsets[partition_key(record.source_partition)] = (
                        record.source_partition,
                        record.source_offset,
                    )
                converted = self._convert(record)
                if converted is None:
                    acked.append((record, None))
                    continue
                out, kwargs = converted

                def delivered(err: Any, msg: Any, record: SourceRecord = record) -> None:
                    if err is not None:
                        if self._delivery_error is None:
                            self._delivery_error = ConnectError(f"could not produce: {err}")
                        return
                    acked.append(
                        (
                            record,
                            RecordMetadata(msg.topic(), msg.partition(), msg.offset(), _ts(msg)),
                        )
                    )

                self._produce(out.topic, kwargs, delivered)
            for partition, offset in offsets.values():
                self._produce(
                    self.eos_offsets_topic,  # type: ignore[arg-type]
                    {
                        "key": sf.offset_key(self.id.connector, partition),
                        "value": sf.offset_value(offset),
                    },
                    None,
                )
            remaining = producer.flush(TRANSACTION_TIMEOUT_S)
            if self._delivery_error is not None or remaining:
                raise self._delivery_error or ConnectError(
                    f"{remaining} records unacknowledged in the transaction"
                )
            producer.commit_transaction(TRANSACTION_TIMEOUT_S)
        except BaseException as e:
            try:
                producer.abort_transaction(TRANSACTION_TIMEOUT_S)
            except Exception as abort_error:  # noqa: BLE001 - fenced or fatal: say which
                # The abort's error is the telling one (e.g. fenced by a newer instance of the
                # task); the first failure is chained.
                raise ConnectError(
                    f"exactly-once transaction failed and could not be aborted: {abort_error}"
                ) from e
            raise
        self.records_sent += sum(1 for _, m in acked if m is not None)
        for record, metadata in acked:
            self._commit_record(record, metadata)
        try:
            self.task.commit()
        except Exception:  # noqa: BLE001
            log.exception("task %s: commit() failed", self.id)


def _ts(msg: Any) -> int | None:
    kind, ts = msg.timestamp()
    return ts if kind != 0 else None
