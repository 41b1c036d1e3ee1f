"""Proves, with real processes under continuous acks=all load, that moving replicas between a
broker's log dirs (AlterReplicaLogDirs, through kafka-python) loses nothing and leaves every
replica identical, and that DescribeLogDirs shows the moves as Kafka does.

Each scenario is ``test_faults.run_scenario``: ZooKeeper, two controllers, three brokers with two
log dirs each (every local cluster runs JBOD), a topic of 3 replicas, two idempotent producers,
the disk operation while they produce, then the history checker and the comparison of every
replica's segment files.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient
from kafka.structs import TopicPartitionReplica
from test_faults import PARTITIONS, Run, _wait, run_scenario

from odradek.local import cluster

pytestmark = [pytest.mark.integration, pytest.mark.fault]

MOVE_WAIT_S = 60.0


def describe(admin: KafkaAdminClient, broker_id: int) -> dict[str, list[tuple[int, bool, int]]]:
    """log dir -> [(partition, is_future, offset lag)] of the run's topic on ``broker_id``."""
    [answer] = admin.describe_log_dirs(brokers=[broker_id])
    found: dict[str, list[tuple[int, bool, int]]] = {}
    for log_dir in answer["log_dirs"]:
        assert log_dir["error_code"] == 0, log_dir
        found[log_dir["log_dir"]] = sorted(
            (p["partition_index"], p["is_future_key"], p["offset_lag"])
            for t in log_dir["topics"]
            for p in t["partitions"]
        )
    return found


def move_every_replica_to_its_other_dir(run: Run) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=run.state.bootstrap_servers, request_timeout_ms=10_000
    )
    try:
        wanted: dict[TopicPartitionReplica, str] = {}
        for broker_id in range(1, run.brokers + 1):
            before = describe(admin, broker_id)
            assert sum(len(p) for p in before.values()) == PARTITIONS
            dirs = [str(d) for d in cluster.broker_log_dirs(run.broker(broker_id))]
            assert sorted(before) == sorted(dirs)
            for log_dir, partitions in before.items():
                other = next(d for d in dirs if d != log_dir)
                for partition, _, _ in partitions:
                    wanted[TopicPartitionReplica(run.topic, partition, broker_id)] = other
        answers = admin.alter_replica_log_dirs(wanted)
        assert {e.__name__ for e in answers.values()} == {"NoError"}, answers
        run.event(f"moving {len(wanted)} replicas to their broker's other log dir")

        def moved() -> bool:
            for broker_id in range(1, run.brokers + 1):
                now = describe(admin, broker_id)
                for tpr, target in wanted.items():
                    if tpr.broker_id == broker_id and (tpr.partition, False, 0) not in now.get(
                        target, []
                    ):
                        return False
                if any(is_future for ps in now.values() for _, is_future, _ in ps):
                    return False
            return True

        began = time.monotonic()
        _wait(moved, "every replica in its new log dir", MOVE_WAIT_S)
        run.event(f"every replica moved in {time.monotonic() - began:.1f} s")
        unknown = admin.alter_replica_log_dirs(
            {TopicPartitionReplica(run.topic, 0, 1): "/nowhere/at/all"}
        )
        assert [e.__name__ for e in unknown.values()] == ["LogDirNotFoundError"]
    finally:
        admin.close()


@pytest.mark.timeout(240)
def test_moving_every_replica_between_log_dirs_under_load_loses_nothing(tmp_path):
    run_scenario(tmp_path, 1, move_every_replica_to_its_other_dir)
