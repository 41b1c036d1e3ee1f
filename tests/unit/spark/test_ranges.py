"""Offset ranges split and rate-limited as Spark's KafkaOffsetRangeCalculator and rateLimit do."""

from __future__ import annotations

import pytest

from odradek.common.partitions import TopicPartition
from odradek.spark.ranges import (
    OffsetRange,
    RangeError,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    split_ranges,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def r(tp: TopicPartition, start: int, end: int) -> OffsetRange:
    return OffsetRange(tp.topic, tp.partition, start, end)


def test_plan_one_range_per_partition_sorted_without_empty_ones() -> None:
    assert plan_ranges({B0: 3, A1: 5, A0: 0}, {B0: 9, A1: 5, A0: 10}) == [
        r(A0, 0, 10),
        r(B0, 3, 9),
    ]


def test_plan_refuses_a_start_after_its_end_and_mismatched_partitions() -> None:
    with pytest.raises(RangeError, match="starting offset 7 is after the ending offset 5 .*a-0"):
        plan_ranges({A0: 7}, {A0: 5})
    with pytest.raises(RangeError, match="different partitions"):
        plan_ranges({A0: 0}, {A1: 5})


def test_no_split_without_min_partitions_or_with_enough_partitions() -> None:
    ranges = [r(A0, 0, 100), r(A1, 0, 10)]
    assert split_ranges(ranges) == ranges
    assert split_ranges(ranges, min_partitions=2) == ranges
    assert split_ranges([r(A0, 0, 0), *ranges], min_partitions=2) == ranges


def test_min_partitions_splits_large_ranges_proportionally() -> None:
    # Spark's KafkaOffsetRangeCalculatorSuite: sizes 1 and 10, minPartitions 3 -> 1 + 2 parts.
    got = split_ranges([r(A0, 1, 2), r(A1, 1, 11)], min_partitions=3)
    assert got == [r(A0, 1, 2), r(A1, 1, 6), r(A1, 6, 11)]
    # One partition of 100 into 3: the last part takes the rounding.
    assert split_ranges([r(A0, 0, 100)], min_partitions=3) == [
        r(A0, 0, 33),
        r(A0, 33, 66),
        r(A0, 66, 100),
    ]
    # Sizes 2 and 1000 into 4: the small range stays whole, the large one gets the other 3.
    got = split_ranges([r(A0, 0, 2), r(B0, 0, 1000)], min_partitions=4)
    assert got[0] == r(A0, 0, 2) and [x.size for x in got[1:]] == [333, 333, 334]


def test_split_covers_every_offset_exactly_once() -> None:
    ranges = [r(A0, 5, 1000), r(A1, 0, 7), r(B0, 100, 163)]
    for min_partitions in (1, 3, 4, 10, 50, 2000):
        got = split_ranges(ranges, min_partitions=min_partitions)
        for original in ranges:
            parts = [x for x in got if x.topic_partition == original.topic_partition]
            assert parts[0].from_offset == original.from_offset
            assert parts[-1].until_offset == original.until_offset
            pairs = zip(parts, parts[1:], strict=False)
            assert all(a.until_offset == b.from_offset for a, b in pairs)
            assert all(x.size > 0 for x in parts)


def test_max_records_per_partition_cuts_parts_evenly() -> None:
    assert split_ranges([r(A0, 0, 10), r(A1, 0, 3)], max_records_per_partition=4) == [
        r(A0, 0, 3),
        r(A0, 3, 6),
        r(A0, 6, 10),
        r(A1, 0, 3),
    ]


def test_bad_split_settings() -> None:
    with pytest.raises(RangeError, match="minPartitions"):
        split_ranges([], min_partitions=0)
    with pytest.raises(RangeError, match="maxRecordsPerPartition"):
        split_ranges([], max_records_per_partition=-1)


def test_rate_limit_is_proportional_and_never_starves_or_overshoots() -> None:
    start = {A0: 0, A1: 100, B0: 50}
    end = {A0: 900, A1: 200, B0: 50}  # sizes 900, 100, 0
    assert rate_limit(100, start, end) == {A0: 90, A1: 110, B0: 50}
    # A share below 1 is rounded up: small partitions are not starved.
    assert rate_limit(5, {A0: 0, A1: 0}, {A0: 1000, A1: 1}) == {A0: 4, A1: 1}
    # A limit above what there is gives the ends.
    assert rate_limit(10_000, start, end) == end
    # Nothing to read: the ends.
    assert rate_limit(10, {A0: 5}, {A0: 5}) == {A0: 5}


def test_rate_limit_needs_every_start() -> None:
    with pytest.raises(RangeError, match="a-1"):
        rate_limit(10, {A0: 0}, {A0: 5, A1: 5})
    with pytest.raises(RangeError, match="positive"):
        rate_limit(0, {A0: 0}, {A0: 5})


def test_offsets_json_round_trip() -> None:
    offsets = {A1: 7, A0: -2, B0: 0}
    assert offsets_to_json(offsets) == {"a": {"0": -2, "1": 7}, "b": {"0": 0}}
    assert offsets_from_json(offsets_to_json(offsets)) == offsets
    with pytest.raises(RangeError):
        offsets_from_json({"a": [0]})
