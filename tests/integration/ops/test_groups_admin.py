"""Consumer-group administration against a real broker: ListGroups, DescribeGroups and
DeleteGroups through kafka-python's and confluent-kafka's admin clients and through
``odradek groups list|describe|reset-offsets|delete``; lag in the CLI and in
``odradek_group_consumer_lag``. Groups come from simple consumers (``assign()`` + commit), from
a classic member of a subscribed group and from a KIP-848 member (``group.protocol=consumer``)."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from odradek.local.cluster import ClusterState
from support.consuming import poll_messages

pytestmark = pytest.mark.integration

COMMAND_TIMEOUT_S = 120
RECORDS = 20
OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.min.session.timeout.ms": "3000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
}


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory, local_cluster) -> Iterator[tuple[Path, ClusterState]]:
    root = tmp_path_factory.mktemp("groups")
    with local_cluster(root / "var" / "local", brokers=1, broker_overrides=OVERRIDES):
        yield root, ClusterState.read(root / "var" / "local")


@pytest.fixture(scope="module")
def bootstrap(cluster_dir) -> str:
    return cluster_dir[1].bootstrap_servers


def odradek(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )


def topic_with_records(bootstrap: str, partitions: int = 2) -> str:
    name = f"groups-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[
        name
    ].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    deadline = time.monotonic() + 30
    for i in range(RECORDS * partitions):
        while True:
            try:
                producer.produce(name, value=b"v%d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(30) == 0
    assert time.monotonic() < deadline
    return name


def commit_simple(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """A simple consumer's commit: assign() and commit, no group membership."""
    consumer = ConfluentConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


def scraped_lags(state: ClusterState, group: str, topic: str) -> dict[int, float]:
    """``odradek_group_consumer_lag`` of the group's partitions of ``topic`` at the (only)
    broker, once sampled (every 5 s): partition -> lag; {} if none came within 30 s."""
    broker = next(m for m in state.members if m.role == "broker")
    prefix = f'odradek_group_consumer_lag{{group="{group}",partition="'
    deadline = time.monotonic() + 30
    while True:
        with urllib.request.urlopen(f"http://{broker.admin}/metrics", timeout=10) as answer:
            lags = {
                int(line[len(prefix) :].split('"', 1)[0]): float(line.split()[-1])
                for line in answer.read().decode().splitlines()
                if line.startswith(prefix) and f'topic="{topic}"}}' in line
            }
        if lags or time.monotonic() >= deadline:
            return lags
        time.sleep(0.5)


# -- without any group ------------------------------------------------------------------------


def test_an_empty_cluster_lists_no_groups(cluster_dir, bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        assert admin.list_groups() == []
    finally:
        admin.close()
    root, _ = cluster_dir
    listed = odradek(root, "groups", "list", "--bootstrap-server", bootstrap)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"]


def test_the_lag_metric_is_exported(cluster_dir):
    _, state = cluster_dir
    broker = next(m for m in state.members if m.role == "broker")
    with urllib.request.urlopen(f"http://{broker.admin}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    assert "odradek_group_consumer_lag_series_omitted 0.0" in text


# -- simple consumers' groups -----------------------------------------------------------------


def test_a_simple_consumers_group_lists_describes_and_deletes(cluster_dir, bootstrap):
    root, state = cluster_dir
    topic = topic_with_records(bootstrap)
    group = f"simple-{uuid.uuid4().hex[:6]}"
    commit_simple(bootstrap, group, {(topic, 0): 5, (topic, 1): RECORDS})

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(30)
    mine = [g for g in listed.valid if g.group_id == group]
    assert len(mine) == 1 and mine[0].state == ConsumerGroupState.EMPTY
    assert mine[0].is_simple_consumer_group  # no protocol type
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert described.state == ConsumerGroupState.EMPTY and not described.members

    kafka_admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        listed_here = {g["group_id"]: g for g in kafka_admin.list_groups()}
        assert listed_here[group]["protocol_type"] == ""
        assert listed_here[group]["group_state"] == "Empty"
        offsets = kafka_admin.list_group_offsets({group: None})[group]
        assert {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()} == {
            (topic, 0): 5,
            (topic, 1): RECORDS,
        }
    finally:
        kafka_admin.close()

    shown = odradek(root, "groups", "describe", "--group", group, "--bootstrap-server", bootstrap)
    assert shown.returncode == 0, shown.stderr
    rows = {
        tuple(line.split()[1:3]): line.split()
        for line in shown.stdout.splitlines()
        if line.startswith(group + " ")
    }
    assert rows[(topic, "0")][3:6] == ["5", str(RECORDS), str(RECORDS - 5)]
    assert rows[(topic, "1")][3:6] == [str(RECORDS), str(RECORDS), "0"]
    assert f"total lag {RECORDS - 5}" in shown.stdout
    assert scraped_lags(state, group, topic) == {0: RECORDS - 5, 1: 0}

    deleted = odradek(root, "groups", "delete", "--group", group, "--bootstrap-server", bootstrap)
    assert deleted.returncode == 0, deleted.stderr
    assert f"('{group}') was successful" in deleted.stdout
    again = odradek(root, "groups", "delete", "--group", group, "--bootstrap-server", bootstrap)
    assert again.returncode == 1 and "GROUP_ID_NOT_FOUND" in again.stderr
    assert committed(bootstrap, group, topic, 2) == {0: -1001, 1: -1001}


def test_reset_offsets_dry_run_then_execute(cluster_dir, bootstrap):
    root, _ = cluster_dir
    topic = topic_with_records(bootstrap)
    group = f"reset-{uuid.uuid4().hex[:6]}"
    commit_simple(bootstrap, group, {(topic, 0): 10, (topic, 1): 10})
    base = ["groups", "reset-offsets", "--group", group, "--bootstrap-server", bootstrap]

    dry = odradek(root, *base, "--topic", topic, "--to-earliest")
    assert dry.returncode == 0, dry.stderr
    assert "dry run" in dry.stdout
    assert committed(bootstrap, group, topic, 2) == {0: 10, 1: 10}

    for scenario, expected in (
        (["--to-earliest"], {0: 0, 1: 0}),
        (["--shift-by", "7"], {0: 7, 1: 7}),
        (["--shift-by", "-100"], {0: 0, 1: 0}),
        (["--to-latest"], {0: RECORDS, 1: RECORDS}),
        (["--to-offset", "3"], {0: 3, 1: 3}),
        (["--to-datetime", "2000-01-01T00:00:00.000"], {0: 0, 1: 0}),
        (["--to-datetime", "2999-01-01T00:00:00.000"], {0: RECORDS, 1: RECORDS}),
        (["--by-duration", "PT1H"], {0: 0, 1: 0}),  # every record is younger than an hour
        (["--shift-by", "2"], {0: 2, 1: 2}),
        (["--to-current"], {0: 2, 1: 2}),
    ):
        done = odradek(root, *base, "--topic", topic, *scenario, "--execute")
        assert done.returncode == 0, (scenario, done.stderr)
        assert committed(bootstrap, group, topic, 2) == expected, scenario

    one = odradek(root, *base, "--topic", f"{topic}:1", "--to-offset", "4", "--execute")
    assert one.returncode == 0, one.stderr
    assert committed(bootstrap, group, topic, 2) == {0: 2, 1: 4}
    missing = odradek(root, *base, "--topic", "no-such-topic", "--to-earliest")
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_confluent_admin_alters_lists_and_deletes_offsets(bootstrap):
    topic = topic_with_records(bootstrap)
    group = f"alter-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 2)])
    admin.alter_consumer_group_offsets([request])[group].result(30)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    partitions = listed[group].result(30).topic_partitions
    assert [(tp.topic, tp.partition, tp.offset) for tp in partitions] == [(topic, 0, 2)]
    admin.delete_consumer_groups([group])[group].result(30)
    with pytest.raises(KafkaException) as gone:
        admin.delete_consumer_groups([group])[group].result(30)
    assert gone.value.args[0].name() == "GROUP_ID_NOT_FOUND"


# -- groups with members ----------------------------------------------------------------------


def test_a_live_group_describes_members_and_refuses_delete_and_reset(cluster_dir, bootstrap):
    root, state = cluster_dir
    topic = topic_with_records(bootstrap)
    group = f"live-{uuid.uuid4().hex[:6]}"
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    try:
        consumer.subscribe([topic])
        assert len(poll_messages(consumer, 5, 60)) >= 5
        consumer.commit(asynchronous=False)

        shown = odradek(
            root, "groups", "describe", "--group", group, "--bootstrap-server", bootstrap
        )
        assert shown.returncode == 0, shown.stderr
        assert "Stable" in shown.stdout and "1 member(s)" in shown.stdout
        assert f"{topic}-0" in shown.stdout and f"{topic}-1" in shown.stdout  # its assignment

        deleted = odradek(
            root, "groups", "delete", "--group", group, "--bootstrap-server", bootstrap
        )
        assert deleted.returncode == 1 and "NON_EMPTY_GROUP" in deleted.stderr
        reset = odradek(
            root,
            "groups",
            "reset-offsets",
            "--group",
            group,
            "--all-topics",
            "--to-earliest",
            "--execute",
            "--bootstrap-server",
            bootstrap,
        )
        assert reset.returncode == 1 and "NON_EMPTY_GROUP" in reset.stderr

        # commit() commits the partitions consumed from: at least one has a lag series
        assert scraped_lags(state, group, topic)
    finally:
        consumer.close()

    listed = odradek(root, "groups", "list", "--state", "Empty", "--bootstrap-server", bootstrap)
    assert listed.returncode == 0, listed.stderr
    assert group in listed.stdout  # left cleanly: empty, offsets kept
    deleted = odradek(root, "groups", "delete", "--group", group, "--bootstrap-server", bootstrap)
    assert deleted.returncode == 0, deleted.stderr
    gone = odradek(root, "groups", "describe", "--group", group, "--bootstrap-server", bootstrap)
    assert gone.returncode == 1 and "does not exist" in gone.stderr


def test_a_kip848_group_lists_as_consumer_and_describes_its_assignment(cluster_dir, bootstrap):
    root, _ = cluster_dir
    topic = topic_with_records(bootstrap)
    group = f"kip848-{uuid.uuid4().hex[:6]}"
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.5)
        assert len(consumer.assignment()) == 2

        row: list[str] = []
        deadline = time.monotonic() + 20  # Stable once the member acknowledged its assignment
        while row[2:3] != ["Stable"] and time.monotonic() < deadline:
            listed = odradek(
                root, "groups", "list", "--type", "consumer", "--bootstrap-server", bootstrap
            )
            assert listed.returncode == 0, listed.stderr
            rows = [line.split() for line in listed.stdout.splitlines()]
            row = next((r for r in rows if r[0] == group), [])
            consumer.poll(0.2)
        assert row[1:] == ["consumer", "Stable", "consumer"]
        classic = odradek(
            root, "groups", "list", "--type", "classic", "--bootstrap-server", bootstrap
        )
        assert group not in classic.stdout

        shown = odradek(
            root, "groups", "describe", "--group", group, "--bootstrap-server", bootstrap
        )
        assert shown.returncode == 0, shown.stderr
        assert "1 member(s)" in shown.stdout
        assert f"{topic}-0, {topic}-1" in shown.stdout  # decoded from the member's assignment
        deleted = odradek(
            root, "groups", "delete", "--group", group, "--bootstrap-server", bootstrap
        )
        assert deleted.returncode == 1 and "NON_EMPTY_GROUP" in deleted.stderr
    finally:
        consumer.close()
