"""Read options parse and fail as Spark's Kafka source's do; every error names its option."""

from __future__ import annotations

import pytest

from odradek.common.partitions import TopicPartition
from odradek.spark.read_options import (
    Assign,
    Earliest,
    GlobalTimestamp,
    Latest,
    OptionError,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    parse_read_options,
)

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def batch(**options: str):
    return parse_read_options({**BOOT, **options}, streaming=False)


def stream(**options: str):
    return parse_read_options({**BOOT, **options}, streaming=True)


def lower(**options: str) -> dict[str, str]:
    """As Spark hands a Python source its options: names in lower case."""
    return {k.lower(): v for k, v in {**BOOT, **options}.items()}


def test_defaults_batch_and_streaming() -> None:
    o = batch(subscribe="a, b,,")
    assert o.subscription == Subscribe(("a", "b"))
    assert (o.starting, o.ending) == (Earliest(), Latest())
    assert o.fail_on_data_loss and not o.include_headers
    assert o.client["bootstrap.servers"] == "127.0.0.1:9092"
    assert o.group_id.startswith("spark-kafka-relation-")
    s = stream(subscribe="a")
    assert (s.starting, s.ending) == (Latest(), None)
    assert s.group_id.startswith("spark-kafka-source-")


def test_names_are_case_insensitive() -> None:
    o = parse_read_options(
        lower(subscribePattern="t.*", startingOffsets="EARLIEST", includeHeaders="True"),
        streaming=False,
    )
    assert o.subscription == SubscribePattern("t.*") and o.include_headers


def test_exactly_one_subscription() -> None:
    with pytest.raises(OptionError, match="'subscribe', 'subscribePattern', 'assign'"):
        batch()
    with pytest.raises(OptionError, match="only one"):
        batch(subscribe="a", assign='{"a": [0]}')
    with pytest.raises(OptionError, match="'subscribe'"):
        batch(subscribe=" , ")
    with pytest.raises(OptionError, match="'subscribePattern'"):
        batch(subscribePattern="(")
    with pytest.raises(OptionError, match="'assign'"):
        batch(assign="a:0")
    with pytest.raises(OptionError, match="'assign'"):
        batch(assign='{"a": ["x"]}')


def test_assign_and_pattern() -> None:
    assert batch(assign='{"b": [1, 0], "a": [2]}').subscription == Assign(
        (TopicPartition("a", 2), TopicPartition("b", 0), TopicPartition("b", 1))
    )
    pattern = batch(subscribePattern="topic-[0-9]+").subscription
    assert pattern.matches("topic-12") and not pattern.matches("topic-12x")


def test_offsets_json_and_precedence() -> None:
    o = batch(subscribe="t", startingOffsets='{"t": {"0": 23, "1": -2}}', endingOffsets="latest")
    assert o.starting == SpecificOffsets({TopicPartition("t", 0): 23, TopicPartition("t", 1): -2})
    # Spark's order: *Timestamp, then *OffsetsByTimestamp, then *Offsets.
    o = batch(
        subscribe="t",
        startingOffsets="earliest",
        startingOffsetsByTimestamp='{"t": {"0": 1000}}',
        startingTimestamp="5000",
        startingOffsetsByTimestampStrategy="LATEST",
        endingOffsetsByTimestamp='{"t": {"0": 9000}}',
        endingOffsets="latest",
    )
    assert o.starting == GlobalTimestamp(5000, "latest")
    assert o.ending == SpecificTimestamps({TopicPartition("t", 0): 9000}, "latest")


def test_batch_refuses_latest_start_and_earliest_end() -> None:
    with pytest.raises(OptionError, match="'startingOffsets' can't be latest"):
        batch(subscribe="t", startingOffsets="latest")
    with pytest.raises(OptionError, match="'startingOffsets' for t-1 can't be latest"):
        batch(subscribe="t", startingOffsets='{"t": {"0": 0, "1": -1}}')
    with pytest.raises(OptionError, match="'endingOffsets' can't be earliest"):
        batch(subscribe="t", endingOffsets="earliest")
    with pytest.raises(OptionError, match="'endingOffsets' for t-0 can't be earliest"):
        batch(subscribe="t", endingOffsets='{"t": {"0": -2}}')


def test_batch_checks_specific_start_against_end() -> None:
    with pytest.raises(OptionError, match="same partitions"):
        batch(subscribe="t", startingOffsets='{"t": {"0": 1}}', endingOffsets='{"t": {"1": 5}}')
    with pytest.raises(OptionError, match="start 9 is after the end 5 for t-0"):
        batch(subscribe="t", startingOffsets='{"t": {"0": 9}}', endingOffsets='{"t": {"0": 5}}')
    with pytest.raises(OptionError, match="start 9 is after the end 5"):
        batch(
            subscribe="t",
            startingOffsetsByTimestamp='{"t": {"0": 9}}',
            endingOffsetsByTimestamp='{"t": {"0": 5}}',
        )


def test_streaming_refuses_ending_options() -> None:
    for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
        with pytest.raises(OptionError, match=f"'{name}' is not valid in streaming"):
            stream(subscribe="t", **{name: "latest"})


def test_streaming_only_options_parse_and_batch_ignores_them() -> None:
    s = stream(
        subscribe="t", maxOffsetsPerTrigger="100", minOffsetsPerTrigger="10", maxTriggerDelay="30s"
    )
    assert (s.max_offsets_per_trigger, s.min_offsets_per_trigger) == (100, 10)
    assert s.max_trigger_delay_ms == 30_000
    assert stream(subscribe="t").max_trigger_delay_ms == 15 * 60_000
    assert stream(subscribe="t", maxTriggerDelay="250").max_trigger_delay_ms == 250
    assert batch(subscribe="t", maxOffsetsPerTrigger="100").max_offsets_per_trigger == 100
    with pytest.raises(OptionError, match="minOffsetsPerTrigger"):
        stream(subscribe="t", maxOffsetsPerTrigger="10", minOffsetsPerTrigger="100")
    with pytest.raises(OptionError, match="'maxTriggerDelay'"):
        stream(subscribe="t", maxTriggerDelay="soon")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("minPartitions", "0"),
        ("minPartitions", "x"),
        ("maxRecordsPerPartition", "-5"),
        ("maxOffsetsPerTrigger", "0"),
        ("failOnDataLoss", "maybe"),
        ("includeHeaders", "1"),
        ("startingOffsets", '{"t": [0]}'),
        ("startingOffsets", "not json"),
        ("startingTimestamp", "yesterday"),
        ("startingOffsetsByTimestampStrategy", "closest"),
        ("kafkaConsumer.pollTimeoutMs", "-1"),
        ("fetchOffset.numRetries", "-1"),
    ],
)
def test_bad_values_name_the_option(name: str, value: str) -> None:
    with pytest.raises(OptionError, match=f"'{name}'"):
        parse_read_options(lower(subscribe="t", **{name: value}), streaming=False)


def test_unknown_options_are_refused_by_name() -> None:
    with pytest.raises(OptionError, match="'startingOffset' is not an option"):
        batch(subscribe="t", startingOffset="earliest")
    with pytest.raises(OptionError, match="'topic'"):
        batch(subscribe="t", topic="t")


def test_kafka_options_pass_through_and_refused_client_keys() -> None:
    o = batch(subscribe="t", **{"kafka.isolation.level": "read_committed"})
    assert o.client["isolation.level"] == "read_committed"
    with pytest.raises(OptionError, match="auto.offset.reset"):
        batch(subscribe="t", **{"kafka.auto.offset.reset": "earliest"})
    with pytest.raises(OptionError, match="kafka.bootstrap.servers"):
        parse_read_options({"subscribe": "t"}, streaming=False)


def test_group_id_honoured_else_prefix() -> None:
    assert batch(subscribe="t", **{"kafka.group.id": "g1"}).group_id == "g1"
    assert batch(subscribe="t", **{"kafka.group.id": "g1", "groupIdPrefix": "p"}).group_id == "g1"
    assert batch(subscribe="t", groupIdPrefix="mine").group_id.startswith("mine-")


def test_options_pickle() -> None:
    import pickle

    o = batch(subscribe="t", startingOffsets='{"t": {"0": 1}}', endingOffsets='{"t": {"0": 5}}')
    assert pickle.loads(pickle.dumps(o)) == o
