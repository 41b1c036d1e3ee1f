"""Proves, with real processes, that a record acknowledged with acks=all survives kill -9, a
paused (zombie) leader, a cut network and a torn log tail, and that all replicas end identical.

Each scenario starts ZooKeeper, two controllers and three brokers (``odradek local up`` with its
defaults: new topics get 3 replicas and ``min.insync.replicas`` 2), creates a topic, runs the
workload (``proof.workload``: two idempotent ``acks=all`` producers, continuously), does its
fault while they produce, heals it (killed brokers restart), waits for a full ISR, reads every
partition to its end, stops the cluster, and then judges: the history checker
(``proof.checker``) must find nothing lost, duplicated, reordered or inconsistent, and every
replica's segment files must be identical up to the high watermark (``proof.replicas``), which
must cover every acknowledged offset.

The seed picks the timings and the victims. It is printed first; a failing run repeats with
``ODRADEK_FAULT_SEEDS=<seed>``. CI runs seed 1 (the suite's time budget); ``make soak`` runs more
(``ODRADEK_FAULT_SEEDS="1 2 3 ..."``).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from proof.checker import History, analyze
from proof.clusters import running_cluster, wait_until
from proof.replicas import compare_replicas, read_replica
from proof.workload import Producers, WorkloadConfig, create_topic, read_all

from odradek.local import cluster
from odradek.local.cluster import ClusterState, pid_alive
from support.netns import NetworkNamespace, can_make_namespaces

pytestmark = [pytest.mark.integration, pytest.mark.fault]

SEEDS = [int(s) for s in os.environ.get("ODRADEK_FAULT_SEEDS", "1").split()]

PARTITIONS = 3
BROKERS = 3
SESSION_TIMEOUT_MS = 6_000  # brokers' and controllers' ZooKeeper sessions: a death shows in 6 s
BROKER_OVERRIDES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": "5000",  # a dead follower leaves the ISR within 5 s
}
CONTROLLER_OVERRIDES = {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
READ_TIMEOUT_S = 30.0
ISR_WAIT_S = 10.0  # restarted followers catch up within replica.lag.time.max.ms and a fetch


@dataclass
class Run:
    """One scenario's cluster, workload and history; the fault functions act through it."""

    seed: int
    rng: random.Random
    data_dir: Path
    state: ClusterState
    history: History
    topic: str
    brokers: int = BROKERS
    started_s: float = field(default_factory=time.monotonic)

    def event(self, what: str) -> None:
        self.history.record_event(time.monotonic() - self.started_s, what)
        print(f"[{time.monotonic() - self.started_s:6.2f} s] {what}", flush=True)

    def pause(self, low_s: float, high_s: float) -> None:
        time.sleep(self.rng.uniform(low_s, high_s))

    def leader(self, partition: int) -> int:
        return wait_until(
            lambda: (
                (s := cluster.partition_state(self.state, self.topic, partition))
                and s.leader >= 0
                and s.leader
            ),
            f"a leader for partition {partition}",
        )

    def broker(self, broker_id: int) -> cluster.Member:
        return self.state.member("broker", broker_id)

    def signal(self, broker_id: int, signum: int) -> None:
        member = self.broker(broker_id)
        assert cluster.kill(member, signum), f"broker {broker_id} (pid {member.pid}) is gone"
        self.event(f"{signal.Signals(signum).name} broker {broker_id} (pid {member.pid})")

    def kill(self, broker_id: int) -> None:
        member = self.broker(broker_id)
        self.signal(broker_id, signal.SIGKILL)
        wait_until(lambda: not pid_alive(member.pid), f"broker {broker_id} gone")

    def restart(self, broker_id: int) -> None:
        member = cluster.restart_broker(self.data_dir, broker_id)
        self.state = cluster.ClusterState.read(self.data_dir)
        self.event(f"restarted broker {broker_id} (pid {member.pid})")

    def wait_for_new_leader(self, partition: int, old: int) -> int:
        leader = wait_until(
            lambda: (
                (s := cluster.partition_state(self.state, self.topic, partition))
                and s.leader not in (-1, old)
                and s.leader
            ),
            f"partition {partition} led by another broker than {old}",
        )
        self.event(f"partition {partition} now led by broker {leader}")
        return leader


def run_scenario(
    data_dir: Path,
    seed: int,
    fault: Callable[[Run], None],
    *,
    brokers: int = BROKERS,
    cluster_options: dict | None = None,
    duration_s_max: float = 45.0,
) -> None:
    """Cluster, topic, workload, ``fault``, heal, full read; then the checker and the replicas.
    The producers stop after ``duration_s_max`` at the latest: a long fault needs it longer."""
    print(f"\nseed {seed}: repeat with ODRADEK_FAULT_SEEDS={seed}", flush=True)
    rng = random.Random(seed)
    topic = f"faults-{seed}"
    config = WorkloadConfig(topic, partitions=PARTITIONS, duration_s_max=duration_s_max)
    history = History(seed, replay=f"ODRADEK_FAULT_SEEDS={seed}")
    options = dict(cluster_options or {})
    with running_cluster(
        data_dir,
        brokers,
        broker_overrides={**BROKER_OVERRIDES, **options.pop("broker_overrides", {})},
        controller_overrides=CONTROLLER_OVERRIDES,
        **options,
    ) as state:
        described = create_topic(state.bootstrap_servers, config)
        # `odradek local up`'s defaults reach new topics: 3 replicas, min.insync.replicas 2.
        defaults = cluster.replication_defaults(brokers)
        replication_factor = int(defaults["default.replication.factor"])
        assert {len(r) for r in described["replicas"].values()} == {replication_factor}
        assert described["min.insync.replicas"] == int(defaults["min.insync.replicas"])
        run = Run(seed, rng, data_dir, state, history, topic, brokers)
        producers = Producers(state.bootstrap_servers, history, config, run.started_s)
        producers.start()
        run.event("producing")
        try:
            run.pause(1.5, 3.0)
            fault(run)
            run.pause(1.5, 2.5)  # producing on the healed cluster
        finally:
            producers.stop()
        run.event(f"stopped producing after {sum(producers.sent)} records")
        isr_missing = _wait_for_full_isr(run)
        ends = read_all(run.state.bootstrap_servers, history, config, READ_TIMEOUT_S)
        run.event(f"read to the end: {ends}")
        final_state = run.state
    analysis = analyze(history)
    print(analysis.report(), flush=True)
    comparisons = []
    for partition in range(PARTITIONS):
        replicas = [
            read_replica(m.id, cluster.broker_log_dirs(m), topic, partition)
            for m in final_state.members
            if m.role == "broker"
        ]
        comparisons.append(
            compare_replicas(
                topic,
                partition,
                replicas,
                high_watermark=ends.get(partition),
                all_in_sync=isr_missing is None,
            )
        )
        print(comparisons[-1].report(), flush=True)
    assert analysis.valid, f"seed {seed}: the history is not valid:\n{analysis.report()}"
    assert all(c.identical for c in comparisons), "\n".join(c.report() for c in comparisons)
    acked_end = {p: 0 for p in range(PARTITIONS)}
    for ack in history.acks:
        if ack.offset is not None:
            acked_end[ack.partition] = max(acked_end[ack.partition], ack.offset + 1)
    uncovered = {c.partition: c.bound for c in comparisons if c.bound < acked_end[c.partition]}
    assert not uncovered, f"replicas compared below acknowledged offsets: {uncovered} {acked_end}"
    assert isr_missing is None, isr_missing


def _wait_for_full_isr(run: Run) -> str | None:
    """Until every partition's ISR is all its replicas again (the healed cluster caught up);
    returns what was missing if that did not happen in time (judged after the checker ran)."""

    def isrs() -> dict[int, tuple[int, ...] | None]:
        states = [cluster.partition_state(run.state, run.topic, p) for p in range(PARTITIONS)]
        return {p: s and s.leader >= 0 and s.isr for p, s in enumerate(states)}

    try:
        wait_until(
            lambda: all(i and len(i) == run.brokers for i in isrs().values()), "", ISR_WAIT_S
        )
    except AssertionError:
        missing = f"no full ISR {ISR_WAIT_S} s after the faults healed: {isrs()}"
        run.event(missing)
        return missing
    run.event("every partition has a full ISR")
    return None


# --- the scenarios --------------------------------------------------------------------------


def kill_the_leader(run: Run) -> None:
    partition = run.rng.randrange(PARTITIONS)
    leader = run.leader(partition)
    run.kill(leader)
    run.wait_for_new_leader(partition, leader)
    run.pause(1.0, 3.0)
    run.restart(leader)


def kill_the_active_controller(run: Run) -> None:
    active = wait_until(lambda: cluster.active_controller(run.state), "an active controller")
    member = run.state.member("controller", active)
    assert cluster.kill(member, signal.SIGKILL)
    run.event(f"SIGKILL controller {active} (pid {member.pid})")
    successor = wait_until(
        lambda: (c := cluster.active_controller(run.state)) not in (None, active) and c,
        "another active controller",
    )
    run.event(f"controller {successor} is active")
    # The new controller must do a controller's job: move a partition's leadership.
    partition = run.rng.randrange(PARTITIONS)
    leader = run.leader(partition)
    run.kill(leader)
    run.wait_for_new_leader(partition, leader)
    run.restart(leader)


def kill_two_brokers(run: Run) -> None:
    first, second = run.rng.sample(range(1, BROKERS + 1), 2)
    run.kill(first)
    run.pause(1.0, 3.0)
    run.kill(second)  # one replica left: below min.insync.replicas, acks=all writes must fail
    run.pause(2.0, 4.0)
    for broker_id in run.rng.sample([first, second], 2):
        run.restart(broker_id)


def pause_the_leader_past_its_session(run: Run) -> None:
    partition = run.rng.randrange(PARTITIONS)
    leader = run.leader(partition)
    run.signal(leader, signal.SIGSTOP)
    try:
        run.wait_for_new_leader(partition, leader)  # its session expired: a new leader
        run.pause(1.0, 3.0)
    finally:
        run.signal(leader, signal.SIGCONT)  # a zombie: it still thinks it leads


def tear_the_log_tail(run: Run) -> None:
    partition = run.rng.randrange(PARTITIONS)
    victim = run.leader(partition)
    member = run.broker(victim)
    run.kill(victim)
    torn = 0
    for log_dir in cluster.broker_log_dirs(member):
        for partition_dir in sorted(log_dir.glob(f"{run.topic}-*")):
            segments = sorted(partition_dir.glob("*.log"), key=lambda p: int(p.stem))
            if segments:
                garbage = run.rng.randbytes(run.rng.randrange(1, 300))
                with segments[-1].open("ab") as active:
                    active.write(garbage)
                torn += 1
    run.event(f"appended garbage to the active segment of {torn} partitions of broker {victim}")
    run.wait_for_new_leader(partition, victim)
    run.restart(victim)


def cut_off_a_broker(run: Run, victim: int, namespace: NetworkNamespace) -> None:
    run.event(f"cutting broker {victim} off: its link from {namespace.name} goes down")
    namespace.cut()
    try:
        run.pause(SESSION_TIMEOUT_MS / 1000 + 1, SESSION_TIMEOUT_MS / 1000 + 3)
    finally:
        namespace.heal()
        run.event("link restored")


def no_fault(run: Run) -> None:
    run.pause(2.0, 3.0)


# --- the tests ------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_correct_log_passes_the_checker_and_the_replica_comparison(tmp_path):
    """The control: one broker, one replica, no fault. Its log is correct, so the workload,
    the final read, the checker and the comparison must all agree that nothing went wrong
    (a checker that fails everything proves nothing either)."""
    run_scenario(tmp_path, 1, no_fault, brokers=1)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("seed", SEEDS)
def test_kill_9_the_partition_leader(tmp_path, seed):
    run_scenario(tmp_path, seed, kill_the_leader)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("seed", SEEDS)
def test_kill_9_the_active_controller(tmp_path, seed):
    run_scenario(tmp_path, seed, kill_the_active_controller)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("seed", SEEDS)
def test_kill_9_two_brokers_one_after_the_other(tmp_path, seed):
    run_scenario(tmp_path, seed, kill_two_brokers)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_leader_paused_past_its_session_is_fenced(tmp_path, seed):
    run_scenario(tmp_path, seed, pause_the_leader_past_its_session)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_broker_restarted_with_a_torn_log_tail(tmp_path, seed):
    run_scenario(tmp_path, seed, tear_the_log_tail)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_broker_cut_off_by_the_network(tmp_path, seed):
    if not can_make_namespaces():
        pytest.skip("network namespaces need root and iproute2 (CI runs as root)")
    victim = random.Random(seed).randrange(1, BROKERS + 1)
    with NetworkNamespace() as namespace:
        options = {
            "host": namespace.host_address,
            "broker_netns": {victim: (namespace.name, namespace.ns_address)},
        }

        def fault(run: Run) -> None:
            cut_off_a_broker(run, victim, namespace)

        run_scenario(tmp_path, seed, fault, cluster_options=options)
