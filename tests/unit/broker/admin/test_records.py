"""DeleteRecords on real logs: only the leader deletes, by policy, and answers the low watermark."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.broker.admin.records import delete_records
from odradek.broker.metadata_cache import MetadataCache, PartitionMetadata, TopicMetadata
from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import ReplicaManager
from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode
from odradek.storage.manager import LogManager

BROKER = 1


@pytest.fixture
def replicas(tmp_path):
    log_manager = LogManager([tmp_path / "disk-0"])
    log_manager.load()
    yield ReplicaManager(BROKER, log_manager)
    log_manager.shutdown()


def host(replicas, topic, partition=0, leader=BROKER, **config):
    state = PartitionState(leader=leader, leader_epoch=0, isr=(leader,), replicas=(leader,))
    replicas.become_leader_or_follower(topic, partition, state, TopicConfig(**config))
    return replicas.get_partition(topic, partition)


def fill(replicas, kafka_batch, topic, n=10):
    for i in range(n):
        result = asyncio.run(
            replicas.append_records(1, {(topic, 0): kafka_batch([(None, b"%d" % i)])})
        )
        assert result[(topic, 0)].error == ErrorCode.none


def test_the_leader_moves_its_log_start_offset(replicas, kafka_batch):
    partition = host(replicas, "t")
    fill(replicas, kafka_batch, "t")
    [result] = delete_records(replicas, MetadataCache(), [("t", 0, 4)])
    assert (result.error, result.low_watermark) == (ErrorCode.none, 4)
    assert partition.log.log_start_offset == 4
    [result] = delete_records(replicas, MetadataCache(), [("t", 0, 2)])  # never backwards
    assert result.low_watermark == 4
    [result] = delete_records(replicas, MetadataCache(), [("t", 0, -1)])  # the high watermark
    assert result.low_watermark == 10


def test_each_partition_answers_for_itself(replicas, kafka_batch):
    host(replicas, "t")
    fill(replicas, kafka_batch, "t", 3)
    host(replicas, "followed", leader=2)
    host(replicas, "compacted", cleanup_policy=("compact",))
    metadata = MetadataCache()
    metadata.update_topic(
        TopicMetadata("elsewhere", uuid.uuid4(), {0: PartitionMetadata(0, 2, 0, (2,), (2,))})
    )
    results = delete_records(
        replicas,
        metadata,
        [
            ("t", 0, 99),
            ("t", 0, -5),
            ("followed", 0, 0),
            ("elsewhere", 0, 0),
            ("elsewhere", 1, 0),
            ("nowhere", 0, 0),
            ("compacted", 0, 0),
            ("t", 0, 3),
        ],
    )
    assert [(r.error, r.low_watermark) for r in results] == [
        (ErrorCode.offset_out_of_range, -1),
        (ErrorCode.offset_out_of_range, -1),
        (ErrorCode.not_leader_or_follower, -1),
        (ErrorCode.not_leader_or_follower, -1),
        (ErrorCode.unknown_topic_or_partition, -1),
        (ErrorCode.unknown_topic_or_partition, -1),
        (ErrorCode.policy_violation, -1),
        (ErrorCode.none, 3),
    ]
    assert "configured policy" in results[6].message
