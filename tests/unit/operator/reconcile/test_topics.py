"""Topics: the diff between an OdradekTopic and the cluster, refusals, drift reverted, and the
resource's status."""

from __future__ import annotations

import asyncio
import copy

import pytest

from odradek_operator.model.spec.topic import TopicSpec
from odradek_operator.reconcile import topics
from odradek_operator.reconcile.admin import AdminRefused
from odradek_operator.reconcile.status import Refused, Retry
from odradek_operator.reconcile.topics import TopicActual, topic_diff
from support.operator_doubles import FakeAdmin, FakeKube, pod, view


def spec(partitions=3, rf=2, config=None, name="orders"):
    return TopicSpec("orders", "ns", "demo", name, partitions, rf, config or {})


def test_missing_topic_is_created():
    assert topic_diff(spec(), None).create


def test_in_sync_topic_needs_nothing():
    actual = TopicActual(3, 2, {"retention.ms": "1000"})
    assert topic_diff(spec(config={"retention.ms": "1000"}), actual).empty


def test_partitions_grow_and_never_shrink():
    assert topic_diff(spec(partitions=6), TopicActual(3, 2, {})).grow_to == 6
    with pytest.raises(Refused) as refused:
        topic_diff(spec(partitions=2), TopicActual(3, 2, {}), applied_partitions=3)
    assert refused.value.reason == "PartitionDecreaseRefused"


def test_partitions_added_outside_are_kept_and_config_still_repaired():
    actual = TopicActual(5, 2, {"retention.ms": "5"})
    diff = topic_diff(spec(partitions=3, config={"retention.ms": "9"}), actual, 3)
    assert (diff.extra_partitions, diff.grow_to) == (2, None)
    assert diff.set_config == {"retention.ms": "9"}


def test_sync_reports_partitions_added_outside_and_reverts_drift():
    kube, admin = world()
    asyncio.run(topics.sync_topic(kube, lambda b: admin, body(config={"retention.ms": 9})))
    written = kube.find("OdradekTopic", "orders")
    assert written["status"]["appliedPartitions"] == 3
    admin.cluster_view = view({("orders", p): [0, 1] for p in range(5)}, range(2))
    admin.configs["orders"]["retention.ms"] = ("1", True)
    again = {**body(config={"retention.ms": 9}), "status": written["status"]}
    status = asyncio.run(topics.sync_topic(kube, lambda b: admin, again, periodic=True))
    assert admin.calls[-1] == ("alter_topic_config", "orders", {"retention.ms": "9"}, ())
    assert status["partitions"] == 5
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Error"]["status"] == "False"
    assert conditions["Ready"]["status"] == "True"
    assert "2 more than spec.partitions" in conditions["Ready"]["message"]


def test_replication_factor_change_is_refused():
    with pytest.raises(Refused) as refused:
        topic_diff(spec(rf=3), TopicActual(3, 2, {}))
    assert refused.value.reason == "ReplicationFactorChangeRefused"


def test_config_drift_is_reverted():
    actual = TopicActual(3, 2, {"retention.ms": "5", "cleanup.policy": "compact"})
    diff = topic_diff(spec(config={"retention.ms": "1000"}), actual)
    assert diff.set_config == {"retention.ms": "1000"}
    assert diff.delete_config == ("cleanup.policy",)


def test_the_min_insync_replicas_brokers_fit_to_the_replication_factor_is_not_drift():
    """Issue 21 item 14: brokers store min.insync.replicas = RF for a topic whose inherited
    default is larger; deleting it would only have it stored again, a revert every pass."""
    fitted = TopicActual(3, 1, {"min.insync.replicas": "1"})
    assert topic_diff(spec(rf=1), fitted).empty
    other = TopicActual(3, 2, {"min.insync.replicas": "1"})  # not the RF: set by someone
    assert topic_diff(spec(rf=2), other).delete_config == ("min.insync.replicas",)
    named = topic_diff(spec(rf=1, config={"min.insync.replicas": "1"}), fitted)
    assert named.empty


def body(partitions=3, config=None, name="orders"):
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekTopic",
        "metadata": {"name": name, "namespace": "ns", "generation": 2},
        "spec": {
            "cluster": "demo",
            "partitions": partitions,
            "replicationFactor": 2,
            "config": config or {},
        },
    }


def world():
    kube = FakeKube()
    kube.put(
        {"kind": "OdradekCluster", "metadata": {"name": "demo", "namespace": "ns"}, "spec": {}}
    )
    kube.put(body())
    for i in range(2):
        kube.put(pod(f"demo-broker-{i}"))
    admin = FakeAdmin(view({}, range(2)))
    return kube, admin


def test_sync_creates_and_writes_status():
    kube, admin = world()
    seen = []

    def admin_for(bootstrap):
        seen.append(bootstrap)
        return admin

    status = asyncio.run(topics.sync_topic(kube, admin_for, body(config={"retention.ms": 9})))
    assert seen == ["127.0.1.1:9092,127.0.1.2:9092"]
    assert admin.calls[0] == ("create_topic", "orders", 3, 2, {"retention.ms": "9"})
    assert status["partitions"] == 3 and status["config"] == {"retention.ms": "9"}
    written = kube.find("OdradekTopic", "orders")["status"]
    ready = next(c for c in written["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Created")
    assert written["observedGeneration"] == 2


def test_periodic_pass_reports_drift():
    kube, admin = world()
    asyncio.run(topics.sync_topic(kube, lambda b: admin, body(config={"retention.ms": 9})))
    admin.configs["orders"]["retention.ms"] = ("1", True)  # changed behind our back
    asyncio.run(
        topics.sync_topic(kube, lambda b: admin, body(config={"retention.ms": 9}), periodic=True)
    )
    assert admin.calls[-1] == ("alter_topic_config", "orders", {"retention.ms": "9"}, ())
    ready = next(
        c
        for c in kube.find("OdradekTopic", "orders")["status"]["conditions"]
        if c["type"] == "Ready"
    )
    assert ready["reason"] == "DriftReverted" and "retention.ms" in ready["message"]


def test_invalid_config_is_a_condition_not_a_crash():
    kube, admin = world()
    with pytest.raises(Refused) as refused:
        asyncio.run(topics.sync_topic(kube, lambda b: admin, body(config={"no.such.key": 1})))
    assert refused.value.reason == "InvalidConfig"
    admin.refuse = AdminRefused("INVALID_CONFIG: retention.ms")
    with pytest.raises(Refused) as refused:
        asyncio.run(topics.sync_topic(kube, lambda b: admin, body()))
    error = next(
        c
        for c in kube.find("OdradekTopic", "orders")["status"]["conditions"]
        if c["type"] == "Error"
    )
    assert (error["status"], error["reason"]) == ("True", "InvalidConfig")


def test_missing_cluster_is_retried():
    kube, admin = world()
    del kube.objects["OdradekCluster", "ns", "demo"]
    with pytest.raises(Retry) as retry:
        asyncio.run(topics.sync_topic(kube, lambda b: admin, body()))
    assert retry.value.reason == "ClusterNotFound"


def test_delete_removes_the_topic_unless_the_cluster_is_gone():
    kube, admin = world()
    asyncio.run(topics.sync_topic(kube, lambda b: admin, body()))
    asyncio.run(topics.delete_topic(kube, lambda b: admin, body()))
    assert admin.calls[-1] == ("delete_topic", "orders")
    del kube.objects["OdradekCluster", "ns", "demo"]
    message = asyncio.run(topics.delete_topic(kube, lambda b: admin, body()))
    assert "gone" in message


@pytest.mark.parametrize("value", ["9" * 5000, 10**5000], ids=["string", "integer"])
def test_an_integer_of_5000_digits_is_refused_in_status(value):
    kube, admin = world()
    with pytest.raises(Refused) as refused:
        asyncio.run(topics.sync_topic(kube, lambda b: admin, body(config={"retention.ms": value})))
    assert refused.value.reason == "InvalidConfig"
    assert len(str(refused.value)) < 500  # the value is quoted cut short
    error = next(
        c
        for c in kube.find("OdradekTopic", "orders")["status"]["conditions"]
        if c["type"] == "Error"
    )
    assert (error["status"], error["reason"]) == ("True", "InvalidConfig")
    assert admin.calls == []


def rival(name="orders-copy", topic="orders", created="2026-12-02T10:00:01Z"):
    other = body(name=name, config={"retention.ms": 5})
    other["spec"]["topicName"] = topic
    other["metadata"]["creationTimestamp"] = created
    return other


def test_the_oldest_resource_owns_a_topic_and_a_rival_never_touches_it():
    kube, admin = world()
    kube.objects["OdradekTopic", "ns", "orders"]["metadata"]["creationTimestamp"] = (
        "2026-12-02T10:00:00Z"
    )
    asyncio.run(topics.sync_topic(kube, lambda b: admin, body()))
    kube.put(rival())
    calls = len(admin.calls)
    with pytest.raises(Refused) as refused:
        asyncio.run(topics.sync_topic(kube, lambda b: admin, rival()))
    assert refused.value.reason == "ResourceConflict"
    assert "managed by OdradekTopic orders" in str(refused.value)
    message = asyncio.run(topics.delete_topic(kube, lambda b: admin, rival()))
    assert "left alone" in message and len(admin.calls) == calls


def test_a_rival_created_in_the_owners_second_does_not_take_over():
    """creationTimestamp has one-second resolution: the resource already managing the topic
    keeps it, though a rival of the same second sorts first by name."""
    kube, admin = world()
    kube.objects["OdradekTopic", "ns", "orders"]["metadata"]["creationTimestamp"] = (
        "2026-12-02T10:00:00Z"
    )
    asyncio.run(topics.sync_topic(kube, lambda b: admin, body()))
    early = rival(name="aaa-orders", created="2026-12-02T10:00:00Z")
    kube.put(early)
    calls = len(admin.calls)
    with pytest.raises(Refused) as refused:
        asyncio.run(topics.sync_topic(kube, lambda b: admin, early))
    assert refused.value.reason == "ResourceConflict" and len(admin.calls) == calls
    assert "managed by OdradekTopic orders" in str(refused.value)


def test_a_changed_topic_name_is_refused_and_deletion_deletes_the_managed_topic():
    kube, admin = world()
    asyncio.run(topics.sync_topic(kube, lambda b: admin, body()))
    renamed = copy.deepcopy(kube.find("OdradekTopic", "orders"))
    renamed["spec"]["topicName"] = "orders-v2"
    kube.put(renamed)
    with pytest.raises(Refused) as refused:
        asyncio.run(topics.sync_topic(kube, lambda b: admin, renamed))
    assert refused.value.reason == "TopicNameChangeRefused"
    invalid = copy.deepcopy(kube.find("OdradekTopic", "orders"))
    invalid["spec"]["partitions"] = 0
    kube.put(invalid)
    with pytest.raises(Refused):
        asyncio.run(topics.sync_topic(kube, lambda b: admin, invalid))
    asyncio.run(topics.delete_topic(kube, lambda b: admin, kube.find("OdradekTopic", "orders")))
    assert admin.calls[-1] == ("delete_topic", "orders")
