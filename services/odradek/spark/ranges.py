"""Offset ranges: what one read covers per partition, how it is split into Spark tasks, and how a
read limit is spread over partitions. Pure: no client, no Spark; the driver calls it.

A range ``[from_offset, until_offset)`` is half-open, as Spark's ``KafkaOffsetRange``: ``size`` is
an upper bound of the records in it (compaction, transaction markers and aborted records make the
real count smaller). Empty ranges are dropped from plans, as Spark drops them.

- ``plan_ranges(start, end)``: one range per partition from two resolved offset maps; a start
  after its end is an error, as Spark's ``resolvedStartOffsetGreaterThanEndOffset``.
- ``split_ranges(ranges, min_partitions, max_records_per_partition)``: Spark's
  ``KafkaOffsetRangeCalculator``: with fewer non-empty ranges than ``min_partitions``, large ranges
  are split into parts proportional to their share of the total (small ranges are kept whole and
  taken out of the proportion); then any part larger than ``max_records_per_partition`` is cut
  into equal parts.
- ``offsets_to_json`` / ``offsets_from_json``: the per-partition offsets as Spark's Kafka source
  writes them in checkpoints and options, ``{"topic": {"0": 23, "1": -1}}``.
- ``rate_limit(limit, start, end)``: Spark's ``KafkaMicroBatchStream.rateLimit`` for
  ``maxOffsetsPerTrigger``: each partition gets ``limit * its share`` of the available offsets
  (rounded down, but at least 1 so small partitions are not starved), never past its end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from odradek.common.partitions import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetRange",
    "RangeError",
    "offsets_from_json",
    "offsets_to_json",
    "plan_ranges",
    "rate_limit",
    "split_ranges",
]

# The sentinels of Spark's per-partition offset JSON (KafkaOffsetRangeLimit.EARLIEST / LATEST).
EARLIEST = -2
LATEST = -1


class RangeError(ValueError):
    """Offsets that make no range (a start after its end, partitions that do not match)."""


@dataclass(frozen=True)
class OffsetRange:
    """The offsets ``[from_offset, until_offset)`` of one partition, read by one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def plan_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """One range per partition, sorted by partition, empty ones dropped.

    Both maps hold resolved (non-negative) offsets for the same partitions.
    """
    if set(start) != set(end):
        only_start = sorted(map(str, set(start) - set(end)))
        only_end = sorted(map(str, set(end) - set(start)))
        raise RangeError(
            "the starting and ending offsets name different partitions "
            f"(only in start: {only_start}, only in end: {only_end})"
        )
    ranges = []
    for tp in sorted(start):
        from_offset, until_offset = start[tp], end[tp]
        if from_offset < 0 or until_offset < 0:
            raise RangeError(f"unresolved offset for {tp}: {from_offset}..{until_offset}")
        if from_offset > until_offset:
            raise RangeError(
                f"the resolved starting offset {from_offset} is after the ending offset "
                f"{until_offset} for partition {tp}"
            )
        if until_offset > from_offset:
            ranges.append(OffsetRange(tp.topic, tp.partition, from_offset, until_offset))
    return ranges


def _part_count(size: int, total: int, min_parts: int) -> int:
    # Scala's math.round: half up.
    return max(math.floor(size / total * min_parts + 0.5), 1)


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out = []
    remaining = r.size
    start = r.from_offset
    for part in range(parts):
        this = remaining // (parts - part)  # the last part takes the rounding
        remaining -= this
        end = min(start + this, r.until_offset)
        if end > start:
            out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def split_ranges(
    ranges: Iterable[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """The ranges as Spark tasks: split by ``min_partitions`` then ``max_records_per_partition``."""
    if min_partitions is not None and min_partitions <= 0:
        raise RangeError("minPartitions must be positive")
    if max_records_per_partition is not None and max_records_per_partition <= 0:
        raise RangeError("maxRecordsPerPartition must be positive")
    live = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(live) < min_partitions:
        total = sum(r.size for r in live)
        whole = {r.topic_partition for r in live if _part_count(r.size, total, min_partitions) == 1}
        split_total = total - sum(r.size for r in live if r.topic_partition in whole)
        split_min = max(min_partitions - len(whole), 1)
        parted: list[OffsetRange] = []
        for r in live:
            parts = 1 if r.topic_partition in whole else _part_count(r.size, split_total, split_min)
            parted.extend(_cut(r, parts))
        live = parted
    if max_records_per_partition is not None:
        live = [part for r in live for part in _cut(r, -(-r.size // max_records_per_partition))]
    return live


def rate_limit(
    limit: int, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """``end`` capped so that about ``limit`` offsets are read in all, proportionally.

    ``start`` must hold every partition of ``end`` (new partitions at their earliest offset).
    Partitions with nothing to read keep their ``end``.
    """
    if limit <= 0:
        raise RangeError("a read limit must be positive")
    missing = sorted(map(str, set(end) - set(start)))
    if missing:
        raise RangeError(f"no starting offset for partitions {missing}")
    sizes = {tp: end[tp] - start[tp] for tp in end if end[tp] - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(end)
    capped = {}
    for tp, until in end.items():
        size = sizes.get(tp)
        if size is None:
            capped[tp] = until
            continue
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        capped[tp] = min(until, start[tp] + share)
    return capped


def total_size(ranges: Sequence[OffsetRange]) -> int:
    """The offsets the ranges cover (an upper bound of their records)."""
    return sum(r.size for r in ranges)


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{TopicPartition: offset}`` -> ``{"topic": {"0": offset}}``, sorted, as Spark writes it."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """The inverse of ``offsets_to_json``."""
    try:
        return {
            TopicPartition(topic, int(p)): int(off)
            for topic, parts in data.items()
            for p, off in parts.items()
        }
    except (AttributeError, TypeError, ValueError) as e:
        raise RangeError(f'not per-partition offsets {{"topic": {{"0": 23}}}}: {data!r}') from e
