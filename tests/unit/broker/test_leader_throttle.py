"""A leader over leader.replication.throttled.rate sends no records of throttled partitions to an
out-of-sync follower (offsets still go out), while in-sync followers and other partitions flow."""

from __future__ import annotations

import asyncio

import pytest

from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import FetchPartitionRequest, ReplicaManager
from odradek.broker.replication_quota import ReplicationQuota, Side
from odradek.common.clock import ManualClock
from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode
from odradek.storage.manager import LogManager

LEADER, IN_SYNC, CATCHING_UP = 1, 2, 3
BOUND_BYTES_PER_S = 100


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(now_ms=1_000_000.0)


@pytest.fixture
def manager(tmp_path, clock):
    log_manager = LogManager([tmp_path / "disk-0"])
    log_manager.load()
    quota = ReplicationQuota(
        Side.LEADER, LEADER, rate_limit_bytes_per_s=BOUND_BYTES_PER_S, clock_ms=clock
    )
    replicas = ReplicaManager(LEADER, log_manager, leader_quota=quota)
    config = TopicConfig.from_properties({"leader.replication.throttled.replicas": f"0:{LEADER}"})
    for index in (0, 1):  # partition 0 is listed on this leader, partition 1 is not
        state = PartitionState(
            LEADER, 1, (LEADER, IN_SYNC), (LEADER, IN_SYNC, CATCHING_UP), partition_epoch=1
        )
        assert replicas.become_leader_or_follower("t", index, state, config)
    yield replicas
    log_manager.shutdown()


def fetch(manager: ReplicaManager, replica: int, index: int):
    [result] = asyncio.run(
        manager.fetch(
            [FetchPartitionRequest("t", index, 0, 1 << 20)],
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            replica_id=replica,
        )
    )
    assert result.error == ErrorCode.none
    return result


def test_the_catching_up_follower_waits_while_the_leader_is_over_its_rate(
    manager, clock, kafka_batch
):
    for index in (0, 1):
        data = kafka_batch([(b"k%d" % i, b"v" * 50) for i in range(3)])
        asyncio.run(manager.append_records(1, {("t", index): data}))
    quota = manager.leader_quota

    first = fetch(manager, CATCHING_UP, 0)
    assert first.size > BOUND_BYTES_PER_S  # under the bound when asked: sent, and recorded
    assert quota.rate() == pytest.approx(first.size)
    held = fetch(manager, CATCHING_UP, 0)
    assert held.records is None and held.high_watermark == first.high_watermark

    assert fetch(manager, IN_SYNC, 0).size == first.size  # in the ISR: never delayed
    assert fetch(manager, CATCHING_UP, 1).size > 0  # partition 1 is not listed here
    # What went to the in-sync follower counts too (Kafka records every throttled partition).
    assert quota.rate() == pytest.approx(2 * first.size)

    clock.now_ms += 2 * first.size / BOUND_BYTES_PER_S * 1000 + 1
    assert fetch(manager, CATCHING_UP, 0).size == first.size


def test_without_a_listed_replica_or_a_rate_nothing_is_held_back(manager, kafka_batch):
    data = kafka_batch([(b"k", b"v" * 500)])
    asyncio.run(manager.append_records(1, {("t", 0): data}))
    manager.get_partition("t", 0).log.update_config(TopicConfig())
    for _ in range(3):
        assert fetch(manager, CATCHING_UP, 0).size > 0
    assert manager.leader_quota.rate() == 0  # not listed: not counted
