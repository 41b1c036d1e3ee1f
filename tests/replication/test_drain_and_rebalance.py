"""Proves, with real processes under continuous acks=all load, that Odradek's built-in drain and
rebalance (``odradek.ops``, what ``odradek cluster drain|rebalance`` and the operator call) lose
nothing: a broker drained, throttled, then removed from the cluster; and a cluster of three
brokers on two racks rebalanced, throttled, after two brokers joined (one on each rack).

Each scenario starts ZooKeeper, two controllers and its brokers (``odradek local up``), creates
a topic with the cluster's defaults (3 replicas, ``min.insync.replicas`` 2), runs the proof's
workload (``proof.workload``: two idempotent ``acks=all`` producers, continuously) before,
during and after the operation, which runs through the library exactly as the CLI runs it:
prepare (read, plan, size), execute with a throttle, watch until done, elect the planned
preferred leaders. Then: the placement is what the operation promises (the drained broker holds
and leads nothing and is stopped and forgotten; after the rebalance every broker holds an even
share of replicas and leaders, and every partition spans both racks), the history checker
finds nothing lost, duplicated or reordered, and every partition's final replicas are identical
byte for byte up to the high watermark.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from proof.checker import History, analyze
from proof.clusters import running_cluster, wait_until
from proof.replicas import compare_replicas, read_replica
from proof.workload import Producers, WorkloadConfig, create_topic, read_all

from odradek import ops
from odradek.client.admin import ClusterClient
from odradek.local import cluster
from odradek.local.cluster import ClusterState

pytestmark = [pytest.mark.integration, pytest.mark.fault]

PARTITIONS = 6
SESSION_TIMEOUT_MS = 10_000
BROKER_OVERRIDES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": "5000",
}
CONTROLLER_OVERRIDES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    # The controller's own rebalance would move leaders behind the test's back.
    "auto.leader.rebalance.enable": "false",
}
THROTTLE_BYTES_PER_S = 2_000_000  # well above the load (~250 KB/s), so moves finish in seconds
PREFILL_S = 3.0
AFTER_S = 1.5  # producing on the final placement
WATCH_TIMEOUT_S = 90.0
READ_TIMEOUT_S = 30.0


def reassignment_bytes_in(member: cluster.Member) -> float:
    """The broker's ``odradek_broker_reassignment_bytes_in_total``."""
    with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "odradek_broker_reassignment_bytes_in"
        for sample in family.samples
        if sample.name.endswith("_total")
    )


class Operation:
    """One scenario's cluster, topic and history."""

    def __init__(self, data_dir: Path, state: ClusterState, topic: str, history: History):
        self.data_dir = data_dir
        self.state = state
        self.topic = topic
        self.history = history
        self.started_s = time.monotonic()

    def event(self, what: str) -> None:
        self.history.record_event(time.monotonic() - self.started_s, what)
        print(f"[{time.monotonic() - self.started_s:6.2f} s] {what}", flush=True)

    @property
    def bootstrap(self) -> str:
        return self.state.bootstrap_servers

    def view(self) -> ops.ClusterView:
        async def read() -> ops.ClusterView:
            async with ClusterClient(self.bootstrap) as client:
                return await ops.cluster.read_cluster(client)

        return asyncio.run(read())

    def partitions(self) -> dict[int, ops.PartitionInfo]:
        view = self.view()
        return {p.partition: p for p in view.partitions.values() if p.topic == self.topic}

    def run(self, prepared: ops.PreparedPlan, what: str) -> None:
        """Execute throttled, watch until done, elect the planned leaders: the CLI's steps."""
        plan = prepared.plan
        self.event(
            f"{what}: {len(plan)} partitions, {plan.replica_moves} replica moves, "
            f"{prepared.bytes_to_move} bytes"
        )
        throttled = asyncio.run(ops.execute(self.bootstrap, plan, THROTTLE_BYTES_PER_S))
        self.event(f"executing, throttled on brokers {throttled}")
        report = asyncio.run(ops.watch(self.bootstrap, plan, timeout_s=WATCH_TIMEOUT_S))
        assert report.finished, report
        self.event("reassignments done, throttles cleared")
        wait_until(
            lambda: not asyncio.run(ops.elect_preferred_leaders(self.bootstrap, plan.targets())),
            "the planned preferred leaders elected",
        )
        self.event("preferred leaders elected")


def run_operation(
    data_dir: Path,
    name: str,
    brokers: int,
    operation: Callable[[Operation], None],
    **options,
) -> None:
    topic = f"ops-{name}"
    config = WorkloadConfig(
        topic, partitions=PARTITIONS, records_per_s=250, value_bytes=512, duration_s_max=150.0
    )
    history = History(0, replay=f"pytest -k {name}")
    with running_cluster(
        data_dir,
        brokers,
        broker_overrides=BROKER_OVERRIDES,
        controller_overrides=CONTROLLER_OVERRIDES,
        **options,
    ) as state:
        described = create_topic(state.bootstrap_servers, config)
        assert {len(r) for r in described["replicas"].values()} == {3}
        op = Operation(data_dir, state, topic, history)
        producers = Producers(state.bootstrap_servers, history, config, op.started_s)
        producers.start()
        op.event("producing")
        try:
            time.sleep(PREFILL_S)
            operation(op)
            time.sleep(AFTER_S)
        finally:
            producers.stop()
        op.event(f"stopped producing after {sum(producers.sent)} records")
        final = wait_until(
            lambda: (
                (p := op.partitions())
                and all(set(i.isr) == set(i.replicas) for i in p.values())
                and p
            ),
            "every ISR full",
        )
        ends = read_all(op.bootstrap, history, config, READ_TIMEOUT_S)
        op.event(f"read to the end: {ends}")
        members = {m.id: m for m in (ClusterState.read(data_dir) or state).members}
    analysis = analyze(history)
    print(analysis.report(), flush=True)
    comparisons = [
        compare_replicas(
            topic,
            partition,
            [
                read_replica(b, cluster.broker_log_dirs(members[b]), topic, partition)
                for b in info.replicas
            ],
            high_watermark=ends.get(partition),
            all_in_sync=True,
        )
        for partition, info in sorted(final.items())
    ]
    for comparison in comparisons:
        print(comparison.report(), flush=True)
    assert analysis.valid, analysis.report()
    assert all(c.identical for c in comparisons), "\n".join(c.report() for c in comparisons)
    acked_end = Counter()
    for ack in history.acks:
        if ack.offset is not None:
            acked_end[ack.partition] = max(acked_end[ack.partition], ack.offset + 1)
    assert sum(acked_end.values()) > 0, "nothing was acknowledged: the load never ran"
    uncovered = {c.partition: c.bound for c in comparisons if c.bound < acked_end[c.partition]}
    assert not uncovered, f"replicas compared below acknowledged offsets: {uncovered}"


def _all_in_sync(partitions: dict[int, ops.PartitionInfo]) -> dict[int, ops.PartitionInfo]:
    """``partitions`` if every ISR holds every replica; else empty (falsy)."""
    if all(set(p.isr) == set(p.replicas) for p in partitions.values()):
        return partitions
    return {}


# --- the scenarios ----------------------------------------------------------------------------


def drain_then_remove(op: Operation, broker_id: int = 4) -> None:
    before = op.partitions()
    assert any(broker_id in p.replicas for p in before.values()), "nothing to drain"
    prepared = asyncio.run(ops.prepare_drain(op.bootstrap, broker_id))
    op.run(prepared, f"drain broker {broker_id}")
    after = op.partitions()
    assert not [p for p in after.values() if broker_id in p.replicas], after
    assert not [p for p in after.values() if p.leader == broker_id], after
    counts = Counter(b for p in after.values() for b in p.replicas)
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    gained = {b for n, p in after.items() for b in p.replicas if b not in before[n].replicas}
    received = {b: reassignment_bytes_in(op.state.member("broker", b)) for b in gained}
    assert gained and all(received.values()), f"bytes moved, as counted: {received}"
    cluster.stop_broker(op.data_dir, broker_id, forget=True)
    op.state = ClusterState.read(op.data_dir) or op.state
    op.event(f"broker {broker_id} stopped and removed; replicas per broker {dict(counts)}")


def rebalance_after_adding_two(op: Operation) -> None:
    for rack in ("b", "a"):
        member = cluster.add_broker(op.data_dir, rack=rack)
        op.event(f"broker {member.id} joined on rack {rack}")
    op.state = ClusterState.read(op.data_dir) or op.state
    prepared = asyncio.run(ops.prepare_rebalance(op.bootstrap))
    op.run(prepared, "rebalance")
    view = op.view()
    racks = {b.id: b.rack for b in view.brokers.values()}
    after = op.partitions()
    replicas = Counter(b for p in after.values() for b in p.replicas)
    leaders = Counter(p.leader for p in after.values())
    op.event(f"replicas per broker {dict(replicas)}, leaders {dict(leaders)}")
    assert set(replicas) == set(racks) == {1, 2, 3, 4, 5}, (replicas, racks)
    assert max(replicas.values()) - min(replicas.values()) <= 1, replicas  # 18 over 5
    assert max(leaders.values()) <= 2 and len(leaders) >= 3, leaders  # 6 over 5
    assert all(len({racks[b] for b in p.replicas}) == 2 for p in after.values()), after


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_a_drained_broker_is_removed_without_losing_a_record(tmp_path):
    run_operation(tmp_path, "drain", 4, drain_then_remove)


@pytest.mark.timeout(300)
def test_a_rebalance_after_two_brokers_joined_loses_nothing(tmp_path):
    run_operation(
        tmp_path, "rebalance", 3, rebalance_after_adding_two, racks={1: "a", 2: "b", 3: "a"}
    )
