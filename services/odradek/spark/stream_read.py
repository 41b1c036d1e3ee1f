"""Streaming reads: the driver's side of a micro-batch, as Spark's Kafka source plans one.

Spark calls, on the driver, ``initialOffset()`` once for a new query, then per micro-batch
``latestOffset(start, limit)`` -> end, ``partitions(start, end)`` -> tasks, and ``commit(end)``
one batch late. It journals every ``end`` in the checkpoint's offset log before the batch runs, so
a restarted query replays the last planned batch with the same ``(start, end)`` and goes on.

Batch 0 resolves the start. Spark's Kafka source resolves ``startingOffsets`` once, on a
query's first run, and writes the result to ``<checkpoint>/sources/0/0``
(``KafkaSourceInitialOffsetWriter``) so that a restart before batch 0 commits replays batch 0
from the same start. PySpark's Python data sources are not given the checkpoint location, and
Spark calls ``initialOffset()`` again on such a restart, so a start resolved there (``latest`` is
a moment, ``earliest`` moves with retention) would differ each time: a false "offset went back",
or batch 0's records skipped. So ``initialOffset()`` answers ``UNRESOLVED_START``, a placeholder;
batch 0's ``latestOffset`` resolves ``startingOffsets`` and returns them as its end, and batch 0
reads nothing. Spark journals that end in ``offsets/0`` before the batch runs: Spark's own offset
log then holds the resolved start, as ``sources/0/0`` does for Spark's Kafka source, and every
batch after starts from it; a restarted batch 0 again reads nothing. The one visible difference:
the first records come in batch 1, not batch 0.

Offsets are Spark's Kafka source's per-partition JSON, ``{"topic": {"0": 23, "1": 7}}``: for each
partition the next offset to read (an end is exclusive). The rules, each as Spark's Kafka source:

- ``startingOffsets`` defaults to ``latest`` for a stream; ``endingOffsets`` is refused.
- A partition that appears mid-stream (more partitions, or a new topic matching
  ``subscribePattern``) is read from its earliest offset; if that is not 0, records were lost.
- Read limits: ``maxOffsetsPerTrigger`` caps a batch, shared among partitions in proportion to
  what each has waiting (a partition with less than one record's share still gets one);
  ``minOffsetsPerTrigger`` delays a batch until that many records wait or ``maxTriggerDelay``
  has passed since the last batch. ``ReadAllAvailable`` from the engine overrides both. PySpark
  has no composite read limit: ``getDefaultReadLimit`` gives ``ReadMinRows`` when
  ``minOffsetsPerTrigger`` is set (else ``ReadMaxRows``) and the other bound comes from the
  options.
- ``trigger(availableNow=True)``: ``prepareForTriggerAvailableNow`` fixes the end at the latest
  offsets of that moment; ``maxOffsetsPerTrigger`` still splits the way there into batches, and
  ``minOffsetsPerTrigger`` is not applied (no more data is coming to wait for).
- Data loss (a batch's start below the log start offset after retention or ``DeleteRecords``, a
  partition or topic gone, an offset gone backwards): ``failOnDataLoss=true`` (the default) fails
  the query with a message saying what was lost; ``false`` logs a warning and reads on from what is
  there.

Reading itself is shared with batch reads: ``read_options`` parses the options,
``offsets.OffsetReader`` asks the cluster, ``ranges`` rate-limits and splits (``minPartitions``),
``partition_read`` reads a range in an executor (and finds deletions that happen between planning
and reading). This module adds what only a stream needs: the planner over a stream's offsets,
apart from Spark and the cluster so that it is unit-tested with a fake ``OffsetReader``.

Not thread-safe; Spark calls one reader from one thread. ``read()`` runs in executors on a
pickled copy: it carries plain data only (the parsed options); the planner and its consumer live
on the driver, made on first use and closed by ``stop()``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.common.partitions import TopicPartition
from odradek.spark.batch_read import RangePartition
from odradek.spark.offsets import OffsetReader
from odradek.spark.partition_read import DataLossError, ReadSettings, arrow_schema, read_range
from odradek.spark.ranges import OffsetRange, rate_limit, split_ranges
from odradek.spark.read_options import OffsetLimit, ReadOptions, Subscription, parse_read_options

__all__ = [
    "UNRESOLVED_START",
    "DataLossError",
    "StreamPlanner",
    "StreamReader",
    "decode",
    "encode",
]

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, int]

DATA_LOSS_HINT = (
    "Some data may have been lost because it is not available in the topic any more: either it "
    "was deleted by retention or DeleteRecords, or the topic was deleted, before the query read "
    "it. If you want the query to go on reading from what is there, set the source option "
    "failOnDataLoss to false."
)


# The start of batch 0 (see the module docstring): parentheses are never in a topic name.
UNRESOLVED_START: dict[str, dict[str, int]] = {"(startingOffsets, not resolved yet)": {}}


def decode(offsets: Mapping[str, Mapping[str, int]]) -> Offsets:
    """Spark's checkpoint JSON -> ``{TopicPartition: offset}``."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in offsets.items()
        for partition, offset in partitions.items()
    }


def encode(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{TopicPartition: offset}`` -> Spark's checkpoint JSON, sorted for stable logs."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


class Cluster(Protocol):
    """What the planner asks the cluster: the part of ``offsets.OffsetReader`` it uses."""

    def partitions(self, subscription: Subscription) -> list[TopicPartition]: ...

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets: ...

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets: ...

    def resolve(
        self, limit: OffsetLimit, tps: Iterable[TopicPartition], *, starting: bool
    ) -> Offsets: ...

    def close(self) -> None: ...


class StreamPlanner:
    """The driver's decisions over a stream's offsets, apart from Spark.

    ``clock_ms`` is injected for ``maxTriggerDelay``. Holds the end fixed for availableNow and the
    time of the last batch; nothing else survives between calls (the checkpoint holds the rest).
    """

    def __init__(
        self,
        cluster: Cluster,
        options: ReadOptions,
        clock_ms: Callable[[], float] = lambda: time.monotonic() * 1000,
    ) -> None:
        self._cluster = cluster
        self._options = options
        self._clock_ms = clock_ms
        self._available_now_end: Offsets | None = None
        self._last_batch_ms = clock_ms()

    def close(self) -> None:
        self._cluster.close()

    def initial(self) -> Offsets:
        """``startingOffsets`` (default latest) of the partitions read now."""
        tps = self._cluster.partitions(self._options.subscription)
        return self._cluster.resolve(self._options.starting, tps, starting=True)

    def fix_end_for_available_now(self) -> None:
        self._available_now_end = self._current_latest()

    def _current_latest(self) -> Offsets:
        return self._cluster.latest(self._cluster.partitions(self._options.subscription))

    def latest(self, start: Offsets, limit: ReadLimit) -> Offsets:
        """The end of the next batch (``start`` itself when there is nothing to read yet)."""
        if self._available_now_end is not None:
            latest = dict(self._available_now_end)
        else:
            latest = self._current_latest()
        # A partition of ``start`` the listing lacks was deleted: the end leaves it out, as
        # Spark's does, and ranges() reports the loss.
        if isinstance(limit, ReadAllAvailable):
            return latest
        # The engine passes back getDefaultReadLimit()'s limit (or ReadAllAvailable); that
        # carries one number only, so the other comes from the options.
        max_offsets = self._options.max_offsets_per_trigger
        min_offsets = self._options.min_offsets_per_trigger
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
            and self._clock_ms() - self._last_batch_ms < self._options.max_trigger_delay_ms
        ):
            return dict(start)
        if waiting > 0:
            self._last_batch_ms = self._clock_ms()
        if max_offsets is None:
            return latest
        return rate_limit(max_offsets, begin, latest)

    def _begin(self, start: Offsets, latest: Offsets) -> Offsets:
        """Where each partition's records begin: new partitions at their earliest offset; and,
        when data loss is tolerated, nothing below a log start (it cannot be read)."""
        new = [tp for tp in latest if tp not in start]
        if not new and self._options.fail_on_data_loss:
            return {tp: start[tp] for tp in latest}
        earliest = self._cluster.earliest(sorted(latest))
        begin = {}
        for tp in latest:
            if tp not in start:
                begin[tp] = earliest[tp]
            elif not self._options.fail_on_data_loss:
                begin[tp] = max(start[tp], earliest[tp])
            else:
                begin[tp] = start[tp]
        return begin

    def ranges(self, start: Offsets, end: Offsets) -> list[OffsetRange]:
        """The batch's offset ranges, with the data-loss rules applied, split into tasks."""
        losses = [
            f"partition {tp} is gone (deleted) with offsets from {start[tp]} unread"
            for tp in sorted(set(start) - set(end))
        ]
        planned = sorted(tp for tp in end if tp not in start or end[tp] > start[tp])
        earliest = self._cluster.earliest(planned) if planned else {}
        out = []
        for tp in planned:
            until = end[tp]
            if tp in start:
                begin = start[tp]
            else:
                begin = earliest[tp]
                if begin != 0:
                    losses.append(f"partition {tp} was added but starts at offset {begin}, not 0")
            if begin < earliest[tp]:
                losses.append(
                    f"partition {tp}: offsets {begin} to {min(earliest[tp], until) - 1} were "
                    f"deleted (its log now starts at {earliest[tp]})"
                )
                begin = earliest[tp]
            if begin < until:
                out.append(OffsetRange(tp.topic, tp.partition, begin, until))
        for tp in sorted(set(start) & set(end)):
            if end[tp] < start[tp]:
                losses.append(f"partition {tp}: its offset went back from {start[tp]} to {end[tp]}")
        if losses:
            self._data_loss(losses)
        return split_ranges(
            out, self._options.min_partitions, self._options.max_records_per_partition
        )

    def _data_loss(self, losses: list[str]) -> None:
        detail = "; ".join(losses)
        if self._options.fail_on_data_loss:
            raise DataLossError(f"{detail}. {DATA_LOSS_HINT}")
        log.warning("data loss (failOnDataLoss=false, reading on): %s", detail)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("odradek")``: plans micro-batches on the driver, reads in tasks."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self._options = parse_read_options(options, streaming=True)
        self._settings = ReadSettings.from_options(self._options)
        self._schema = schema
        self._planner: StreamPlanner | None = None  # driver only, made on first use

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_planner"] = None  # its consumer stays on the driver
        return state

    def _plan(self) -> StreamPlanner:
        if self._planner is None:
            self._planner = StreamPlanner(OffsetReader.for_options(self._options), self._options)
        return self._planner

    def initialOffset(self) -> dict:
        # Not resolved here: batch 0 resolves it and Spark journals it (module docstring).
        return {k: dict(v) for k, v in UNRESOLVED_START.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._options.min_offsets_per_trigger is not None:
            return ReadMinRows(self._options.min_offsets_per_trigger)
        if self._options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._plan().fix_end_for_available_now()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if start == UNRESOLVED_START:  # batch 0: its end is the resolved startingOffsets
            return encode(self._plan().initial())
        return encode(self._plan().latest(decode(start), limit))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if start == UNRESOLVED_START:  # batch 0 reads nothing: it only fixes the start
            return []
        return [RangePartition(r) for r in self._plan().ranges(decode(start), decode(end))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        offset_range = partition.offset_range  # type: ignore[attr-defined]
        schema = arrow_schema(self._settings.include_headers)
        return read_range(offset_range, self._settings, schema)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, never in a consumer group."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None
