"""Executor side: one offset range of one partition -> ``pyarrow.RecordBatch``es in the read schema.

A task makes its own confluent-kafka ``Consumer``, ``assign()``s the partition at the range's
start (never subscribes, never commits: ``enable.auto.commit=false``), consumes in batches with
``consume(num_messages=...)`` and closes the consumer in ``finally``. Columns are built whole from
lists (``pa.array``), never row by row.

Invariants:
- Rows are exactly the records with ``from_offset <= offset < until_offset`` that the isolation
  level shows: under ``read_committed`` librdkafka drops aborted records and control markers, so
  offsets may jump; the range is done when a record at or past ``until_offset`` arrives, or when
  the partition's end (``_PARTITION_EOF``, at the high watermark or last stable offset) is at or
  past ``until_offset`` -- so a range that ends with markers or aborted records still finishes.
- Memory per task is bounded: each batch is at most ``max_rows`` rows and about ``max_bytes``
  bytes (the rows asked for next are sized from the bytes per row seen so far), plus librdkafka's
  own queue (``queued.max.messages.kbytes``).
- Time is bounded: with no progress for ``poll_timeout_ms`` (Spark's
  ``kafkaConsumer.pollTimeoutMs``) the read fails with ``PartitionReadError`` naming the
  partition and offsets, rather than hanging.
- Data loss (``failOnDataLoss``): a start below the log start offset (records deleted by
  retention or DeleteRecords) fails with ``DataLossError`` naming the partition and the missing
  offsets, or with ``fail_on_data_loss=False`` the read skips forward to the log start offset.
  A range that ends past the partition's end (``endingOffsets`` beyond the last record, or a log
  truncated by an unclean leader election) waits ``poll_timeout_ms`` for the missing records,
  as Spark's one ``poll`` does (they may yet come: a new leader's high watermark can lag), then,
  as Spark's ``KafkaDataConsumer`` (an empty poll at or past the latest offset is
  ``OffsetOutOfRange``, reported as data loss), fails with ``DataLossError`` naming the offsets
  that do not exist, or with ``fail_on_data_loss=False`` ends with the records there are.

Thread-safety: ``read_range`` keeps no shared state; each call owns its consumer.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.spark.ranges import OffsetRange
from odradek.spark.read_options import ReadOptions

__all__ = [
    "DataLossError",
    "PartitionReadError",
    "ReadSettings",
    "arrow_schema",
    "consumer_config",
    "read_range",
]

log = logging.getLogger(__name__)

MAX_ROWS_PER_BATCH = 10_000
MAX_BYTES_PER_BATCH = 8 * 1024 * 1024
FIRST_BATCH_ROWS = 100  # until the bytes per row are known
CONSUME_TIMEOUT_S = 0.2  # one consume() call; progress is judged over poll_timeout_ms
WATERMARK_TIMEOUT_S = 30.0

# Throughput defaults a user may override with kafka.*: large fetches, a deep prefetch queue,
# and no fetch back-off (librdkafka otherwise pauses fetching while its queue drains).
_CONSUMER_DEFAULTS = {
    "isolation.level": "read_uncommitted",  # Kafka's default; librdkafka's is read_committed
    "fetch.max.bytes": str(64 * 1024 * 1024),
    "max.partition.fetch.bytes": str(16 * 1024 * 1024),
    "queued.max.messages.kbytes": str(64 * 1024),
    "queued.min.messages": "200000",
    "fetch.queue.backoff.ms": "0",
    "fetch.wait.max.ms": "100",
}
# What every executor consumer must have, whatever the user set.
_CONSUMER_FORCED = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "auto.offset.reset": "error",  # out of range is reported, never silently reset
    "enable.partition.eof": "true",
}


class PartitionReadError(RuntimeError):
    """A range that could not be read to its end; the message names the partition."""


class DataLossError(PartitionReadError):
    """Records of the range are gone (retention, DeleteRecords) and failOnDataLoss is true."""


def consumer_config(client: Mapping[str, str]) -> dict[str, str]:
    """The executors' consumer configuration: defaults, then the user's ``kafka.*``, then the
    settings the source needs."""
    return {**_CONSUMER_DEFAULTS, **client, **_CONSUMER_FORCED}


_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
_HEADERS = pa.list_(pa.field("element", _HEADER))
_TIMESTAMP = pa.timestamp("us", tz="UTC")


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The read schema as Spark expects it from Arrow (``to_arrow_schema(read_schema(...))``)."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", _TIMESTAMP),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", _HEADERS))
    return pa.schema(fields)


@dataclass(frozen=True)
class ReadSettings:
    """What an executor needs besides the range; plain data, pickled to executors."""

    consumer: dict[str, str] = field(hash=False)
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    max_rows: int = MAX_ROWS_PER_BATCH
    max_bytes: int = MAX_BYTES_PER_BATCH

    @classmethod
    def from_options(cls, options: ReadOptions) -> ReadSettings:
        return cls(
            consumer=consumer_config(options.client),
            include_headers=options.include_headers,
            fail_on_data_loss=options.fail_on_data_loss,
            poll_timeout_ms=options.poll_timeout_ms,
        )


def _to_batch(
    messages: list[Message], r: OffsetRange, offsets: list[int], schema: pa.Schema, headers: bool
) -> pa.RecordBatch:
    n = len(messages)
    stamps = [m.timestamp() for m in messages]
    # confluent-kafka: 0 not available, 1 CreateTime, 2 LogAppendTime; Spark: -1, 0, 1.
    millis = pa.array([s[1] for s in stamps], pa.int64())
    columns = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.array([r.topic] * n, pa.string()),
        pa.array([r.partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pc.multiply(millis, 1000).cast(_TIMESTAMP),
        pa.array([s[0] - 1 for s in stamps], pa.int32()),
    ]
    if headers:
        columns.append(pa.array([m.headers() or None for m in messages], _HEADERS))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _log_start(consumer: Consumer, r: OffsetRange) -> int:
    low, _ = consumer.get_watermark_offsets(
        KafkaTopicPartition(r.topic, r.partition), timeout=WATERMARK_TIMEOUT_S, cached=False
    )
    return low


def _lost(r: OffsetRange, position: int, log_start: int, settings: ReadSettings) -> int:
    """Where to go on after finding that ``[position, log_start)`` was deleted."""
    lost_until = min(log_start, r.until_offset)
    if settings.fail_on_data_loss:
        raise DataLossError(
            f"partition {r.topic}-{r.partition}: offsets {position} to {lost_until - 1} of the "
            f"range [{r.from_offset}, {r.until_offset}) are no longer available (the log now "
            f"starts at {log_start}; deleted by retention or DeleteRecords). Some data may have "
            "been lost; set the option failOnDataLoss to false to skip it."
        )
    log.warning(
        "partition %s-%s: offsets %d to %d were deleted; skipping them (failOnDataLoss=false)",
        r.topic,
        r.partition,
        position,
        lost_until - 1,
    )
    return log_start


def _past_the_end(r: OffsetRange, end: int, settings: ReadSettings) -> None:
    """The partition ends at ``end``, before ``r.until_offset``: fail, or end the range here."""
    if settings.fail_on_data_loss:
        raise DataLossError(
            f"partition {r.topic}-{r.partition}: offsets {end} to {r.until_offset - 1} of the "
            f"range [{r.from_offset}, {r.until_offset}) do not exist: the partition ends at "
            f"{end} (an ending offset past its end, or a log truncated by an unclean leader "
            "election). Some data may have been lost; set the option failOnDataLoss to false "
            "to read the records there are."
        )
    log.warning(
        "partition %s-%s: offsets %d to %d do not exist (the partition ends at %d); "
        "ending the range there (failOnDataLoss=false)",
        r.topic,
        r.partition,
        end,
        r.until_offset - 1,
        end,
    )


def read_range(
    r: OffsetRange, settings: ReadSettings, schema: pa.Schema | None = None
) -> Iterator[pa.RecordBatch]:
    """The range's records as Arrow batches, in offset order."""
    if r.until_offset <= r.from_offset:
        return
    schema = schema or arrow_schema(settings.include_headers)
    config = dict(settings.consumer)
    # Prefetch no more than the range holds (a split partition's tasks would each read ahead).
    prefetch = int(config.get("queued.min.messages", _CONSUMER_DEFAULTS["queued.min.messages"]))
    config["queued.min.messages"] = str(max(1, min(prefetch, r.size)))
    consumer = Consumer(config)
    try:
        position = r.from_offset
        log_start = _log_start(consumer, r)
        if position < log_start:
            position = _lost(r, position, log_start, settings)
            if position >= r.until_offset:
                return
        consumer.assign([KafkaTopicPartition(r.topic, r.partition, position)])

        stall_s = settings.poll_timeout_ms / 1000
        deadline = time.monotonic() + stall_s
        bytes_per_row = 0.0
        end_seen: int | None = None  # the partition's end, when it was short of the range's
        while True:
            want = min(settings.max_rows, r.until_offset - position)
            if bytes_per_row > 0:
                want = min(want, max(1, int(settings.max_bytes / bytes_per_row)))
            else:
                want = min(want, FIRST_BATCH_ROWS)
            messages = consumer.consume(num_messages=want, timeout=CONSUME_TIMEOUT_S)
            done = False
            records = []
            for m in messages:
                err = m.error()
                if err is None:
                    records.append(m)
                elif err.code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= r.until_offset:
                        done = True
                    else:
                        end_seen = m.offset()
                elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    # Deleted under us: records in this call before the error are kept.
                    break
                elif err.fatal() or not err.retriable():
                    raise PartitionReadError(
                        f"reading partition {r.topic}-{r.partition} at offset {position}: {err}"
                    ) from KafkaException(err)
            else:
                err = None
            if records:
                offsets = [m.offset() for m in records]
                if offsets[-1] >= r.until_offset:
                    cut = bisect.bisect_left(offsets, r.until_offset)
                    records, offsets = records[:cut], offsets[:cut]
                    done = True
                if records:
                    batch = _to_batch(records, r, offsets, schema, settings.include_headers)
                    bytes_per_row = batch.nbytes / batch.num_rows
                    yield batch
                    position = offsets[-1] + 1
                    if position >= r.until_offset:
                        done = True
                deadline = time.monotonic() + stall_s
            if done:
                return
            if err is not None:  # out of range: find the new log start, fail or skip forward
                log_start = _log_start(consumer, r)
                if position >= log_start:
                    raise PartitionReadError(
                        f"partition {r.topic}-{r.partition}: offset {position} is out of range "
                        f"but not below the log start {log_start}: {err}"
                    )
                position = _lost(r, position, log_start, settings)
                if position >= r.until_offset:
                    return
                consumer.assign([KafkaTopicPartition(r.topic, r.partition, position)])
                deadline = time.monotonic() + stall_s
                continue
            if time.monotonic() > deadline:
                if end_seen is not None and end_seen >= position:
                    # Read up to the partition's end, and no more came within the timeout.
                    _past_the_end(r, end_seen, settings)
                    return
                raise PartitionReadError(
                    f"partition {r.topic}-{r.partition}: no progress for {stall_s:g} s at offset "
                    f"{position} of the range [{r.from_offset}, {r.until_offset}) "
                    "(raise kafkaConsumer.pollTimeoutMs if the cluster is slow)"
                )
    finally:
        consumer.close()
