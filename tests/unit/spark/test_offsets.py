"""Offset limits resolve to concrete offsets as Spark's KafkaOffsetReader resolves them (against
a fake consumer), and an unreachable cluster fails in bounded time."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.common.partitions import TopicPartition
from odradek.spark.offsets import OffsetLookupError, OffsetReader
from odradek.spark.read_options import (
    Assign,
    Earliest,
    GlobalTimestamp,
    Latest,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
)

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
# (log start, latest) per partition; each record's timestamp is 1000 * its offset.
MARKS = {T0: (0, 10), T1: (5, 8), U0: (0, 0)}


class FakeConsumer:
    def __init__(self) -> None:
        self.failures = 0

    def list_topics(self, timeout: float):
        if self.failures:
            self.failures -= 1
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        topics = {
            name: SimpleNamespace(partitions=dict.fromkeys(range(n)), error=None)
            for name, n in {"t": 2, "u": 1, "__consumer_offsets": 50}.items()
        }
        return SimpleNamespace(topics=topics)

    def get_watermark_offsets(self, tp: KafkaTopicPartition, timeout: float, cached: bool):
        return MARKS[TopicPartition(tp.topic, tp.partition)]

    def offsets_for_times(self, request: list, timeout: float):
        out = []
        for r in request:
            low, high = MARKS[TopicPartition(r.topic, r.partition)]
            offset = max(low, -(-r.offset // 1000))
            out.append(KafkaTopicPartition(r.topic, r.partition, offset if offset < high else -1))
        return out

    def close(self) -> None:
        pass


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> OffsetReader:
    monkeypatch.setattr("odradek.spark.offsets.Consumer", lambda config: FakeConsumer())
    return OffsetReader({"bootstrap.servers": "fake", "group.id": "g"}, retry_interval_ms=0)


def test_partitions_of_each_subscription(reader: OffsetReader) -> None:
    assert reader.partitions(Subscribe(("u", "t", "missing"))) == [T0, T1, U0]
    assert reader.partitions(SubscribePattern(".*")) == [T0, T1, U0]  # no internal topics
    assert reader.partitions(Assign((T1,))) == [T1]
    with pytest.raises(OffsetLookupError, match=r"'assign' .* \['t-2'\]"):
        reader.partitions(Assign((TopicPartition("t", 2),)))


def test_earliest_latest_and_specific(reader: OffsetReader) -> None:
    tps = [T0, T1]
    assert reader.resolve(Earliest(), tps, starting=True) == {T0: 0, T1: 5}
    assert reader.resolve(Latest(), tps, starting=False) == {T0: 10, T1: 8}
    specific = SpecificOffsets({T0: -2, T1: -1})
    assert reader.resolve(specific, tps, starting=True) == {T0: 0, T1: 8}
    with pytest.raises(OffsetLookupError, match="'endingOffsets' must name every partition"):
        reader.resolve(SpecificOffsets({T0: 3}), tps, starting=False)


def test_timestamps(reader: OffsetReader) -> None:
    tps = [T0, T1]
    assert reader.resolve(GlobalTimestamp(6500), tps, starting=True) == {T0: 7, T1: 7}
    assert reader.resolve(GlobalTimestamp(0), tps, starting=True) == {T0: 0, T1: 5}
    # No record that late: an end is latest; a start fails, or is latest with that strategy.
    assert reader.resolve(GlobalTimestamp(9000), tps, starting=False) == {T0: 9, T1: 8}
    with pytest.raises(OffsetLookupError, match=r"'startingTimestamp'.*t-1"):
        reader.resolve(GlobalTimestamp(9000), tps, starting=True)
    late = SpecificTimestamps({T0: 1000, T1: 99_000}, "latest")
    assert reader.resolve(late, tps, starting=True) == {T0: 1, T1: 8}
    with pytest.raises(OffsetLookupError, match="'endingOffsetsByTimestamp'"):
        reader.resolve(SpecificTimestamps({T0: 1}), tps, starting=False)


def test_lookups_are_retried(reader: OffsetReader) -> None:
    reader._consumer.failures = 2
    assert reader.topics()["t"] == 2
    reader._consumer.failures = 10
    with pytest.raises(OffsetLookupError, match="listing topics.*4 tries"):
        reader.topics()


def test_an_unreachable_cluster_fails_in_bounded_time() -> None:
    started = time.monotonic()
    with (
        OffsetReader({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}, timeout_s=1) as r,
        pytest.raises(OffsetLookupError, match="listing topics"),
    ):
        r.partitions(Subscribe(("t",)))
    assert time.monotonic() - started < 5
