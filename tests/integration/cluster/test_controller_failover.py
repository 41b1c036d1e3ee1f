"""A real cluster on loopback survives kill -9: of the active controller, and of a broker.

ZooKeeper, two controllers and three brokers run as real processes (``odradek local up``); the
test kills them by pid and checks, with kafka-python, that leadership moves and returns and that
no acknowledged record is lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kazoo.client import KazooClient

from odradek.local.cluster import ClusterState
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 30.0


@pytest.fixture(scope="module")
def running(tmp_path_factory, local_cluster):
    data_dir = tmp_path_factory.mktemp("cluster")
    with local_cluster(data_dir, brokers=3, controllers=2) as state:
        yield data_dir, state


def _zk(state: ClusterState) -> KazooClient:
    client = KazooClient(state.zookeeper_connect)
    client.start(timeout=10)
    return client


def _controller(state: ClusterState) -> tuple[int, int]:
    client = _zk(state)
    try:
        data, _ = client.get("/controller")
        epoch, _ = client.get("/controller_epoch")
        return json.loads(data)["brokerid"], int(epoch)
    finally:
        client.stop()
        client.close()


def _leaders(state: ClusterState, topic: str) -> dict[int, int]:
    client = _zk(state)
    try:
        partitions = client.get_children(f"/brokers/topics/{topic}/partitions")
        return {
            int(p): json.loads(client.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])[
                "leader"
            ]
            for p in partitions
        }
    finally:
        client.stop()
        client.close()


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)

    def known() -> bool:
        consumer.topics()  # refreshes the metadata
        return len(consumer.partitions_for_topic(topic) or ()) == partitions

    try:
        wait_until(known, f"{topic} in metadata", WAIT_S)
    finally:
        consumer.close()


def _produce(bootstrap: str, topic: str, count: int, tag: str) -> dict[tuple[int, int], bytes]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, retries=10
    )
    futures = [(producer.send(topic, value=f"{tag}-{i}".encode()), i) for i in range(count)]
    producer.flush(timeout=30)
    acknowledged = {}
    for future, i in futures:
        metadata = future.get(timeout=10)
        acknowledged[(metadata.partition, metadata.offset)] = f"{tag}-{i}".encode()
    producer.close(timeout=5)
    return acknowledged


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> dict:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    seen = {}
    deadline = time.monotonic() + WAIT_S
    while len(seen) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            for r in records:
                seen[(r.partition, r.offset)] = r.value
    consumer.close()
    return seen


def test_a_new_controller_takes_over_after_kill_9(running):
    data_dir, state = running
    active_id, epoch = wait_until(lambda: _controller(state), "an active controller", WAIT_S)
    active = next(m for m in state.members if m.role == "controller" and m.id == active_id)
    os.kill(active.pid, signal.SIGKILL)
    new_id, new_epoch = wait_until(
        lambda: (c := _controller_or_none(state)) and c[0] != active_id and c,
        "another controller",
        WAIT_S,
    )
    assert new_epoch > epoch
    # The new controller does its job: a topic created now gets leaders and takes records.
    _create_topic(state.bootstrap_servers, "after-failover", 3)
    acknowledged = _produce(state.bootstrap_servers, "after-failover", 300, "a")
    assert _consume_all(state.bootstrap_servers, "after-failover", 3, 300) == acknowledged


def _controller_or_none(state):
    try:
        return _controller(state)
    except Exception:
        return None


def test_a_broker_that_dies_and_returns_gets_its_partitions_back(running):
    data_dir, state = running
    _create_topic(state.bootstrap_servers, "orders", 6)
    before = _leaders(state, "orders")
    assert set(before.values()) == {1, 2, 3}
    acknowledged = _produce(state.bootstrap_servers, "orders", 600, "before")

    victim = next(m for m in state.members if m.role == "broker" and m.id == 2)
    os.kill(victim.pid, signal.SIGKILL)
    wait_until(
        lambda: all(leader != 2 for leader in _leaders(state, "orders").values()),
        "failover",
        WAIT_S,
    )
    # With one replica there is no one to take over: broker 2's partitions have no leader.
    assert {p for p, leader in _leaders(state, "orders").items() if leader == -1} == {
        p for p, leader in before.items() if leader == 2
    }

    with open(victim.log, "ab") as log:
        restarted = subprocess.Popen(
            [sys.executable, "-m", "odradek.cli", "broker", *_broker_args(victim, state)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: _leaders(state, "orders") == before, "broker 2 leading again", WAIT_S)
        survivors = _consume_all(state.bootstrap_servers, "orders", 6, len(acknowledged))
        assert survivors == acknowledged  # nothing acknowledged was lost in the kill -9
    finally:
        restarted.send_signal(signal.SIGTERM)
        try:
            restarted.wait(timeout=20)
        except subprocess.TimeoutExpired:
            restarted.kill()
            restarted.wait(timeout=10)


def _broker_args(member, state: ClusterState) -> list[str]:
    log_dirs = ",".join(str(Path(member.data_dir) / f"disk-{d}") for d in range(2))
    return [
        "--override",
        f"broker.id={member.id}",
        "--override",
        f"zookeeper.connect={state.zookeeper_connect}",
        "--override",
        f"listeners=PLAINTEXT://{member.address},CONTROL_PLANE://{member.control_plane}",
        "--override",
        f"log.dirs={log_dirs}",
        "--override",
        f"odradek.admin.listener={member.admin}",
    ]
