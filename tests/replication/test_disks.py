"""Proves, with real processes under continuous acks=all load, that moving replicas between a
broker's log dirs (AlterReplicaLogDirs, through kafka-python) loses nothing and leaves every
replica identical, and that DescribeLogDirs shows the moves as Kafka does; and that a log dir
that fails under load makes the controller move leadership off its replicas (the broker's log
dir event notification), that nothing acknowledged is lost, and that the broker, restarted
without the dir, re-creates the replicas on its healthy dir and they rejoin the ISR.

Each scenario is ``test_faults.run_scenario``: ZooKeeper, two controllers, three brokers with two
log dirs each (every local cluster runs JBOD), a topic of 3 replicas, two idempotent producers,
the disk operation while they produce, then the history checker and the comparison of every
replica's segment files.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.structs import TopicPartitionReplica
from proof.clusters import wait_until
from test_faults import PARTITIONS, Run, run_scenario

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
        wait_until(moved, "every replica in its new log dir", MOVE_WAIT_S)
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


def fail_a_log_dir_then_restart_without_it(run: Run) -> None:
    victim = run.leader(0)
    member = run.broker(victim)
    failed = next(d for d in cluster.broker_log_dirs(member) if (d / f"{run.topic}-0").is_dir())
    on_failed = sorted(
        int(p.name.rsplit("-", 1)[1]) for p in failed.glob(f"{run.topic}-*") if p.is_dir()
    )
    # The disk is replaced under the running broker: its open files still work, but the next
    # file it opens there (a checkpoint within replica.high.watermark.checkpoint.interval.ms, a
    # new segment) fails, and the dir goes offline.
    failed.rename(failed.with_name(failed.name + ".failed"))
    failed.write_text("not a directory: this disk is gone\n")
    run.event(f"log dir {failed.name} of broker {victim} replaced (partitions {on_failed})")

    def moved_off() -> bool:
        states = [cluster.partition_state(run.state, run.topic, p) for p in on_failed]
        return all(s and s.leader not in (-1, victim) and victim not in s.isr for s in states)

    wait_until(moved_off, f"partitions {on_failed} led and in sync without broker {victim}")
    run.event(f"the controller moved partitions {on_failed} off broker {victim}")
    run.pause(1.0, 2.0)  # producing to the new leaders; broker {victim} serves its other dir
    cluster.stop_broker(run.data_dir, victim)
    run.event(f"stopped broker {victim}")
    run.restart(victim)

    def back_in_sync() -> bool:
        states = [cluster.partition_state(run.state, run.topic, p) for p in on_failed]
        return all(s and victim in s.isr for s in states)

    wait_until(back_in_sync, f"broker {victim} back in the ISR of {on_failed}")
    healthy = next(d for d in cluster.broker_log_dirs(member) if d != failed)
    assert all((healthy / f"{run.topic}-{p}").is_dir() for p in on_failed)
    assert Path(failed).is_file(), "the failed dir must stay out of service"
    run.event(f"broker {victim} re-created {on_failed} on {healthy.name}; they are in sync")


@pytest.mark.timeout(240)
def test_a_failed_log_dir_moves_leadership_and_its_replicas_are_recreated(tmp_path):
    run_scenario(tmp_path, 1, fail_a_log_dir_then_restart_without_it)
