"""The stream planner's offset decisions (read limits, availableNow, new partitions, data loss)
against a fake cluster, without Spark."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from odradek.common.clock import ManualClock
from odradek.common.partitions import TopicPartition
from odradek.spark.partition_read import DataLossError
from odradek.spark.ranges import OffsetRange
from odradek.spark.read_options import OffsetLimit, parse_read_options
from odradek.spark.stream_read import StreamPlanner, decode, encode

A0, A1, A2 = (TopicPartition("a", p) for p in range(3))


class FakeCluster:
    """Partitions with a log start and an end each; the test moves them."""

    def __init__(self, logs: dict[TopicPartition, tuple[int, int]]) -> None:
        self.logs = dict(logs)
        self.closed = False

    def partitions(self, subscription) -> list[TopicPartition]:
        return sorted(self.logs)

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.logs[tp][0] for tp in tps}

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.logs[tp][1] for tp in tps}

    def resolve(self, limit: OffsetLimit, tps, *, starting: bool) -> dict[TopicPartition, int]:
        name = type(limit).__name__
        return self.earliest(tps) if name == "Earliest" else self.latest(tps)

    def close(self) -> None:
        self.closed = True


def planner(
    cluster: FakeCluster, clock: ManualClock | None = None, **options: str
) -> StreamPlanner:
    parsed = parse_read_options(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "a", **options}, streaming=True
    )
    return StreamPlanner(cluster, parsed, clock or ManualClock(now_ms=0.0))


def test_offsets_round_trip_as_sparks_json() -> None:
    offsets = {A1: 7, A0: 5, TopicPartition("b", 0): 0}
    assert encode(offsets) == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert decode(encode(offsets)) == offsets


def test_a_stream_starts_at_latest_unless_told() -> None:
    cluster = FakeCluster({A0: (0, 10), A1: (3, 4)})
    assert planner(cluster).initial() == {A0: 10, A1: 4}
    assert planner(cluster, startingOffsets="earliest").initial() == {A0: 0, A1: 3}


def test_max_offsets_per_trigger_caps_batches_in_proportion() -> None:
    cluster = FakeCluster({A0: (0, 300), A1: (0, 100), A2: (0, 0)})
    plan = planner(cluster, maxOffsetsPerTrigger="100")
    start = {A0: 0, A1: 0, A2: 0}
    end = plan.latest(start, ReadMaxRows(100))
    assert end == {A0: 75, A1: 25, A2: 0}
    assert plan.latest(start, ReadAllAvailable()) == {A0: 300, A1: 100, A2: 0}


def test_available_now_stops_at_the_end_fixed_when_prepared() -> None:
    cluster = FakeCluster({A0: (0, 10)})
    plan = planner(cluster, maxOffsetsPerTrigger="4")
    plan.fix_end_for_available_now()
    cluster.logs[A0] = (0, 50)  # produced after the start: not for this run
    start = {A0: 0}
    batches = []
    for _ in range(10):
        end = plan.latest(start, ReadMaxRows(4))
        if end == start:
            break
        batches.append(end[A0] - start[A0])
        start = end
    assert batches == [4, 4, 2]


def test_min_offsets_per_trigger_waits_for_records_or_the_delay() -> None:
    clock = ManualClock(now_ms=0.0)
    cluster = FakeCluster({A0: (0, 3)})
    plan = planner(cluster, clock, minOffsetsPerTrigger="5", maxTriggerDelay="10s")
    start = {A0: 0}
    assert plan.latest(start, ReadMinRows(5)) == start
    cluster.logs[A0] = (0, 6)
    assert plan.latest(start, ReadMinRows(5)) == {A0: 6}
    cluster.logs[A0] = (0, 7)
    assert plan.latest({A0: 6}, ReadMinRows(5)) == {A0: 6}
    clock.now_ms += 10_000
    assert plan.latest({A0: 6}, ReadMinRows(5)) == {A0: 7}


def test_min_offsets_is_not_waited_for_in_an_available_now_run() -> None:
    cluster = FakeCluster({A0: (0, 3)})
    plan = planner(cluster, minOffsetsPerTrigger="5")
    plan.fix_end_for_available_now()
    assert plan.latest({A0: 0}, ReadMinRows(5)) == {A0: 3}


def test_a_new_partition_is_read_from_its_earliest_offset() -> None:
    cluster = FakeCluster({A0: (0, 10), A1: (0, 4)})
    plan = planner(cluster)
    start = {A0: 10}
    end = plan.latest(start, ReadAllAvailable())
    assert end == {A0: 10, A1: 4}
    assert plan.ranges(start, end) == [OffsetRange("a", 1, 0, 4)]


def test_a_new_topic_is_read_from_its_earliest_offset() -> None:
    cluster = FakeCluster({A0: (0, 10)})
    plan = planner(cluster, maxOffsetsPerTrigger="4")
    b0 = TopicPartition("b", 0)
    cluster.logs[b0] = (0, 6)
    end = plan.latest({A0: 10}, ReadMaxRows(4))
    assert end == {A0: 10, b0: 4}  # the limit counts the new topic from its start
    assert plan.ranges({A0: 10}, end) == [OffsetRange("b", 0, 0, 4)]


def test_a_new_partition_missing_its_first_records_is_data_loss() -> None:
    cluster = FakeCluster({A0: (0, 10), A1: (2, 4)})
    with pytest.raises(DataLossError, match="a-1 was added but starts at offset 2"):
        planner(cluster).ranges({A0: 10}, {A0: 10, A1: 4})
    tolerant = planner(cluster, failOnDataLoss="false")
    assert tolerant.ranges({A0: 10}, {A0: 10, A1: 4}) == [OffsetRange("a", 1, 2, 4)]


def test_deleted_offsets_fail_the_batch_or_are_skipped(caplog) -> None:
    cluster = FakeCluster({A0: (80, 100)})
    with pytest.raises(DataLossError, match="offsets 50 to 79 were deleted.*failOnDataLoss"):
        planner(cluster).ranges({A0: 50}, {A0: 100})
    tolerant = planner(cluster, failOnDataLoss="false", maxOffsetsPerTrigger="10")
    end = tolerant.latest({A0: 50}, ReadMaxRows(10))
    assert end == {A0: 90}  # the budget is spent on records that exist
    with caplog.at_level(logging.WARNING):
        assert tolerant.ranges({A0: 50}, end) == [OffsetRange("a", 0, 80, 90)]
    assert "offsets 50 to 79 were deleted" in caplog.text


def test_a_deleted_partition_or_an_offset_going_back_is_data_loss() -> None:
    cluster = FakeCluster({A0: (0, 5)})
    plan = planner(cluster)
    end = plan.latest({A0: 0, A1: 3}, ReadMaxRows(100))
    assert end == {A0: 5}
    with pytest.raises(DataLossError, match="a-1 is gone"):
        plan.ranges({A0: 0, A1: 3}, end)
    cluster.logs[A0] = (0, 2)  # the topic was deleted and made again, shorter
    assert plan.latest({A0: 9}, ReadMaxRows(100)) == {A0: 2}
    with pytest.raises(DataLossError, match="went back from 9 to 5"):
        plan.ranges({A0: 9}, {A0: 5})


def test_min_partitions_splits_a_batch() -> None:
    cluster = FakeCluster({A0: (0, 100)})
    ranges = planner(cluster, minPartitions="4").ranges({A0: 0}, {A0: 100})
    assert [(r.from_offset, r.until_offset) for r in ranges] == [
        (0, 25),
        (25, 50),
        (50, 75),
        (75, 100),
    ]
