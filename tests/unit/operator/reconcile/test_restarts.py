"""Rolling restarts decide one pod at a time: unready first, never below min.insync.replicas,
the active controller last, and a pass after a restart waits for the new pod."""

from __future__ import annotations

import asyncio

from odradek_operator.reconcile import restarts
from odradek_operator.reconcile.world import pod_state
from support.operator_doubles import FakeAdmin, FakeKube, pod, statefulset, view

THREE = {("t", 0): (0, 1, 2), ("t", 1): (1, 2, 0), ("t", 2): (2, 0, 1)}


def states(*pods):
    return [pod_state(p) for p in pods]


def test_nothing_stale_is_done():
    pods = states(*(pod(f"demo-broker-{i}") for i in range(3)))
    decision = restarts.next_broker(pods, "h1", 3, view(THREE, range(3)), {"t": 2})
    assert decision.action == "done"


def test_lowest_stale_ready_broker_goes_first():
    pods = states(*(pod(f"demo-broker-{i}", config_hash="old") for i in range(3)))
    decision = restarts.next_broker(pods, "h2", 3, view(THREE, range(3)), {"t": 2})
    assert (decision.action, decision.pod) == ("restart", "demo-broker-0")
    assert decision.pending == ("demo-broker-0", "demo-broker-1", "demo-broker-2")


def test_unready_stale_pod_goes_before_ready_ones():
    pods = states(
        pod("demo-broker-0", config_hash="old"),
        pod("demo-broker-1", config_hash="old"),
        pod("demo-broker-2", config_hash="old", ready=False),
    )
    decision = restarts.next_broker(pods, "h2", 3, view(THREE, range(3)), {"t": 2})
    assert (decision.action, decision.pod) == ("restart", "demo-broker-2")


def test_manual_restart_annotation_makes_a_pod_stale():
    pods = states(pod("demo-broker-0"), pod("demo-broker-1", restart=True), pod("demo-broker-2"))
    decision = restarts.next_broker(pods, "h1", 3, view(THREE, range(3)), {"t": 2})
    assert (decision.action, decision.pod) == ("restart", "demo-broker-1")


def test_waits_for_the_restarted_pod_to_be_ready():
    pods = states(
        pod("demo-broker-0", config_hash="h2", ready=False),  # just recreated
        pod("demo-broker-1", config_hash="old"),
        pod("demo-broker-2", config_hash="old"),
    )
    decision = restarts.next_broker(pods, "h2", 3, view(THREE, range(3)), {"t": 2})
    assert (decision.action, decision.reason) == ("wait", "PodNotReady")


def test_waits_while_a_pod_is_missing_or_terminating():
    pods = states(pod("demo-broker-1", config_hash="old"), pod("demo-broker-2", config_hash="old"))
    decision = restarts.next_broker(pods, "h2", 3, view(THREE, range(3)), {"t": 2})
    assert decision.reason == "PodMissing"
    gone = pod("demo-broker-0", config_hash="old")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    pods = states(gone, pod("demo-broker-1", config_hash="old"), pod("demo-broker-2"))
    assert restarts.next_broker(pods, "h2", 3, view(THREE, range(3)), {}).reason == (
        "PodTerminating"
    )


def test_waits_for_under_replicated_partitions():
    pods = states(*(pod(f"demo-broker-{i}", config_hash="old") for i in range(3)))
    lagging = view(THREE, range(3), isr={("t", 1): (1, 2)})
    decision = restarts.next_broker(pods, "h2", 3, lagging, {"t": 1})
    assert (decision.action, decision.reason) == ("wait", "UnderReplicatedPartitions")


def test_min_isr_refusal_skips_to_a_broker_that_can_go():
    # t-0 is in sync on 0 and 1 only (of 3) with min ISR 2: neither may go; broker 2 may.
    assignment = {("t", 0): (0, 1, 2), ("u", 0): (0, 1, 2)}
    lagging = view(assignment, range(3), isr={("t", 0): (0, 1)})
    assert restarts.blocking_partitions(lagging, 0, {"t": 2, "u": 2}) == ["t-0"]
    assert restarts.blocking_partitions(lagging, 2, {"t": 2, "u": 2}) == []
    assert restarts.blocking_partitions(lagging, 0, {"t": 1}) == []


def test_a_topic_with_replication_factor_at_most_min_isr_is_ignored_and_named():
    # As Strimzi's KafkaAvailability: no restart keeps t (RF 2, min ISR 2) or v (RF 1, min ISR
    # 2) writable, so they do not block the roll; the restart names them.
    assignment = {("t", 0): (0, 1), ("u", 0): (0, 1, 2), ("v", 0): (0,)}
    pods = states(*(pod(f"demo-broker-{i}", config_hash="old") for i in range(3)))
    min_isr = {"t": 2, "u": 2, "v": 2}
    decision = restarts.next_broker(pods, "h2", 3, view(assignment, range(3)), min_isr)
    assert (decision.action, decision.pod) == ("restart", "demo-broker-0")
    assert decision.ignored == ("t", "v")
    assert "t, v" in decision.message and "min.insync.replicas" in decision.message
    assert restarts.blocking_partitions(view(assignment, range(3)), 0, min_isr) == []
    decision = restarts.next_broker(
        states(*(pod(f"demo-broker-{i}", config_hash="old" if i == 2 else "h2") for i in range(3))),
        "h2",
        3,
        view(assignment, range(3)),
        min_isr,
    )
    assert (decision.pod, decision.ignored) == ("demo-broker-2", ())


def test_active_controller_goes_last():
    pods = states(
        *(pod(f"demo-controller-{i}", config_hash="old", component="controller") for i in range(3))
    )
    decision = restarts.next_in_order(pods, "h2", 3, "controller", last=0)
    assert decision.pod == "demo-controller-1"
    only_active = states(
        pod("demo-controller-0", config_hash="old", component="controller"),
        pod("demo-controller-1", config_hash="h2", component="controller"),
    )
    decision = restarts.next_in_order(only_active, "h2", 2, "controller", last=0)
    assert decision.pod == "demo-controller-0" and "active controller" in decision.message


def test_roll_restarts_brokers_before_controllers_and_deletes_one_pod():
    kube = FakeKube()
    kube.put(statefulset("demo-broker", 3, "h2"))
    kube.put(statefulset("demo-controller", 2, "h2"))
    for i in range(3):
        kube.put(pod(f"demo-broker-{i}", config_hash="old"))
    for i in range(2):
        kube.put(pod(f"demo-controller-{i}", config_hash="old", component="controller"))
    admin = FakeAdmin(view(THREE, range(3)), {"t": {"min.insync.replicas": ("2", True)}})
    target = restarts.RollTarget("ns", "demo", {"broker": 3, "controller": 2}, 9645)

    async def no_active(pods, port):
        return None

    decision = asyncio.run(restarts.roll(kube, admin, target, no_active))
    assert decision.pod == "demo-broker-0"
    assert kube.deleted() == ["demo-broker-0"]
    # The next pass: broker 0 is missing (being recreated), so nothing else is deleted.
    decision = asyncio.run(restarts.roll(kube, admin, target, no_active))
    assert decision.reason == "PodMissing" and kube.deleted() == ["demo-broker-0"]
    # Brokers all fresh: the controllers' turn, the active one (ordinal 0) last.
    for i in range(3):
        kube.put(pod(f"demo-broker-{i}", config_hash="h2"))

    async def active_is_0(pods, port):
        return 0

    decision = asyncio.run(restarts.roll(kube, admin, target, active_is_0))
    assert decision.pod == "demo-controller-1"
