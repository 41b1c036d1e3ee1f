"""The operator end to end: kopf in-process against the test API server, the kubelet stand-in
running the pods it asks for as real processes (ZooKeeper, a controller, brokers), real clients.
One cluster shared by the tests of this module, in order: Ready and serving clients; topics
created, altered, their drift reverted and partitions added outside kept; one owner per topic
name; bad topic specs refused in status; a config change (with spec.brokers.rack turned on)
rolled one broker at a time under acks=all load losing nothing, the brokers then reporting their
node's zone as their rack; scaled 3 -> 5 -> 3 with rebalance and drain (the way down in one edit
with a JBOD volume added, so the StatefulSet is re-created: no broker leaves holding a replica);
refused changes (scale-down below a replication factor, ZooKeeper resize) observed but not
Ready; another JBOD volume added; a broker restarted although an RF=1 topic lives on it
(ignored, and named); deleted, its PVC directories kept."""

from __future__ import annotations

import asyncio
import copy
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from proof.checker import History, analyze
from proof.workload import Producers, WorkloadConfig, read_all

from odradek.client.admin import ClusterClient
from odradek.ops.cluster import read_cluster
from odradek_operator.reconcile.cluster import ClusterContext
from support.consuming import poll_messages
from support.k8s.kubelet import KubeletStandIn
from support.k8s_operator import OperatorThread, condition, operator_session, ready, wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

NAMESPACE = "e2e"
READY_TIMEOUT_S = 120.0
CLUSTER = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekCluster",
    "metadata": {"name": "demo"},
    "spec": {
        "image": "odradek:test",
        "zookeeper": {"replicas": 1, "storage": {"size": "1Gi"}},
        "controllers": {"replicas": 1},
        "brokers": {
            "replicas": 3,
            "config": {
                "min.insync.replicas": 2,
                "default.replication.factor": 3,
                "offsets.topic.num.partitions": 6,  # fewer partitions to move when scaling
            },
        },
    },
}


class Cluster:
    def __init__(self, store, kubelet: KubeletStandIn, ctx: ClusterContext) -> None:
        self.store = store
        self.kubelet = kubelet
        self.ctx = ctx
        self.operator: OperatorThread | None = None

    def start_operator(self) -> None:
        self.operator = OperatorThread(self.ctx, NAMESPACE).__enter__()

    def stop_operator(self) -> None:
        if self.operator is not None:
            self.operator.__exit__(None, None, None)
            self.operator = None

    def get(self, plural="odradekclusters", name="demo"):
        return self.store.try_get(plural, NAMESPACE, name)

    def bootstrap(self) -> str:
        pods, _ = self.store.list(
            "pods", NAMESPACE, "app.kubernetes.io/instance=demo,app.kubernetes.io/component=broker"
        )
        return ",".join(
            f"{p['status']['podIP']}:9092"
            for p in pods
            if p.get("status", {}).get("podIP") and not p["metadata"].get("deletionTimestamp")
        )

    def ready(self) -> bool:
        cluster = self.get()
        return ready(cluster) and cluster["status"]["operation"]["type"] == "Idle"

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict:
        wait_for(self.ready, timeout_s, f"cluster Ready: {self.get().get('status')}", 0.5)
        return self.get()

    def patch_spec(self, spec: dict) -> None:
        self.store.patch("odradekclusters", NAMESPACE, "demo", {"spec": spec})


@pytest.fixture(scope="module")
def cluster(kube_api, kubeconfig, tmp_path_factory):
    with operator_session(
        kube_api,
        kubeconfig,
        tmp_path_factory.mktemp("kubelet"),
        restore_env=("ODRADEK_OPERATOR_TOPIC_INTERVAL_S",),
    ) as session:
        cluster = Cluster(kube_api.store, session.kubelet, session.ctx)
        try:
            cluster.start_operator()
            kube_api.store.create("odradekclusters", NAMESPACE, copy.deepcopy(CLUSTER))
            yield cluster
        finally:
            cluster.stop_operator()


def test_cluster_becomes_ready_and_serves_clients(cluster):
    started = time.monotonic()
    obj = cluster.wait_ready()
    print(f"cluster Ready after {time.monotonic() - started:.1f}s")
    status = obj["status"]
    assert status["brokerIds"] == [0, 1, 2]
    assert status["bootstrap"] == f"demo-bootstrap.{NAMESPACE}.svc:9092"
    assert (
        status["brokers"]
        == {
            "replicas": 3,
            "selector": "app.kubernetes.io/name=odradek,app.kubernetes.io/instance=demo,"
            "app.kubernetes.io/component=broker",
        }
        or status["brokers"]["replicas"] == 3
    )
    bootstrap = cluster.bootstrap()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("hello", 1, 3)])["hello"].result(timeout=30)
    wait_for(lambda: len(partitions_of(cluster, "hello")) == 1, 30, "hello created")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failed = []
    for i in range(10):
        producer.produce(
            "hello",
            value=b"v%d" % i,
            partition=0,
            on_delivery=lambda err, msg: err and failed.append(err),
        )
    assert producer.flush(30) == 0 and not failed, failed
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g"})
    consumer.assign([TopicPartition("hello", 0, OFFSET_BEGINNING)])
    seen = [m.value() for m in poll_messages(consumer, 10, 30)]
    consumer.close()
    assert sorted(seen) == sorted(b"v%d" % i for i in range(10))


def root_mount_options(pid: int) -> set[str]:
    """The mount options of ``/`` as the process ``pid`` sees it (its mount namespace's)."""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return set(fields[5].split(","))
    raise AssertionError(f"no root mount for {pid}")


def test_pods_run_with_a_read_only_root_behind_their_network_policies(cluster):
    uid = cluster.get()["metadata"]["uid"]
    for component in ("zookeeper", "controller", "broker"):
        policy = cluster.get("networkpolicies", f"demo-{component}-network-policy")
        assert policy is not None, component
        assert policy["metadata"]["ownerReferences"][0]["uid"] == uid
        pod = cluster.get("pods", f"demo-{component}-0")
        (container,) = pod["spec"]["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["resources"]["requests"]  # the operator's defaults
        # the stand-in ran it sealed: its root is read-only, the host's is not
        pid = cluster.kubelet.pid(f"{NAMESPACE}/demo-{component}-0")
        assert pid is not None, component
        assert "ro" in root_mount_options(pid), component
    assert "rw" in root_mount_options(os.getpid())
    # spec.networkPolicies: false deletes them (no pod restarts for it), true makes them again
    cluster.patch_spec({"networkPolicies": False})
    policies = [f"demo-{c}-network-policy" for c in ("zookeeper", "controller", "broker")]
    wait_for(
        lambda: all(cluster.get("networkpolicies", n) is None for n in policies),
        60,
        "policies deleted",
    )
    cluster.patch_spec({"networkPolicies": True})
    wait_for(
        lambda: all(cluster.get("networkpolicies", n) is not None for n in policies),
        60,
        "policies made again",
    )
    cluster.wait_ready()


def admin_of(cluster: Cluster) -> AdminClient:
    # Looking for a deleted topic must not re-create it (brokers auto-create by default).
    return AdminClient(
        {"bootstrap.servers": cluster.bootstrap(), "allow.auto.create.topics": False}
    )


def topic_config(cluster: Cluster, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = admin_of(cluster)  # kept alive until its futures are done
    entries = admin.describe_configs([resource])[resource].result(timeout=15)
    return {k: e.value for k, e in entries.items()}


def partitions_of(cluster: Cluster, topic: str) -> dict[int, tuple[int, ...]]:
    admin = admin_of(cluster)
    metadata = admin.list_topics(topic, timeout=15).topics.get(topic)
    if metadata is None or metadata.error is not None:
        return {}
    return {p.id: tuple(p.replicas) for p in metadata.partitions.values()}


def topic_ready(cluster: Cluster, name: str) -> dict | None:
    obj = cluster.get("odradektopics", name)
    ready = condition(obj, "Ready")
    if (
        ready.get("status") == "True"
        and obj["status"]["observedGeneration"] == (obj["metadata"]["generation"])
    ):
        return obj
    return None


def test_topics_created_altered_drift_reverted_deleted(cluster):
    cluster.wait_ready()
    store = cluster.store
    store.create(
        "odradektopics",
        NAMESPACE,
        {
            "metadata": {"name": "orders"},
            "spec": {
                "cluster": "demo",
                "partitions": 3,
                "replicationFactor": 3,
                "config": {"retention.ms": 3600000},
            },
        },
    )
    wait_for(lambda: topic_ready(cluster, "orders"), 30, "orders Ready")
    assert len(partitions_of(cluster, "orders")) == 3
    assert topic_config(cluster, "orders")["retention.ms"] == "3600000"

    store.patch(
        "odradektopics",
        NAMESPACE,
        "orders",
        {
            "spec": {
                "partitions": 4,
                "config": {"retention.ms": 7200000, "cleanup.policy": "compact"},
            }
        },
    )
    wait_for(lambda: topic_ready(cluster, "orders"), 30, "orders altered")
    wait_for(lambda: len(partitions_of(cluster, "orders")) == 4, 15, "4 partitions")
    config = topic_config(cluster, "orders")
    assert (config["retention.ms"], config["cleanup.policy"]) == ("7200000", "compact")

    # Drift: changed behind the operator's back, reverted by the periodic pass and reported.
    drift = ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "orders", incremental_configs=[drift])
    admin = admin_of(cluster)
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    wait_for(
        lambda: topic_config(cluster, "orders")["retention.ms"] == "7200000", 30, "drift reverted"
    )
    ready = wait_for(
        lambda: (
            condition(cluster.get("odradektopics", "orders"), "Ready").get("reason")
            == "DriftReverted"
            and condition(cluster.get("odradektopics", "orders"), "Ready")
        ),
        15,
        "drift reported",
    )
    assert "retention.ms" in ready["message"]

    # Partitions added outside the resource (issue 21 item 4) are kept and reported, and config
    # drift made at the same time is still reverted.
    grown = admin.create_partitions([NewPartitions("orders", 6)])
    grown["orders"].result(timeout=15)
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    ready = wait_for(
        lambda: (
            "2 more than spec.partitions"
            in condition(cluster.get("odradektopics", "orders"), "Ready").get("message", "")
            and topic_config(cluster, "orders")["retention.ms"] == "7200000"
            and condition(cluster.get("odradektopics", "orders"), "Ready")
        ),
        30,
        "extra partitions reported, drift reverted",
    )
    assert ready["status"] == "True"
    obj = cluster.get("odradektopics", "orders")
    assert condition(obj, "Error")["status"] == "False", obj["status"]
    assert obj["status"]["partitions"] == 6
    assert len(partitions_of(cluster, "orders")) == 6

    # A partition decrease is refused in status, not retried in a loop.
    store.patch("odradektopics", NAMESPACE, "orders", {"spec": {"partitions": 2}})
    error = wait_for(
        lambda: (
            condition(cluster.get("odradektopics", "orders"), "Error").get("status") == "True"
            and condition(cluster.get("odradektopics", "orders"), "Error")
        ),
        15,
        "decrease refused",
    )
    assert error["reason"] == "PartitionDecreaseRefused"
    assert len(partitions_of(cluster, "orders")) == 6

    store.delete("odradektopics", NAMESPACE, "orders")
    wait_for(lambda: cluster.get("odradektopics", "orders") is None, 30, "finalizer done")
    wait_for(lambda: not partitions_of(cluster, "orders"), 30, "topic deleted")


def topic_resource(name: str, retention_ms: int, topic_name: str | None = None) -> dict:
    spec = {
        "cluster": "demo",
        "partitions": 1,
        "replicationFactor": 3,
        "config": {"retention.ms": retention_ms},
    }
    if topic_name is not None:
        spec["topicName"] = topic_name
    return {"metadata": {"name": name}, "spec": spec}


def records_in(cluster: Cluster, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "count"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        return high - low
    finally:
        consumer.close()


def conflict_events(cluster: Cluster, name: str) -> int:
    events, _ = cluster.store.list("events", NAMESPACE)
    return sum(
        e.get("count", 1)
        for e in events
        if e.get("involvedObject", {}).get("name") == name and e.get("reason") == "ResourceConflict"
    )


def error_reason(cluster: Cluster, name: str) -> str | None:
    error = condition(cluster.get("odradektopics", name), "Error")
    return error.get("reason") if error.get("status") == "True" else None


def test_one_topic_has_one_owner_and_its_topic_name_is_kept(cluster):
    """Issue 21 item 2: the oldest OdradekTopic naming a topic owns it (as Strimzi); a rival is
    refused, never alters it and deleting it leaves the data; a renamed topicName is refused, and
    deleting the resource after an invalid edit still deletes the topic it managed."""
    cluster.wait_ready()
    store = cluster.store
    store.create("odradektopics", NAMESPACE, topic_resource("shared", 3600000, "shared"))
    wait_for(lambda: topic_ready(cluster, "shared"), 30, "shared Ready")
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})
    for i in range(20):
        producer.produce("shared", b"v%d" % i)
    assert producer.flush(30) == 0
    store.create("odradektopics", NAMESPACE, topic_resource("rival", 1000, "shared"))
    wait_for(lambda: error_reason(cluster, "rival") == "ResourceConflict", 30, "rival refused")
    # The rival's periodic passes (every 3 s) are refused too, each posting a warning: after two,
    # the owner's config still stands.
    wait_for(lambda: conflict_events(cluster, "rival") >= 3, 30, "the rival's periodic passes")
    assert topic_config(cluster, "shared")["retention.ms"] == "3600000"
    assert condition(cluster.get("odradektopics", "shared"), "Ready")["status"] == "True"
    store.delete("odradektopics", NAMESPACE, "rival")
    wait_for(lambda: cluster.get("odradektopics", "rival") is None, 30, "rival's finalizer done")
    assert records_in(cluster, "shared") == 20

    # topicName edited: refused, the managed topic stays; then an invalid spec, then deletion.
    store.patch("odradektopics", NAMESPACE, "shared", {"spec": {"topicName": "shared-v2"}})
    wait_for(
        lambda: error_reason(cluster, "shared") == "TopicNameChangeRefused", 30, "rename refused"
    )
    assert not partitions_of(cluster, "shared-v2")
    store.patch("odradektopics", NAMESPACE, "shared", {"spec": {"partitions": 0}})
    wait_for(lambda: error_reason(cluster, "shared") == "InvalidSpec", 30, "invalid spec refused")
    store.delete("odradektopics", NAMESPACE, "shared")
    wait_for(lambda: cluster.get("odradektopics", "shared") is None, 30, "finalizer done")
    wait_for(lambda: not partitions_of(cluster, "shared"), 30, "the managed topic deleted")


BAD_TOPICS = {
    # issue 21 item 6: more digits than Python's int() takes (a ValueError kopf retried forever).
    "huge-integer": ({"config": {"retention.ms": "9" * 5000}}, "InvalidConfig"),
    # item 7: no acks=all write could ever succeed.
    "min-isr-above-rf": ({"config": {"min.insync.replicas": 5}}, "InvalidConfig"),
    # item 8: the CRD's bound (1000), which the operator's own had drifted from (32767).
    "rf-above-crd-maximum": ({"replicationFactor": 1001}, "InvalidSpec"),
}


def test_bad_topic_specs_end_as_refusals_in_status(cluster):
    cluster.wait_ready()
    for name, (spec, _) in BAD_TOPICS.items():
        cluster.store.create(
            "odradektopics",
            NAMESPACE,
            {
                "metadata": {"name": name},
                "spec": {"cluster": "demo", "partitions": 1, "replicationFactor": 3, **spec},
            },
        )
    for name, (_, reason) in BAD_TOPICS.items():
        error = wait_for(
            lambda name=name: (
                condition(cluster.get("odradektopics", name), "Error").get("status") == "True"
                and condition(cluster.get("odradektopics", name), "Error")
            ),
            30,
            f"{name} refused",
        )
        assert error["reason"] == reason, error
        assert len(error["message"]) < 500, error
        assert condition(cluster.get("odradektopics", name), "Ready")["status"] == "False"
        assert not partitions_of(cluster, name)
    for name in BAD_TOPICS:
        cluster.store.delete("odradektopics", NAMESPACE, name)
    for name in BAD_TOPICS:
        wait_for(lambda name=name: cluster.get("odradektopics", name) is None, 30, f"{name} gone")


def load_topic(cluster: Cluster, name: str) -> None:
    if cluster.get("odradektopics", name) is None:
        cluster.store.create(
            "odradektopics",
            NAMESPACE,
            {
                "metadata": {"name": name},
                "spec": {
                    "cluster": "demo",
                    "partitions": 3,
                    "replicationFactor": 3,
                    "config": {"min.insync.replicas": 2},
                },
            },
        )
    wait_for(lambda: topic_ready(cluster, name), 30, f"{name} Ready")


# As Kafka's delivery.timeout.ms default. When records time out in librdkafka's queue it bumps
# its epoch and sends what is still queued again under the new epoch, records a broker had
# written but not yet acknowledged among them: duplicates no broker can tell from new records.
# The proof workload's 20 s makes that likely whenever an acks=all write waits 20 s (a broker
# killed without a controlled shutdown, say by its liveness probe on a loaded machine, holds its
# partitions' high watermark until its ZooKeeper session expires or it drops out of the ISR).
# These tests check what an operation does to the data, so they give the client Kafka's time; a
# failed check reports the longest wait between acknowledgements.
OPERATION_MESSAGE_TIMEOUT_MS = 120_000


class Load:
    """acks=all idempotent producers on ``topic`` while an operation runs, then the checker."""

    def __init__(self, cluster: Cluster, topic: str, seed: int) -> None:
        self.cluster = cluster
        self.config = WorkloadConfig(
            topic=topic,
            partitions=3,
            producers=2,
            records_per_s=100,
            duration_s_max=240,
            message_timeout_ms=OPERATION_MESSAGE_TIMEOUT_MS,
        )
        self.history = History(seed)
        self.producers = Producers(cluster.bootstrap(), self.history, self.config, time.monotonic())

    def __enter__(self) -> Load:
        started = time.strftime("%H:%M:%S", time.gmtime())
        self.history.record_event(0.0, f"producers started at {started} UTC (the logs' clock)")
        self.producers.start()
        time.sleep(1.0)
        return self

    def __exit__(self, *exc) -> None:
        self.producers.stop()

    def check(self) -> None:
        ends = read_all(self.cluster.bootstrap(), self.history, self.config, timeout_s=60)
        assert len(ends) == self.config.partitions, ends
        analysis = analyze(self.history)
        assert analysis.valid and analysis.lost == 0, (
            analysis.report() + "\n" + controller_timeline(self.cluster, self.config.topic)
        )
        assert sum(self.producers.sent) > 500


TIMELINE_LINES_MAX = 80


def controller_timeline(cluster: Cluster, topic: str) -> str:
    """The controllers' log lines on ``topic`` and on brokers coming and going (the last
    ``TIMELINE_LINES_MAX``), so that a failed check shows what the cluster did meanwhile."""
    marks = (topic, "shutting down", "brokers left", "brokers arrived", "elected")
    lines = [
        line
        for path in sorted(
            (cluster.kubelet.workdir / "pods" / NAMESPACE).glob("*controller*/*.log")
        )
        for line in path.read_text(errors="replace").splitlines()
        if any(mark in line for mark in marks) and "refused: ineligible_replica" not in line
    ]
    return "controller log:\n" + "\n".join(sorted(lines)[-TIMELINE_LINES_MAX:])


def pid(cluster: Cluster, pod: str) -> int | None:
    """The pod's process id; None while the pod is gone (between deletion and recreation)."""
    try:
        return cluster.kubelet.pid(pod)
    except KeyError:
        return None


def broker_pids(cluster: Cluster) -> dict[str, int | None]:
    return {p: pid(cluster, p) for p in (f"{NAMESPACE}/demo-broker-{i}" for i in range(3))}


def brokers_down(cluster: Cluster, replicas: int) -> int:
    """Brokers missing, terminating or not ready right now."""
    up = 0
    for i in range(replicas):
        pod = cluster.get("pods", f"demo-broker-{i}")
        if (
            pod
            and not pod["metadata"].get("deletionTimestamp")
            and condition(pod, "Ready").get("status") == "True"
        ):
            up += 1
    return replicas - up


def operation_seen(cluster: Cluster, kind: str, seen: set[str]) -> bool:
    op = (cluster.get().get("status") or {}).get("operation") or {}
    if op.get("type"):
        seen.add(op["type"])
    return kind in seen


def racks(cluster: Cluster) -> dict[int, str | None]:
    """Each broker's rack as Metadata reports it (confluent_kafka's list_topics shows none)."""

    async def read() -> dict[int, str | None]:
        async with ClusterClient(cluster.bootstrap()) as client:
            return (await read_cluster(client)).rack_of()

    return asyncio.run(read())


def test_config_change_rolls_brokers_one_at_a_time_losing_nothing_across_operator_restart(
    cluster,
):
    cluster.wait_ready()
    load_topic(cluster, "load-roll")  # a topic per load: the checker reads it all
    before = broker_pids(cluster)
    seen: set[str] = set()
    with Load(cluster, "load-roll", seed=1) as load:
        cluster.patch_spec(
            {
                "brokers": {
                    "config": {
                        "min.insync.replicas": 2,
                        "default.replication.factor": 3,
                        "log.retention.hours": 100,
                    },
                    "rack": {"topologyKey": "topology.kubernetes.io/zone"},
                }
            }
        )
        down_max = 0

        def done() -> bool:
            nonlocal down_max
            down_max = max(down_max, brokers_down(cluster, 3))
            return operation_seen(cluster, "Idle", seen) and cluster.ready()

        wait_for(lambda: operation_seen(cluster, "RollingRestart", seen), 30, "RollingRestart")
        # The operator restarted in the middle carries on from the status and the world.
        wait_for(
            lambda: sum(broker_pids(cluster)[p] not in (None, before[p]) for p in before) >= 1,
            60,
            "a first broker restarted",
        )
        cluster.stop_operator()
        cluster.start_operator()
        wait_for(done, 180, "the rolling restart done", 0.1)
    load.check()
    assert down_max == 1, "brokers restarted one at a time"
    after = broker_pids(cluster)
    assert all(after[p] != before[p] for p in before), (before, after)
    sts = cluster.get("statefulsets", "demo-broker")
    template = sts["spec"]["template"]["metadata"]["annotations"]["odradek.io/config-hash"]
    for i in range(3):
        pod = cluster.get("pods", f"demo-broker-{i}")
        assert pod["metadata"]["annotations"]["odradek.io/config-hash"] == template
        # the stand-in's node has topology.kubernetes.io/zone=standin-zone
        assert pod["metadata"]["annotations"]["odradek.io/rack"] == "standin-zone"
    assert racks(cluster) == dict.fromkeys(range(3), "standin-zone")


VOLUMES_2 = [{"id": 0, "size": "10Gi"}, {"id": 1, "size": "1Gi"}]
VOLUMES_3 = [*VOLUMES_2, {"id": 2, "size": "1Gi"}]


def replica_counts(cluster: Cluster) -> dict[int, int]:
    """Replicas per broker over every topic, as Metadata shows them (none while no answer)."""
    admin = admin_of(cluster)
    counts: dict[int, int] = {}
    try:
        topics = admin.list_topics(timeout=15).topics.values()
    except KafkaException:
        return counts
    for topic in topics:
        for p in topic.partitions.values():
            for b in p.replicas:
                counts[b] = counts.get(b, 0) + 1
    return counts


def test_scale_up_rebalances_and_scale_down_drains(cluster):
    cluster.wait_ready()
    load_topic(cluster, "load-scale")
    with Load(cluster, "load-scale", seed=2) as load:
        cluster.patch_spec({"brokers": {"replicas": 5}})
        seen: set[str] = set()
        wait_for(lambda: operation_seen(cluster, "ScaleUp", seen), 30, "ScaleUp")
        obj = cluster.wait_ready(180)
        assert obj["status"]["brokerIds"] == [0, 1, 2, 3, 4]
        holders = {
            b for replicas in partitions_of(cluster, "load-scale").values() for b in replicas
        }
        everything = {
            b
            for t in ("load-scale", "__consumer_offsets")
            for r in partitions_of(cluster, t).values()
            for b in r
        }
        assert {3, 4} & everything, (holders, everything)

        # One edit that shrinks and adds a JBOD volume: the StatefulSet is re-created for its
        # volumes, at 5 brokers, and brokers 3 and 4 are drained before they go.
        cluster.patch_spec({"brokers": {"replicas": 3, "storage": {"volumes": VOLUMES_2}}})
        seen = set()
        stopped_holding: list[tuple[int, int]] = []

        def scaled_down() -> bool:
            replicas = replica_counts(cluster)
            for broker in (3, 4):
                pod = cluster.get("pods", f"demo-broker-{broker}")
                gone = pod is None or pod["metadata"].get("deletionTimestamp")
                if gone and replicas.get(broker):
                    stopped_holding.append((broker, replicas[broker]))
            operation_seen(cluster, "ScaleDown", seen)
            return not stopped_holding and cluster.ready() and "ScaleDown" in seen

        wait_for(lambda: scaled_down() or stopped_holding, 300, "scaled down, rolled", 0.5)
        obj = cluster.get()
    assert not stopped_holding, f"brokers stopped holding replicas: {stopped_holding}"
    load.check()
    assert obj["status"]["brokerIds"] == [0, 1, 2]
    sts = cluster.get("statefulsets", "demo-broker")
    assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == [
        "data-0",
        "data-1",
    ]
    for topic in ("load-roll", "load-scale", "__consumer_offsets"):
        for replicas in partitions_of(cluster, topic).values():
            assert set(replicas) <= {0, 1, 2}, (topic, replicas)
    assert cluster.get("persistentvolumeclaims", "data-0-demo-broker-4") is not None  # kept


def test_scale_down_below_replication_factor_is_refused(cluster):
    cluster.wait_ready()
    cluster.patch_spec(
        {
            "brokers": {
                "replicas": 2,
                "config": {
                    "min.insync.replicas": 1,
                    "default.replication.factor": 2,
                    "offsets.topic.replication.factor": 2,
                    "transaction.state.log.replication.factor": 2,
                },
            }
        }
    )
    error = wait_for(
        lambda: (
            condition(cluster.get(), "Error").get("status") == "True"
            and condition(cluster.get(), "Error")
        ),
        30,
        "refused",
    )
    assert error["reason"] == "ScaleDownBelowReplicationFactor"
    assert_refused_not_ready(cluster, "ScaleDownBelowReplicationFactor")
    assert cluster.get("statefulsets", "demo-broker")["spec"]["replicas"] == 3
    config = cluster.get("configmaps", "demo-broker-config")["data"]
    assert not any("offsets.topic.replication.factor=2" in text for text in config.values())
    cluster.patch_spec(
        {
            "brokers": {
                "replicas": 3,
                "config": {  # as before; null removes a key (JSON merge patch)
                    "min.insync.replicas": 2,
                    "default.replication.factor": 3,
                    "offsets.topic.replication.factor": None,
                    "transaction.state.log.replication.factor": None,
                },
            }
        }
    )
    cluster.wait_ready()
    assert condition(cluster.get(), "Error")["status"] == "False"

    # A refused ZooKeeper resize: seen (observedGeneration), not applied, so not Ready.
    cluster.patch_spec({"zookeeper": {"replicas": 3}})
    wait_for(
        lambda: condition(cluster.get(), "Error").get("reason") == "ZooKeeperResizeRefused",
        30,
        "resize refused",
    )
    assert_refused_not_ready(cluster, "ZooKeeperResizeRefused")
    assert cluster.get("statefulsets", "demo-zookeeper")["spec"]["replicas"] == 1
    cluster.patch_spec({"zookeeper": {"replicas": 1}})
    cluster.wait_ready()
    assert condition(cluster.get(), "Error")["status"] == "False"


def assert_refused_not_ready(cluster: Cluster, reason: str) -> None:
    """What ``kubectl wait --for=condition=Ready`` and GitOps tools read of a refused change:
    the generation was observed, and its Ready condition (of that generation) is False."""
    obj = cluster.get()
    generation = obj["metadata"]["generation"]
    ready = condition(obj, "Ready")
    assert obj["status"]["observedGeneration"] == generation
    assert (ready["status"], ready["reason"]) == ("False", reason), ready
    assert ready["observedGeneration"] == generation, ready


def test_adding_a_jbod_volume_recreates_the_statefulset_and_rolls(cluster):
    cluster.wait_ready()
    before = broker_pids(cluster)
    cluster.patch_spec({"brokers": {"storage": {"volumes": VOLUMES_3}}})
    seen: set[str] = set()
    wait_for(lambda: operation_seen(cluster, "RollingRestart", seen), 60, "the roll")
    cluster.wait_ready(180)
    sts = cluster.get("statefulsets", "demo-broker")
    assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == [
        "data-0",
        "data-1",
        "data-2",
    ]
    for i in range(3):
        assert cluster.get("persistentvolumeclaims", f"data-2-demo-broker-{i}") is not None
    assert "AddVolume" in seen or "RollingRestart" in seen
    after = broker_pids(cluster)
    assert all(after[p] != before[p] for p in before), "every broker restarted on the new layout"

    # New partitions go to the emptiest dir, the new volume: removing it is refused until they
    # are moved off, and nothing is deleted meanwhile.
    admin = admin_of(cluster)
    admin.create_topics([NewTopic("jbod", 6, 3)])["jbod"].result(timeout=30)
    wait_for(lambda: len(partitions_of(cluster, "jbod")) == 6, 30, "jbod created")
    cluster.patch_spec({"brokers": {"storage": {"volumes": VOLUMES_2}}})
    error = wait_for(
        lambda: (
            condition(cluster.get(), "Error").get("status") == "True"
            and condition(cluster.get(), "Error")
        ),
        30,
        "removal refused",
    )
    assert error["reason"] == "VolumeStillInUse" and "data-2" in error["message"]
    assert len(cluster.get("statefulsets", "demo-broker")["spec"]["volumeClaimTemplates"]) == 3
    cluster.patch_spec({"brokers": {"storage": {"volumes": VOLUMES_3}}})
    cluster.wait_ready()
    assert condition(cluster.get(), "Error")["status"] == "False"


def test_restart_annotation_restarts_the_active_controller(cluster):
    cluster.wait_ready()
    pod = f"{NAMESPACE}/demo-controller-0"
    before = pid(cluster, pod)
    cluster.store.patch(
        "pods",
        NAMESPACE,
        "demo-controller-0",
        {"metadata": {"annotations": {"odradek.io/restart": "true"}}},
    )
    wait_for(lambda: pid(cluster, pod) not in (None, before), 60, "controller restarted")
    cluster.wait_ready()
    annotations = cluster.get("pods", "demo-controller-0")["metadata"].get("annotations", {})
    assert "odradek.io/restart" not in annotations


def test_a_topic_with_replication_factor_at_most_min_isr_does_not_block_a_restart(cluster):
    """The brokers' min.insync.replicas is 2: an RF=1 topic on broker 1 can never stay writable
    through broker 1's restart, so (as Strimzi) the restart ignores it and says so."""
    cluster.wait_ready()
    admin = admin_of(cluster)
    admin.create_topics([NewTopic("rf1", 1, replica_assignment=[[1]])])["rf1"].result(timeout=30)
    wait_for(lambda: partitions_of(cluster, "rf1") == {0: (1,)}, 30, "rf1 created")
    pod = f"{NAMESPACE}/demo-broker-1"
    before = pid(cluster, pod)
    cluster.store.patch(
        "pods",
        NAMESPACE,
        "demo-broker-1",
        {"metadata": {"annotations": {"odradek.io/restart": "true"}}},
    )
    ignored: list[list[str]] = []

    def restarted() -> bool:
        op = (cluster.get().get("status") or {}).get("operation") or {}
        if op.get("ignoredTopics"):
            ignored.append(op["ignoredTopics"])
        return pid(cluster, pod) not in (None, before)

    wait_for(restarted, 60, "broker 1 restarted despite rf1")
    cluster.wait_ready()
    assert ["rf1"] in ignored, ignored
    events, _ = cluster.store.list("events", NAMESPACE)
    messages = [e.get("message", "") for e in events]
    assert any("demo-broker-1" in m and "ignoring topic(s) rf1" in m for m in messages), messages
    admin.delete_topics(["rf1"])["rf1"].result(timeout=30)


def test_deleting_the_cluster_removes_owned_objects_and_keeps_claims(cluster):
    cluster.wait_ready()
    claims, _ = cluster.store.list("persistentvolumeclaims", NAMESPACE)
    dirs = [cluster.kubelet.pvc_dir(NAMESPACE, c["metadata"]["name"]) for c in claims]
    assert dirs and all(d.is_dir() for d in dirs)
    cluster.store.delete("odradekclusters", NAMESPACE, "demo")
    for plural in ("statefulsets", "services", "configmaps", "poddisruptionbudgets"):
        wait_for(
            lambda plural=plural: not cluster.store.list(plural, NAMESPACE)[0],
            30,
            f"{plural} garbage collected",
        )
    # Their pods are being deleted (garbage collected with the StatefulSets); the brokers'
    # controlled shutdowns may take the grace period with the controller gone too, and the
    # kubelet stand-in kills what is left when the module ends.
    wait_for(
        lambda: all(
            p["metadata"].get("deletionTimestamp") for p in cluster.store.list("pods", NAMESPACE)[0]
        ),
        30,
        "pods terminating",
    )
    for topic in cluster.store.list("odradektopics", NAMESPACE)[0]:
        cluster.store.delete("odradektopics", NAMESPACE, topic["metadata"]["name"])
    wait_for(
        lambda: not cluster.store.list("odradektopics", NAMESPACE)[0],
        30,
        "topic finalizers: nothing to delete from a deleted cluster",
    )
    claims_after, _ = cluster.store.list("persistentvolumeclaims", NAMESPACE)
    assert len(claims_after) == len(claims)
    assert all(d.is_dir() for d in dirs)
