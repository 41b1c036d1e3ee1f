"""Plans read and write kafka-reassign-partitions' JSON byte for byte, round-trip, and refuse
what Kafka's tool refuses (with its messages) or what this tool does not do (log dirs)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.common.partitions import TopicPartition
from odradek.ops.errors import PlanFormatError, PlanMismatchError
from odradek.ops.model import ClusterView
from odradek.ops.plan import (
    PartitionMove,
    Plan,
    format_reassignment_json,
    parse_reassignment_json,
    parse_topics_to_move,
)

# What Kafka 3.9's kafka-reassign-partitions.sh --generate prints (formatAsReassignmentJson).
KAFKA_OUTPUT = (
    '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[5,6],'
    '"log_dirs":["any","any"]},{"topic":"foo","partition":1,"replicas":[6,5],'
    '"log_dirs":["any","any"]}]}'
)


def test_writes_kafka_format_exactly():
    targets = {TopicPartition("foo", 1): (6, 5), TopicPartition("foo", 0): (5, 6)}
    assert format_reassignment_json(targets) == KAFKA_OUTPUT


def test_reads_kafka_format_with_and_without_log_dirs():
    assert parse_reassignment_json(KAFKA_OUTPUT) == {("foo", 0): (5, 6), ("foo", 1): (6, 5)}
    hand_written = '{"partitions": [{"topic": "foo", "partition": 2, "replicas": [1]}]}'
    assert parse_reassignment_json(hand_written) == {("foo", 2): (1,)}


names = st.text("abcdefghij-._", min_size=1, max_size=8)
targets = st.dictionaries(
    st.tuples(names, st.integers(0, 50)).map(lambda t: TopicPartition(*t)),
    st.lists(st.integers(0, 20), min_size=1, max_size=4, unique=True).map(tuple),
    min_size=1,
    max_size=10,
)


@settings(max_examples=100, deadline=None)
@given(targets)
def test_round_trip(assignment):
    text = format_reassignment_json(assignment)
    assert parse_reassignment_json(text) == assignment
    assert format_reassignment_json(parse_reassignment_json(text)) == text


def test_plan_writes_targets_and_rollback():
    view = ClusterView.build({("t", 0): [1, 2], ("t", 1): [2, 3]}, [1, 2, 3, 4])
    plan = Plan.from_json(format_reassignment_json({TopicPartition("t", 0): (4, 2)}), view)
    assert plan.moves == (PartitionMove("t", 0, (1, 2), (4, 2)),)
    assert json.loads(plan.to_json())["partitions"][0]["replicas"] == [4, 2]
    assert json.loads(plan.rollback_json())["partitions"][0]["replicas"] == [1, 2]
    assert plan.replica_moves == 1
    assert plan.bytes_to_move({TopicPartition("t", 0): 1000}) == 1000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not valid JSON"),
        ("[]", "must be an object"),
        ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
        ('{"version":1,"partitions":[]}', "Partition reassignment list cannot be empty"),
        ('{"version":1}', '"partitions" must be a list'),
        ('{"partitions":[{"partition":0,"replicas":[1]}]}', 'without a "topic"'),
        ('{"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}', 'valid "partition"'),
        ('{"partitions":[{"topic":"t","partition":true,"replicas":[1]}]}', 'valid "partition"'),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "non-empty list"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":["1"]}]}', "broker ids"),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}',
            "may not contain duplicate entries",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
            '{"topic":"t","partition":0,"replicas":[2]}]}',
            "duplicate partitions",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
            "different from size of log dirs",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d1"]}]}',
            "not done by this tool",
        ),
    ],
)
def test_refuses_what_kafka_refuses(text, message):
    with pytest.raises(PlanFormatError, match=message):
        parse_reassignment_json(text)


def test_plan_refuses_unknown_partitions_and_brokers():
    view = ClusterView.build({("t", 0): [1, 2]}, [1, 2])
    with pytest.raises(PlanMismatchError, match="not found in the cluster: t-5"):
        Plan.from_targets({TopicPartition("t", 5): (1,)}, view)
    with pytest.raises(PlanMismatchError, match=r"Unknown broker id\(s\) 7,9"):
        Plan.from_targets({TopicPartition("t", 0): (9, 7)}, view)


def test_topics_to_move_file():
    text = '{"topics": [{"topic": "foo1"}, {"topic": "foo2"}], "version": 1}'
    assert parse_topics_to_move(text) == ["foo1", "foo2"]
    for bad, message in [
        ('{"topics": []}', "non-empty list"),
        ('{"topics": [{"name": "x"}]}', '"topic": NAME'),
        ('{"topics": [{"topic": "x"}, {"topic": "x"}]}', "Duplicate topic"),
        ('{"version": 3, "topics": [{"topic": "x"}]}', "Not supported version"),
    ]:
        with pytest.raises(PlanFormatError, match=message):
            parse_topics_to_move(bad)
