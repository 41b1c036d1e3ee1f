"""Streaming reads: the driver's side of a micro-batch, as Spark's Kafka source plans one.

Spark calls, on the driver, ``initialOffset()`` once for a new query, then per micro-batch
``latestOffset(start, limit)`` -> end, ``partitions(start, end)`` -> tasks, and ``commit(end)``
one batch late. It journals every ``end`` in the checkpoint's offset log before the batch runs, so
a restarted query replays the last planned batch with the same ``(start, end)`` and goes on.

Offsets are Spark's Kafka source's per-partition JSON, ``{"topic": {"0": 23, "1": 7}}``: for each
partition the next offset to read (an end is exclusive). The rules, each as Spark's Kafka source:

- ``startingOffsets`` defaults to ``latest`` for a stream; ``endingOffsets`` is refused.
- A partition that appears mid-stream (more partitions, or a new topic matching
  ``subscribePattern``) is read from its earliest offset; if that is not 0, records were lost.
- Read limits: ``maxOffsetsPerTrigger`` caps a batch, shared among partitions in proportion to
  what each has waiting (a partition with less than one record's share still gets one);
  ``minOffsetsPerTrigger`` delays a batch until that many records wait or ``maxTriggerDelay``
  has passed since the last batch. ``ReadAllAvailable`` from the engine overrides both.
- ``trigger(availableNow=True)``: ``prepareForTriggerAvailableNow`` fixes the end at the latest
  offsets of that moment; ``maxOffsetsPerTrigger`` still splits the way there into batches, and
  ``minOffsetsPerTrigger`` is not applied (no more data is coming to wait for).
- Data loss (a batch's start below the log start offset after retention or ``DeleteRecords``, a
  partition or topic gone, an offset gone backwards): ``failOnDataLoss=true`` (the default) fails
  the query with a message saying what was lost; ``false`` logs a warning and reads on from what is
  there.

Not thread-safe; Spark calls one reader from one thread. ``read()`` runs in executors on a
pickled copy: it carries plain data only and delegates to ``partition_read``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from pyspark.sql.datasource import CaseInsensitiveDict, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.spark.client_config import OptionError, client_config

__all__ = ["DataLossError", "StreamReader", "decode", "encode", "rate_limit"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]

DATA_LOSS_HINT = (
    "Some data may have been lost because it is not available in the topic any more: either it "
    "was deleted by retention or DeleteRecords, or the topic was deleted, before the query read "
    "it. If you want the query to go on reading from what is there, set the source option "
    "failOnDataLoss to false."
)


# Spark's default for maxTriggerDelay ("15m").
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000


class DataLossError(RuntimeError):
    """A batch needs records the topic no longer holds and ``failOnDataLoss`` is true."""


def decode(offsets: Mapping[str, Mapping[str, int]]) -> Offsets:
    """Spark's checkpoint JSON -> ``{(topic, partition): offset}``."""
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in offsets.items()
        for partition, offset in partitions.items()
    }


def encode(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(topic, partition): offset}`` -> Spark's checkpoint JSON, sorted for stable logs."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return out


def rate_limit(max_rows: int, start: Offsets, latest: Offsets) -> Offsets:
    """The end of a batch of at most about ``max_rows`` records between ``start`` and ``latest``.

    Each partition gets a share of ``max_rows`` in proportion to what it has waiting, rounded
    down, except that a share under one record is rounded up so no partition starves (so a batch
    may exceed ``max_rows`` by at most the number of partitions, as in Spark). ``start`` must hold
    every partition of ``latest`` (new partitions at their earliest offset).
    """
    waiting = {tp: latest[tp] - start[tp] for tp in latest if latest[tp] > start[tp]}
    total = sum(waiting.values())
    if total <= max_rows:
        return dict(latest)
    end = dict(latest)
    for tp, size in waiting.items():
        share = max_rows * size / total
        rows = int(share) if share >= 1 else 1
        end[tp] = min(latest[tp], start[tp] + rows)
    return end


class OffsetSource(Protocol):
    """What the driver asks the cluster; ``offsets`` answers it, tests give a fake."""

    def assigned(self) -> list[TopicPartition]:
        """The partitions read now (``subscribe``, ``subscribePattern`` or ``assign``)."""

    def earliest(self, partitions: Sequence[TopicPartition]) -> Offsets:
        """Each partition's log start offset."""

    def latest(self, partitions: Sequence[TopicPartition]) -> Offsets:
        """Each partition's end: high watermark, or last stable offset with read_committed."""

    def starting(self) -> Offsets:
        """``startingOffsets`` (or ``startingTimestamp``...) resolved to offsets."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class Limits:
    """The read limits of the options (``None``: not set)."""

    max_offsets: int | None = None
    min_offsets: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS


class StreamPlanner:
    """The driver's decisions over offsets, apart from Spark: unit-tested with a fake source.

    ``clock_ms`` is injected for ``maxTriggerDelay``. Holds the end fixed for availableNow and the
    time of the last batch; nothing else survives between calls (the checkpoint holds the rest).
    """

    def __init__(
        self,
        source: OffsetSource,
        limits: Limits,
        fail_on_data_loss: bool,
        clock_ms: Callable[[], float] = lambda: time.monotonic() * 1000,
    ) -> None:
        self._source = source
        self._limits = limits
        self._fail_on_data_loss = fail_on_data_loss
        self._clock_ms = clock_ms
        self._available_now_end: Offsets | None = None
        self._last_batch_ms = clock_ms()

    def initial(self) -> Offsets:
        return self._source.starting()

    def fix_end_for_available_now(self) -> None:
        self._available_now_end = self._current_latest()

    def _current_latest(self) -> Offsets:
        return self._source.latest(self._source.assigned())

    def latest(self, start: Offsets, limit: ReadLimit) -> Offsets:
        """The end of the next batch (``start`` itself when there is nothing to read yet)."""
        if self._available_now_end is not None:
            latest = dict(self._available_now_end)
        else:
            latest = self._current_latest()
        # A partition the latest listing lacks (deleted, or outside a fixed availableNow end)
        # keeps its start: partitions() reports a deleted one as data loss.
        for tp, offset in start.items():
            latest.setdefault(tp, offset)
        if isinstance(limit, ReadAllAvailable):
            return latest
        # The engine passes back getDefaultReadLimit()'s limit (or ReadAllAvailable); it can carry
        # one number only, so the other comes from the options.
        max_offsets, min_offsets = self._limits.max_offsets, self._limits.min_offsets
        if isinstance(limit, ReadMaxRows):
            max_offsets = limit.max_rows
        elif isinstance(limit, ReadMinRows):
            min_offsets = limit.min_rows
        begin = self._begin(start, latest)
        waiting = sum(max(0, latest[tp] - begin[tp]) for tp in latest)
        if (
            min_offsets is not None
            and self._available_now_end is None
            and waiting < min_offsets
            and self._clock_ms() - self._last_batch_ms < self._limits.max_trigger_delay_ms
        ):
            return dict(start)
        if waiting > 0:
            self._last_batch_ms = self._clock_ms()
        if max_offsets is None:
            return latest
        end = rate_limit(max_offsets, begin, latest)
        # Partitions with nothing to read keep their start (no offset moves backwards).
        return {tp: max(end[tp], start.get(tp, end[tp])) for tp in end}

    def _begin(self, start: Offsets, latest: Offsets) -> Offsets:
        """Where each partition's records begin: new partitions at their earliest offset; and,
        when data loss is tolerated, nothing below a log start (it cannot be read)."""
        new = [tp for tp in latest if tp not in start]
        earliest = self._source.earliest(sorted(set(new) | set(start))) if latest else {}
        begin = {}
        for tp in latest:
            if tp not in start:
                begin[tp] = earliest.get(tp, 0)
            elif not self._fail_on_data_loss:
                begin[tp] = max(start[tp], earliest.get(tp, start[tp]))
            else:
                begin[tp] = start[tp]
        return begin

    def close(self) -> None:
        self._source.close()

    def ranges(self, start: Offsets, end: Offsets) -> list[tuple[TopicPartition, int, int]]:
        """``[(partition, from, until)]`` of a batch, with the data-loss rules applied."""
        losses: list[str] = []
        for tp in sorted(set(start) - set(end)):
            losses.append(f"{_name(tp)} is gone (deleted) with offsets from {start[tp]} unread")
        planned = sorted(tp for tp in end if end[tp] > start.get(tp, -1) or tp not in start)
        earliest = self._source.earliest(planned) if planned else {}
        out = []
        for tp in planned:
            until = end[tp]
            if tp in start:
                begin = start[tp]
            else:
                begin = earliest.get(tp, 0)
                if begin != 0:
                    losses.append(f"{_name(tp)} was added but starts at offset {begin}, not 0")
            log_start = earliest.get(tp, begin)
            if begin < log_start:
                losses.append(
                    f"{_name(tp)}: offsets {begin} to {min(log_start, until) - 1} were deleted "
                    f"(its log now starts at {log_start})"
                )
                begin = log_start
            if begin < until:
                out.append((tp, begin, until))
        for tp in sorted(set(start) & set(end)):
            if end[tp] < start[tp]:
                losses.append(f"{_name(tp)}: its offset went back from {start[tp]} to {end[tp]}")
        if losses:
            self._data_loss(losses)
        return out

    def _data_loss(self, losses: list[str]) -> None:
        detail = "; ".join(losses)
        if self._fail_on_data_loss:
            raise DataLossError(f"{detail}. {DATA_LOSS_HINT}")
        log.warning("data loss (failOnDataLoss=false, reading on): %s", detail)


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise OptionError(f"option {name!r} must be true or false, not {value!r}")
    return value.strip().lower() == "true"


def _name(tp: TopicPartition) -> str:
    return f"partition {tp[0]}-{tp[1]}"


_DURATION_UNITS_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def duration_ms(name: str, text: str) -> int:
    """A Spark duration (``15m``, ``30s``, ``500ms``; a bare number is milliseconds) -> ms."""
    value = text.strip().lower()
    digits = value.rstrip("abcdefghijklmnopqrstuvwxyz").strip()
    unit = value[len(digits) :].strip() or "ms"
    if not digits.isdigit() or unit not in _DURATION_UNITS_MS:
        raise OptionError(f"option {name!r} must be a duration like 30s or 15m, not {text!r}")
    return int(digits) * _DURATION_UNITS_MS[unit]


def _positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name)
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise OptionError(f"option {name!r} must be a positive integer, not {text!r}")
    return value


def stream_limits(options: Mapping[str, str]) -> Limits:
    """The read limits of a stream's (case-insensitive) options."""
    delay = options.get("maxTriggerDelay")
    return Limits(
        max_offsets=_positive(options, "maxOffsetsPerTrigger"),
        min_offsets=_positive(options, "minOffsetsPerTrigger"),
        max_trigger_delay_ms=(
            DEFAULT_MAX_TRIGGER_DELAY_MS if delay is None else duration_ms("maxTriggerDelay", delay)
        ),
    )


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("odradek")``: plans micro-batches on the driver, reads in tasks."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        for refused in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if options.get(refused) is not None:
                raise OptionError(f"option {refused!r} is not valid in a streaming query")
        self._options = dict(options.items())  # plain data: pickled to executors
        self._schema = schema
        self._limits = stream_limits(options)
        self._fail_on_data_loss = _flag(options, "failOnDataLoss", True)
        self._planner: StreamPlanner | None = None  # driver only, made on first use

    def _plan(self) -> StreamPlanner:
        if self._planner is None:
            self._planner = StreamPlanner(
                _offset_source(self._options), self._limits, self._fail_on_data_loss
            )
        return self._planner

    def initialOffset(self) -> dict:
        return encode(self._plan().initial())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._limits.min_offsets is not None:
            return ReadMinRows(self._limits.min_offsets)
        if self._limits.max_offsets is not None:
            return ReadMaxRows(self._limits.max_offsets)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._plan().fix_end_for_available_now()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return encode(self._plan().latest(decode(start), limit))

    def reportLatestOffset(self) -> dict | None:
        return None  # one more round trip per batch for a number in the progress report

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        ranges = self._plan().ranges(decode(start), decode(end))
        return _input_partitions(ranges, self._options)

    def read(self, partition: InputPartition) -> Iterator:
        return _read_partition(partition, self._options, self._schema)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, never in a consumer group."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None


# --- to be replaced by offsets.py / partition_read.py (helper read) as they land -------------


class _ConsumerOffsets:
    def __init__(self, options: Mapping[str, str]) -> None:
        import json
        import re

        from confluent_kafka import Consumer

        self._options = CaseInsensitiveDict(options)
        config = client_config(self._options)
        config.update({"group.id": "odradek-spark-driver", "enable.auto.commit": "false"})
        self._consumer = Consumer(config)
        self._json = json
        subscribe = self._options.get("subscribe")
        pattern = self._options.get("subscribePattern")
        assign = self._options.get("assign")
        self._topics = [t.strip() for t in subscribe.split(",")] if subscribe else None
        self._pattern = re.compile(pattern) if pattern else None
        self._assign = decode(json.loads(assign)) if assign else None

    def assigned(self) -> list[TopicPartition]:
        if self._assign is not None:
            return sorted(self._assign)
        metadata = self._consumer.list_topics(timeout=10)
        out = []
        for name, topic in metadata.topics.items():
            if topic.error is not None:
                continue
            if self._topics is not None and name not in self._topics:
                continue
            if self._pattern is not None and not self._pattern.fullmatch(name):
                continue
            out.extend((name, p) for p in topic.partitions)
        return sorted(out)

    def _watermarks(self, partitions: Sequence[TopicPartition], index: int) -> Offsets:
        from confluent_kafka import TopicPartition as KafkaPartition

        return {
            tp: self._consumer.get_watermark_offsets(KafkaPartition(*tp), timeout=10)[index]
            for tp in partitions
        }

    def earliest(self, partitions: Sequence[TopicPartition]) -> Offsets:
        return self._watermarks(partitions, 0)

    def latest(self, partitions: Sequence[TopicPartition]) -> Offsets:
        return self._watermarks(partitions, 1)

    def starting(self) -> Offsets:
        text = (self._options.get("startingOffsets") or "latest").strip()
        partitions = self.assigned()
        if text == "latest":
            return self.latest(partitions)
        if text == "earliest":
            return self.earliest(partitions)
        given = decode(self._json.loads(text))
        earliest = self.earliest(partitions)
        latest = self.latest(partitions)
        return {
            tp: {-2: earliest[tp], -1: latest[tp]}.get(given.get(tp, -1), given.get(tp, -1))
            for tp in partitions
        }

    def close(self) -> None:
        self._consumer.close()


class StreamRange(InputPartition):
    """One task of a micro-batch: ``[from_offset, until_offset)`` of one partition."""

    def __init__(self, topic: str, partition: int, from_offset: int, until_offset: int) -> None:
        super().__init__((topic, partition, from_offset, until_offset))
        self.topic = topic
        self.partition = partition
        self.from_offset = from_offset
        self.until_offset = until_offset


def _offset_source(options: Mapping[str, str]) -> OffsetSource:
    return _ConsumerOffsets(options)


def _input_partitions(
    ranges: list[tuple[TopicPartition, int, int]], options: Mapping[str, str]
) -> list[InputPartition]:
    return [StreamRange(tp[0], tp[1], begin, until) for tp, begin, until in ranges]


def _read_partition(
    partition: InputPartition, options: Mapping[str, str], schema: StructType
) -> Iterator:
    import pyarrow as pa
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaPartition

    assert isinstance(partition, StreamRange)
    config = client_config(CaseInsensitiveDict(options))
    config.update({"group.id": "odradek-spark-executor", "enable.auto.commit": "false"})
    consumer = Consumer(config)
    try:
        consumer.assign(
            [KafkaPartition(partition.topic, partition.partition, partition.from_offset)]
        )
        rows = {
            n: []
            for n in ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
        }
        next_offset = partition.from_offset
        deadline = time.monotonic() + 60
        while next_offset < partition.until_offset and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1):
                if message.error() is not None:
                    continue
                if message.offset() >= partition.until_offset:
                    next_offset = partition.until_offset
                    break
                rows["key"].append(message.key())
                rows["value"].append(message.value())
                rows["topic"].append(message.topic())
                rows["partition"].append(message.partition())
                rows["offset"].append(message.offset())
                ts_type, ts = message.timestamp()
                rows["timestamp"].append(ts * 1000)
                rows["timestampType"].append(ts_type - 1)
                next_offset = message.offset() + 1
            position = consumer.position([KafkaPartition(partition.topic, partition.partition)])[
                0
            ].offset
            if position >= partition.until_offset:
                break
        arrow = pa.schema(
            [
                ("key", pa.binary()),
                ("value", pa.binary()),
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("offset", pa.int64()),
                ("timestamp", pa.timestamp("us", tz="UTC")),
                ("timestampType", pa.int32()),
            ]
        )
        yield pa.RecordBatch.from_pydict(rows, schema=arrow)
    finally:
        consumer.close()
