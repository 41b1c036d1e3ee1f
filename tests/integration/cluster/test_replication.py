"""Replication on a real three-broker cluster: followers hold the leader's bytes, the ISR shrinks
and expands through the controller and Metadata shows it, acks=all refuses below
min.insync.replicas, and a replication factor above the live brokers is refused."""

from __future__ import annotations

import asyncio
import signal
import urllib.request
from datetime import timedelta

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.metadata.v12 import request as metadata_request
from kio.schema.produce.v9 import request as produce_request

from odradek.client.connection import BrokerConnection
from odradek.common.topics import parse_log_directory_name
from odradek.errors import ErrorCode
from odradek.local import cluster
from support.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC = "replicated"
WAIT_S = 30.0
LAG_MS = 2_000
REPLICATED = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": str(LAG_MS),
    "replica.fetch.wait.max.ms": "200",
}


@pytest.fixture(scope="module")
def running(tmp_path_factory, local_cluster):
    data_dir = tmp_path_factory.mktemp("replication")
    with local_cluster(data_dir, brokers=3, broker_overrides=REPLICATED) as state:
        admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(timeout=WAIT_S)
        wait_until(lambda: _partition(admin) is not None, "the topic's partition", WAIT_S)
        yield data_dir, state, admin


def _partition(admin):
    topic = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
    return None if topic is None else topic.partitions.get(0)


def _metadata(admin):
    found = _partition(admin)
    assert found is not None, f"no metadata for {TOPIC}-0"
    return found


def _isr(state, broker_id: int) -> list[int]:
    """The ISR in a Metadata answer from ``broker_id`` itself (an admin client could pick a
    paused broker and wait on it)."""
    return asyncio.run(_metadata_isr(_member(state, broker_id).address))


async def _metadata_isr(address: str) -> list[int]:
    host, port = address.rsplit(":", 1)
    async with await BrokerConnection.open(host, int(port)) as connection:
        response = await connection.send(
            metadata_request.MetadataRequest(
                topics=(metadata_request.MetadataRequestTopic(topic_id=None, name=TOPIC),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    [topic] = response.topics
    [partition] = topic.partitions
    return sorted(partition.isr_nodes)


def _produce(state, n: int, acks: str = "all") -> None:
    producer = Producer(
        {
            "bootstrap.servers": state.bootstrap_servers,
            "acks": acks,
            "enable.idempotence": acks == "all",
            "linger.ms": 5,
            "message.timeout.ms": 20_000,
        }
    )
    failures = []
    for i in range(n):
        producer.produce(
            TOPIC, b"v%d" % i, on_delivery=lambda e, m: failures.append(e) if e else None
        )
    assert producer.flush(30) == 0
    assert failures == []


def _member(state, broker_id):
    return next(m for m in state.members if m.role == "broker" and m.id == broker_id)


def _segments(member) -> bytes:
    """The partition's segment files on one broker, concatenated (one segment each here)."""
    for log_dir in cluster.broker_log_dirs(member):
        for directory in log_dir.iterdir():
            if parse_log_directory_name(directory.name) == (TOPIC, 0):
                return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
    return b""


def _metric(member, name: str) -> float:
    with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def test_followers_hold_the_leaders_bytes(running):
    _, state, admin = running
    _produce(state, 500)
    leader = _metadata(admin).leader
    expected = _segments(_member(state, leader))
    assert len(expected) > 500 * 10
    for broker_id in (1, 2, 3):
        wait_until(
            lambda b=broker_id: _segments(_member(state, b)) == expected,
            f"broker {broker_id}",
            WAIT_S,
        )


def test_the_isr_shrinks_and_expands_through_the_controller(running):
    """A paused follower (within its ZooKeeper session) falls out of the ISR after
    replica.lag.time.max.ms: the leader asks the controller, Metadata shows two replicas, and
    acks=all goes on with min.insync.replicas 2; resumed, it catches up and is back."""
    _, state, admin = running
    leader_id = _metadata(admin).leader
    follower = _member(state, next(b for b in (1, 2, 3) if b != leader_id))
    leader = _member(state, leader_id)
    shrinks = _metric(leader, "odradek_broker_isr_shrinks_total")
    expands = _metric(leader, "odradek_broker_isr_expands_total")
    assert cluster.kill(follower, signal.SIGSTOP)
    try:
        _produce(state, 50)  # the follower's lag starts with data it does not fetch
        wait_until(lambda: len(_isr(state, leader_id)) == 2, "the ISR to shrink", LAG_MS / 1000 * 5)
        assert follower.id not in _isr(state, leader_id)
        _produce(state, 50)  # acks=all with an ISR of 2 = min.insync.replicas
        assert _metric(leader, "odradek_broker_isr_shrinks_total") == shrinks + 1
        assert _metric(leader, "odradek_broker_under_replicated_partitions") == 1
    finally:
        cluster.kill(follower, signal.SIGCONT)
    wait_until(lambda: _isr(state, leader_id) == [1, 2, 3], "the ISR to expand", WAIT_S)
    assert all(_isr(state, b) == [1, 2, 3] for b in (1, 2, 3))  # every broker's Metadata
    assert _metric(leader, "odradek_broker_isr_expands_total") == expands + 1


def test_acks_all_below_min_insync_replicas_is_refused(running, kafka_batch):
    """With two brokers paused, the leader's ISR shrinks to itself: acks=all is refused with
    NOT_ENOUGH_REPLICAS before anything is written, acks=1 still works."""
    _, state, admin = running
    leader_id = _metadata(admin).leader
    others = [_member(state, b) for b in (1, 2, 3) if b != leader_id]
    leader = _member(state, leader_id)
    for member in others:
        assert cluster.kill(member, signal.SIGSTOP)
    try:
        _produce(state, 10, acks="1")
        wait_until(
            lambda: _isr(state, leader_id) == [leader_id], "the ISR to shrink to the leader", WAIT_S
        )
        batch = kafka_batch([(b"k", b"v")])
        errors = asyncio.run(_raw_produce(leader.address, batch, acks=-1))
        assert errors == [ErrorCode.not_enough_replicas]
        assert asyncio.run(_raw_produce(leader.address, batch, acks=1)) == [ErrorCode.none]
    finally:
        for member in others:
            cluster.kill(member, signal.SIGCONT)
    wait_until(lambda: _isr(state, leader_id) == [1, 2, 3], "the ISR to expand", WAIT_S)


async def _raw_produce(address: str, batch: bytes, acks: int) -> list[ErrorCode]:
    host, port = address.rsplit(":", 1)
    async with await BrokerConnection.open(host, int(port)) as connection:
        response = await connection.send(
            produce_request.ProduceRequest(
                transactional_id=None,
                acks=acks,
                timeout=timedelta(seconds=5),
                topic_data=(
                    produce_request.TopicProduceData(
                        name=TOPIC,
                        partition_data=(
                            produce_request.PartitionProduceData(index=0, records=batch),
                        ),
                    ),
                ),
            )
        )
    return [p.error_code for t in response.responses for p in t.partition_responses]


def test_a_replication_factor_above_the_live_brokers_is_refused(running):
    _, _, admin = running
    future = admin.create_topics([NewTopic("too-many-replicas", 1, replication_factor=4)])
    with pytest.raises(Exception, match="INVALID_REPLICATION_FACTOR|[Rr]eplication factor"):
        future["too-many-replicas"].result(timeout=WAIT_S)
