"""Proves, with real processes, that reassigning a busy partition (KIP-455) loses nothing: moved
from brokers {1,2,3} to {4,5,6} under acks=all load, cancelled in the middle, and finished by a
second controller after kill -9 of the first in the middle.

Each scenario starts ZooKeeper, two controllers and six brokers (``odradek local up``), creates
a one-partition topic explicitly on brokers 1, 2 and 3 (``min.insync.replicas`` 2), and runs the
replication proof's workload (``proof.workload``: two idempotent ``acks=all`` producers,
continuously) before, during and after the reassignment, which kafka-python's admin client asks
for (AlterPartitionReassignments, ListPartitionReassignments: any broker forwards them to the
controller). "In the middle" is made certain, not hoped for: target broker 6 is paused
(SIGSTOP) while the move starts, so its replica cannot catch up until it is continued, well
within its ZooKeeper session. Then: the final replicas hold the partition and nothing else
does (the old replicas' logs are deleted), the history checker finds nothing lost, duplicated
or reordered, and the final replicas are identical byte for byte up to the high watermark.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kazoo.client import KazooClient
from proof.checker import History, analyze
from proof.clusters import running_cluster, wait_until
from proof.replicas import compare_replicas, read_replica
from proof.workload import Producers, WorkloadConfig, create_topic, read_all

from odradek.local import cluster
from odradek.local.cluster import ClusterState, pid_alive
from odradek.zk.paths import TopicAssignment, topic_path

pytestmark = [pytest.mark.integration, pytest.mark.fault]

BROKERS = 6
ORIGINAL = [1, 2, 3]
TARGET = [4, 5, 6]
SLOW = 6  # the target broker paused to hold the reassignment in its middle
BROKER_SESSION_TIMEOUT_MS = 10_000  # a paused broker keeps its registration meanwhile
CONTROLLER_SESSION_TIMEOUT_MS = 4_000  # a killed controller is replaced within about 4 s
BROKER_OVERRIDES = {
    "zookeeper.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": "5000",
}
CONTROLLER_OVERRIDES = {"zookeeper.session.timeout.ms": str(CONTROLLER_SESSION_TIMEOUT_MS)}
PREFILL_S = 3.0  # the partition holds this much load before it moves
READ_TIMEOUT_S = 30.0
ADMIN_TIMEOUT_MS = 30_000


class Move:
    """One scenario's cluster, workload and history, with what a scenario does to them."""

    def __init__(self, data_dir: Path, state: ClusterState, topic: str, history: History):
        self.data_dir = data_dir
        self.state = state
        self.topic = topic
        self.tp = TopicPartition(topic, 0)
        self.history = history
        self.started_s = time.monotonic()
        self.admin = KafkaAdminClient(
            bootstrap_servers=state.bootstrap_servers, request_timeout_ms=ADMIN_TIMEOUT_MS
        )
        # Learn the cluster and the broker that takes controller requests now: later calls
        # then never depend on the paused broker answering a metadata request.
        assert self.listed() == {}

    def event(self, what: str) -> None:
        self.history.record_event(time.monotonic() - self.started_s, what)
        print(f"[{time.monotonic() - self.started_s:6.2f} s] {what}", flush=True)

    def assignment(self) -> TopicAssignment:
        """The topic znode: RS, and AR and RR while the partition moves."""
        client = KazooClient(self.state.zookeeper_connect)
        client.start(timeout=10)
        try:
            path = topic_path(self.topic)
            return TopicAssignment.decode(client.get(path)[0], path)
        finally:
            client.stop()
            client.close()

    def isr(self) -> tuple[int, ...]:
        state = cluster.partition_state(self.state, self.topic, 0)
        return tuple(state.isr) if state is not None else ()

    def reassign(self, replicas: list[int] | None) -> None:
        result = self.admin.alter_partition_reassignments({self.tp: replicas})
        assert result == {self.tp: None}, result
        self.event(f"AlterPartitionReassignments {replicas} accepted")

    def listed(self) -> dict:
        return self.admin.list_partition_reassignments()

    def signal(self, broker_id: int, signum: int) -> None:
        member = self.state.member("broker", broker_id)
        assert cluster.kill(member, signum), f"broker {broker_id} (pid {member.pid}) is gone"
        self.event(f"{signal.Signals(signum).name} broker {broker_id}")

    def wait_done(self, replicas: list[int]) -> None:
        """Until the znode holds ``replicas`` only and the ISR is exactly them."""
        wait_until(
            lambda: (
                (a := self.assignment()).partitions[0] == tuple(replicas)
                and not a.adding_replicas
                and not a.removing_replicas
                and sorted(self.isr()) == sorted(replicas)
            ),
            f"{self.topic}-0 on {replicas} with a full ISR",
        )
        assert self.listed() == {}
        self.event(f"{self.topic}-0 is on {replicas}, ISR {list(self.isr())}")

    def wait_gone(self, brokers: list[int]) -> None:
        """Until no log dir of ``brokers`` holds the partition (or its renamed leftover)."""

        def leftovers() -> list[Path]:
            return [
                d
                for b in brokers
                for log_dir in cluster.broker_log_dirs(self.state.member("broker", b))
                for d in log_dir.glob(f"{self.topic}-0*")
            ]

        wait_until(lambda: not leftovers(), f"the logs of {self.topic}-0 gone from {brokers}")
        self.event(f"no log of {self.topic}-0 left on brokers {brokers}")


def six_brokers(data_dir: Path) -> contextlib.AbstractContextManager[ClusterState]:
    """``odradek local up`` with six brokers and two controllers, stopped by pid at the end."""
    return running_cluster(
        data_dir,
        BROKERS,
        broker_overrides=BROKER_OVERRIDES,
        controller_overrides=CONTROLLER_OVERRIDES,
    )


def run_move(data_dir: Path, name: str, scenario: Callable[[Move], list[int]]) -> None:
    """Cluster, topic on 1,2,3, load, ``scenario`` (returns the final replicas), full read;
    then the checker and the replica comparison of the final replicas."""
    topic = f"reassign-{name}"
    config = WorkloadConfig(
        topic, partitions=1, records_per_s=250, value_bytes=512, duration_s_max=120.0
    )
    history = History(0, replay=f"pytest -k {name}")
    with six_brokers(data_dir) as state:
        described = create_topic(
            state.bootstrap_servers,
            config,
            replica_assignment=[ORIGINAL],
            topic_config={"min.insync.replicas": "2"},
        )
        assert described["replicas"] == {0: tuple(ORIGINAL)}
        move = Move(data_dir, state, topic, history)
        producers = Producers(state.bootstrap_servers, history, config, move.started_s)
        producers.start()
        move.event("producing")
        try:
            time.sleep(PREFILL_S)
            final = scenario(move)
            time.sleep(1.5)  # producing on the final replicas
        finally:
            producers.stop()
            move.admin.close()
        move.event(f"stopped producing after {sum(producers.sent)} records")
        gone = sorted(set(ORIGINAL + TARGET) - set(final))
        move.wait_gone(gone)
        ends = read_all(state.bootstrap_servers, history, config, READ_TIMEOUT_S)
        move.event(f"read to the end: {ends}")
        members = {m.id: m for m in state.members if m.role == "broker"}
    analysis = analyze(history)
    print(analysis.report(), flush=True)
    comparison = compare_replicas(
        topic,
        0,
        [read_replica(b, cluster.broker_log_dirs(members[b]), topic, 0) for b in final],
        high_watermark=ends.get(0),
        all_in_sync=True,
    )
    print(comparison.report(), flush=True)
    assert analysis.valid, analysis.report()
    assert comparison.identical, comparison.report()
    acked_end = max((a.offset + 1 for a in history.acks if a.offset is not None), default=0)
    assert acked_end > 0, "nothing was acknowledged: the load never ran"
    assert comparison.bound >= acked_end, (comparison.bound, acked_end)


# --- the scenarios ----------------------------------------------------------------------------


def move_everything(move: Move) -> list[int]:
    move.reassign(TARGET)
    move.wait_done(TARGET)
    return TARGET


def cancel_in_the_middle(move: Move) -> list[int]:
    move.signal(SLOW, signal.SIGSTOP)
    try:
        move.reassign(TARGET)
        listed = move.listed()
        assert listed == {
            move.tp: {
                "replicas": TARGET + ORIGINAL,
                "adding_replicas": TARGET,
                "removing_replicas": ORIGINAL,
            }
        }, listed
        wait_until(lambda: {4, 5} <= set(move.isr()), "brokers 4 and 5 in the ISR")
        move.event(f"ISR {list(move.isr())}: broker {SLOW} is behind, the move is half done")
        move.reassign(None)  # cancel
    finally:
        move.signal(SLOW, signal.SIGCONT)
    move.wait_done(ORIGINAL)
    return ORIGINAL


def kill_the_controller_in_the_middle(move: Move) -> list[int]:
    move.signal(SLOW, signal.SIGSTOP)
    try:
        move.reassign(TARGET)
        wait_until(lambda: {4, 5} <= set(move.isr()), "brokers 4 and 5 in the ISR")
        active = wait_until(lambda: cluster.active_controller(move.state), "an active controller")
        member = move.state.member("controller", active)
        assert cluster.kill(member, signal.SIGKILL)
        wait_until(lambda: not pid_alive(member.pid), f"controller {active} gone")
        move.event(f"SIGKILL controller {active}")
        # Nobody can finish it now but the next controller: the znode still says "moving".
        assert move.assignment().adding_replicas == {0: tuple(TARGET)}
        time.sleep(1.0)
    finally:
        move.signal(SLOW, signal.SIGCONT)
    successor = wait_until(
        lambda: (c := cluster.active_controller(move.state)) not in (None, active) and c,
        "another active controller",
    )
    move.event(f"controller {successor} is active")
    move.wait_done(TARGET)
    return TARGET


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_a_busy_partition_moves_from_1_2_3_to_4_5_6(tmp_path):
    run_move(tmp_path, "move", move_everything)


@pytest.mark.timeout(240)
def test_a_reassignment_cancelled_in_the_middle_goes_back(tmp_path):
    run_move(tmp_path, "cancel", cancel_in_the_middle)


@pytest.mark.timeout(240)
def test_a_second_controller_finishes_a_reassignment_after_kill_9(tmp_path):
    run_move(tmp_path, "failover", kill_the_controller_in_the_middle)
