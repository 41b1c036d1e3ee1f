"""Throttle settings for a plan are kafka-reassign-partitions': the same keys, the same
"partition:broker" lists sorted as Kafka's TreeSet[String], on the same brokers."""

from __future__ import annotations

from odradek.ops.plan import PartitionMove, Plan
from odradek.ops.throttles import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    throttled_brokers,
    topic_throttles,
)


def test_leader_lists_sources_and_follower_lists_new_replicas():
    plan = Plan(
        (
            PartitionMove("t", 0, (1, 2), (3, 2)),
            PartitionMove("t", 10, (2, 1), (2, 4)),
            PartitionMove("t", 2, (1, 2), (1, 2, 5)),  # a replication factor change
            PartitionMove("u", 0, (1, 2), (2, 1)),  # a reorder only
        )
    )
    assert topic_throttles(plan) == {
        "t": {
            LEADER_REPLICAS: "0:1,0:2,10:1,10:2,2:1,2:2",
            FOLLOWER_REPLICAS: "0:3,10:4,2:5",
        },
        "u": {LEADER_REPLICAS: "0:1,0:2"},  # nothing to copy: no follower list
    }
    assert throttled_brokers(plan) == [1, 2, 3, 4, 5]
