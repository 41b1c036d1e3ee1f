"""Scaling: up then one rebalance; down refused below a topic's replication factor, else each
departing broker drained (highest first) before the StatefulSet shrinks."""

from __future__ import annotations

import asyncio

import pytest

from odradek_operator.reconcile import scaling
from odradek_operator.reconcile.status import Refused
from odradek_operator.reconcile.world import pod_state
from support.operator_doubles import FakeAdmin, FakeKube, pod, statefulset, view


def run(kube, admin, replicas, wanted, operation=None, pods=None, delete_claims=False):
    kube.put(statefulset("demo-broker", replicas))
    sts = kube.find("StatefulSet", "demo-broker")
    pods = [pod_state(pod(f"demo-broker-{i}")) for i in range(pods or replicas)]
    return asyncio.run(
        scaling.scale(kube, admin, sts, pods, wanted, operation, delete_claims=delete_claims)
    )


def test_scale_up_raises_replicas_then_rebalances_once():
    kube, admin = FakeKube(), FakeAdmin(view({("t", 0): (0, 1, 2)}, range(3)))
    step = run(kube, admin, 3, 5)
    assert not step.done and step.operation["type"] == "ScaleUp"
    assert step.operation["brokers"] == [3, 4]
    assert kube.find("StatefulSet", "demo-broker")["spec"]["replicas"] == 5
    # New pods ready, brokers registered: one rebalance.
    admin.cluster_view = view({("t", 0): (0, 1, 2)}, range(5))
    step = run(kube, admin, 5, 5, step.operation)
    assert admin.calls == [("rebalance",)] and step.operation["rebalanced"]
    admin.moving = 2
    step = run(kube, admin, 5, 5, step.operation)
    assert not step.done and step.reason == "Rebalancing" and admin.calls == [("rebalance",)]
    admin.moving = 0
    assert run(kube, admin, 5, 5, step.operation).done


def test_scale_up_waits_for_new_brokers_to_register():
    kube, admin = FakeKube(), FakeAdmin(view({("t", 0): (0, 1, 2)}, range(3)))
    op = {"type": "ScaleUp", "brokers": [3, 4]}
    step = run(kube, admin, 5, 5, op)
    assert step.reason == "WaitingForBrokers" and admin.calls == []


def test_scale_down_below_replication_factor_is_refused():
    kube, admin = FakeKube(), FakeAdmin(view({("orders", 0): (0, 1, 2)}, range(3)))
    with pytest.raises(Refused) as refused:
        run(kube, admin, 3, 2)
    assert refused.value.reason == "ScaleDownBelowReplicationFactor"
    assert "orders" in str(refused.value)
    assert kube.find("StatefulSet", "demo-broker")["spec"]["replicas"] == 3


def test_scale_down_drains_the_departing_brokers_together_then_shrinks():
    assignment = {("t", 0): (0, 4, 3), ("t", 1): (1, 3, 2), ("t", 2): (2, 0, 1)}
    kube, admin = FakeKube(), FakeAdmin(view(assignment, range(5)))
    step = run(kube, admin, 5, 3)
    assert admin.calls == [("drain", [4, 3])] and step.reason == "Draining"
    assert step.operation["type"] == "ScaleDown" and step.operation["brokers"] == [4, 3]
    admin.moving = 1
    step = run(kube, admin, 5, 3, step.operation)
    assert admin.calls == [("drain", [4, 3])]  # waits for the running drain
    admin.moving = 0
    admin.cluster_view = view(
        {("t", 0): (0, 1, 3), ("t", 1): (1, 3, 2), ("t", 2): (2, 0, 1)}, range(5)
    )
    step = run(kube, admin, 5, 3, step.operation)
    assert admin.calls[-1] == ("drain", [4, 3])  # broker 3 still holds t-1
    assert kube.find("StatefulSet", "demo-broker")["spec"]["replicas"] == 5
    admin.cluster_view = view({("t", 0): (0, 1, 2)}, range(5))
    step = run(kube, admin, 5, 3, step.operation)
    assert kube.find("StatefulSet", "demo-broker")["spec"]["replicas"] == 3
    assert kube.deleted("PersistentVolumeClaim") == []  # claims kept by default
    # Pods still stopping, then done.
    assert not run(kube, admin, 3, 3, step.operation, pods=4).done
    assert run(kube, admin, 3, 3, step.operation, pods=3).done


def test_scale_down_deletes_claims_only_when_asked():
    kube, admin = FakeKube(), FakeAdmin(view({("t", 0): (0, 1)}, range(3)))
    run(kube, admin, 3, 2, delete_claims=True)
    assert kube.deleted("PersistentVolumeClaim") == ["data-0-demo-broker-2"]


def test_scale_up_is_announced_before_the_statefulset_grows():
    kube, admin = FakeKube(), FakeAdmin(view({("t", 0): (0, 1, 2)}, range(3)))
    kube.put(statefulset("demo-broker", 3))
    order = []

    async def announce(op):
        order.append(
            ("announce", op["type"], kube.find("StatefulSet", "demo-broker")["spec"]["replicas"])
        )

    sts = kube.find("StatefulSet", "demo-broker")
    pods = [pod_state(pod(f"demo-broker-{i}")) for i in range(3)]
    asyncio.run(scaling.scale(kube, admin, sts, pods, 5, None, announce=announce))
    assert order == [("announce", "ScaleUp", 3)]
    assert kube.find("StatefulSet", "demo-broker")["spec"]["replicas"] == 5


def test_a_statefulset_is_created_with_the_brokers_there_are_never_fewer():
    """Re-created (volumes changed, or deleted by hand): the count of the pods still there, or
    of the brokers Metadata shows holding replicas; the spec's count only for a new cluster."""
    pods = [pod_state(pod(f"demo-broker-{i}")) for i in range(5)]
    live = asyncio.run(scaling.live_replicas(None, pods, None, 3))
    assert live == 5
    admin = FakeAdmin(view({("t", 0): (0, 1, 4)}, range(3)))  # broker 4's pod is gone
    three = [pod_state(pod(f"demo-broker-{i}")) for i in range(3)]
    assert asyncio.run(scaling.live_replicas(None, three, admin, 3)) == 5
    assert asyncio.run(scaling.live_replicas(None, [], None, 3)) == 3
    assert asyncio.run(scaling.live_replicas(statefulset("demo-broker", 4), pods, None, 3)) == 4
