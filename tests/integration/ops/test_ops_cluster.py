"""odradek.ops against real brokers: the view matches a real client's, DescribeLogDirs sizes,
throttled reassignment with throttles set and cleared, cancel, CLI drain, rebalance after adding
a broker."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType
from kafka import KafkaAdminClient
from kafka.admin import NewTopic as KafkaNewTopic

from odradek import ops
from odradek.client.admin import ClusterClient
from odradek.common.partitions import TopicPartition
from odradek.local import cluster as local
from odradek.local.cluster import ClusterState
from odradek.ops.cluster import read_cluster, replica_sizes
from odradek.ops.throttles import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    topic_throttles,
)
from support.waiting import wait_equal, wait_until

pytestmark = pytest.mark.integration

RACKS = {1: "a", 2: "b", 3: "a", 4: "b"}
WAIT_S = 120.0  # reassignments on a loaded 2-core machine: generous
COMMAND_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory, local_cluster) -> Iterator[tuple[Path, ClusterState]]:
    root = tmp_path_factory.mktemp("ops")
    overrides = {"default.replication.factor": "2", "min.insync.replicas": "1"}
    with local_cluster(root / "var" / "local", brokers=4, racks=RACKS, broker_overrides=overrides):
        yield root, ClusterState.read(root / "var" / "local")


@pytest.fixture(scope="module")
def bootstrap(cluster_dir) -> str:
    return cluster_dir[1].bootstrap_servers


def create_topic(bootstrap: str, partitions: int, replicas: dict[int, list[int]] | None = None):
    name = f"ops-{uuid.uuid4().hex[:8]}"
    if replicas:  # kafka-python: librdkafka 2.x refuses a replica assignment here
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
        try:
            admin.create_topics([KafkaNewTopic(name, replica_assignments=replicas)])
        finally:
            admin.close()
    else:
        topic = NewTopic(name, num_partitions=partitions, replication_factor=2)
        admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result comes
        admin.create_topics([topic])[name].result(30)

    def led() -> bool:
        view = asyncio.run(_view(bootstrap))
        mine = [p for tp, p in view.partitions.items() if tp.topic == name]
        return len(mine) == (len(replicas) if replicas else partitions) and all(
            p.leader >= 0 for p in mine
        )

    wait_until(led, f"topic {name} led", 30)
    return name


def produce(bootstrap: str, topic: str, n_bytes: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    value = b"x" * 1000
    for i in range(n_bytes // len(value)):
        producer.produce(topic, value, key=str(i).encode())
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


async def _view(bootstrap: str) -> ops.ClusterView:
    async with ClusterClient(bootstrap) as client:
        return await read_cluster(client)


def configs(bootstrap: str, kind: ResourceType, name: str) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(30)


def is_dynamic(entry) -> bool:
    return entry.source in (
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )


def test_view_matches_a_real_clients_metadata(bootstrap):
    topic = create_topic(bootstrap, 3)
    view = asyncio.run(_view(bootstrap))
    assert {b: info.rack for b, info in view.brokers.items()} == RACKS
    theirs = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    for p in theirs.topics[topic].partitions.values():
        mine = view.partitions[TopicPartition(topic, p.id)]
        assert (list(mine.replicas), mine.leader, sorted(mine.isr)) == (
            p.replicas,
            p.leader,
            sorted(p.isrs),
        )


def test_describe_log_dirs_sizes_every_replica(bootstrap):
    topic = create_topic(bootstrap, 2)
    produce(bootstrap, topic, 200_000)

    async def sizes():
        async with ClusterClient(bootstrap) as client:
            view = await read_cluster(client)
            return view, await replica_sizes(client, view.brokers)

    view, found = asyncio.run(sizes())
    for tp, p in view.partitions.items():
        if tp.topic == topic:
            for broker in p.replicas:
                assert found[tp, broker] > 50_000, (tp, broker)


def test_throttled_reassignment_sets_then_clears_throttles(bootstrap):
    topic = create_topic(bootstrap, 1, {0: [1, 2]})
    produce(bootstrap, topic, 300_000)
    view = asyncio.run(_view(bootstrap))
    plan = ops.Plan.from_targets({TopicPartition(topic, 0): (3, 4)}, view)
    rate = 100_000_000
    throttled = asyncio.run(ops.execute(bootstrap, plan, rate))
    assert throttled == [1, 2, 3, 4]
    # While it runs (or right after), the throttles are Kafka's keys with Kafka's values.
    topic_configs = configs(bootstrap, ResourceType.TOPIC, topic)
    for key, value in topic_throttles(plan)[topic].items():
        assert topic_configs[key].value == value
    for broker in throttled:
        broker_configs = configs(bootstrap, ResourceType.BROKER, str(broker))
        assert broker_configs[LEADER_RATE].value == str(rate)
        assert broker_configs[FOLLOWER_RATE].value == str(rate)
    report = asyncio.run(ops.watch(bootstrap, plan, interval_s=0.5, timeout_s=WAIT_S))
    assert report.finished and report.throttles_cleared
    assert [p.state for p in report.partitions] == [ops.PartitionState.DONE]
    assert asyncio.run(_view(bootstrap)).partitions[TopicPartition(topic, 0)].replicas == (
        3,
        4,
    )
    topic_configs = configs(bootstrap, ResourceType.TOPIC, topic)
    assert not is_dynamic(topic_configs[LEADER_REPLICAS])
    assert not is_dynamic(topic_configs[FOLLOWER_REPLICAS])
    for broker in throttled:
        assert not is_dynamic(configs(bootstrap, ResourceType.BROKER, str(broker))[LEADER_RATE])


def test_cancel_restores_the_replicas_and_clears_throttles(bootstrap):
    topic = create_topic(bootstrap, 1, {0: [1, 2]})
    produce(bootstrap, topic, 1_000_000)
    view = asyncio.run(_view(bootstrap))
    plan = ops.Plan.from_targets({TopicPartition(topic, 0): (3, 4)}, view)
    asyncio.run(ops.execute(bootstrap, plan, throttle_bytes_per_s=1_000))  # ~1000 s to copy
    report = asyncio.run(ops.status(bootstrap, plan, clear_when_done=False))
    assert report.partitions[0].state is ops.PartitionState.IN_PROGRESS, (
        "a 1 kB/s throttle must keep a 1 MB copy in progress"
    )
    # A second plan while this one runs is refused, as Kafka refuses it without --additional.
    with pytest.raises(ops.ReassignmentInProgressError, match="--additional"):
        asyncio.run(ops.execute(bootstrap, plan))
    cancelled = asyncio.run(ops.cancel(bootstrap, plan))
    assert cancelled == [TopicPartition(topic, 0)]
    wait_equal(
        lambda: asyncio.run(_view(bootstrap)).partitions[TopicPartition(topic, 0)].replicas,
        (1, 2),
        "the cancelled reassignment's replicas",
        WAIT_S,
        poll_s=0.5,
    )
    assert not is_dynamic(configs(bootstrap, ResourceType.TOPIC, topic)[LEADER_REPLICAS])
    assert not is_dynamic(configs(bootstrap, ResourceType.BROKER, "3")[FOLLOWER_RATE])


def test_a_refused_reassignment_says_why(bootstrap):
    topic = create_topic(bootstrap, 1)
    view = asyncio.run(_view(bootstrap))
    # Valid JSON, a real broker: but partition 0 gets a replica list with a broker repeated
    # bypassing the file checks, so the controller must refuse it with its own error code.
    plan = ops.Plan((ops.PartitionMove(topic, 0, view.partitions[(topic, 0)].replicas, (1, 1)),))
    with pytest.raises(ops.ClusterRequestError) as refused:
        asyncio.run(ops.execute(bootstrap, plan))
    assert f"{topic}-0" in refused.value.refusals
    assert refused.value.refusals[f"{topic}-0"][0].name == "invalid_replica_assignment"


def odradek(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )


def test_cli_plan_execute_status_and_drain(cluster_dir, bootstrap):
    root, _ = cluster_dir
    topic = create_topic(bootstrap, 4)
    produce(bootstrap, topic, 200_000)
    planned = odradek(root, "reassign", "plan", "--topics", topic, "--broker-list", "1,2")
    assert planned.returncode == 0, planned.stderr
    assert "Proposed partition reassignment configuration" in planned.stdout
    executed = odradek(
        root, "reassign", "execute", "--reassignment-json-file", "reassignment.json",
        "--throttle", "50000000",
    )  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    assert "Save this to use as the --reassignment-json-file option during rollback" in (
        executed.stdout
    )
    watched = odradek(
        root, "reassign", "status", "--reassignment-json-file", "reassignment.json",
        "--watch", "--interval", "0.5", "--timeout", str(WAIT_S),
    )  # fmt: skip
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "Throttles cleared." in watched.stdout
    view = asyncio.run(_view(bootstrap))
    assert all(set(p.replicas) == {1, 2} for tp, p in view.partitions.items() if tp.topic == topic)

    drained = odradek(
        root, "cluster", "drain", "--broker", "4", "--yes", "--throttle", "50000000",
        "--interval", "0.5", "--timeout", str(WAIT_S),
    )  # fmt: skip
    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert "Done: drain broker 4." in drained.stdout
    view = asyncio.run(_view(bootstrap))
    assert all(4 not in p.replicas for p in view.partitions.values())
    again = odradek(root, "cluster", "drain", "--broker", "4", "--dry-run")
    assert again.returncode == 0 and "Nothing to do" in again.stdout


def test_rebalance_after_adding_a_broker(cluster_dir, bootstrap):
    """Last in this module: it adds broker 5 to the shared cluster."""
    root, _ = cluster_dir
    topic = create_topic(bootstrap, 6)
    produce(bootstrap, topic, 100_000)
    local.add_broker(root / "var" / "local", 5, rack="b")
    wait_until(lambda: 5 in asyncio.run(_view(bootstrap)).brokers, "broker 5 registered", 30)
    prepared = asyncio.run(ops.prepare_rebalance(bootstrap))
    assert prepared.plan.replica_moves > 0
    assert any(5 in m.adding for m in prepared.plan)
    asyncio.run(ops.execute(bootstrap, prepared.plan, throttle_bytes_per_s=50_000_000))
    report = asyncio.run(ops.watch(bootstrap, prepared.plan, interval_s=0.5, timeout_s=WAIT_S))
    assert report.finished
    assert all(p.state is ops.PartitionState.DONE for p in report.partitions)
    view = asyncio.run(_view(bootstrap))
    assert view.replica_counts()[5] > 0
    assert len(ops.plan_rebalance(view)) == 0  # balanced: nothing more to do
