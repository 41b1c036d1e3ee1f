"""A client cannot send the controller's requests: only the control plane serves them, with epochs.

A real cluster (``odradek local up``: ZooKeeper, a controller, two brokers with a client and a
control-plane listener each). The test plays the attacker with Odradek's own client on a broker's
client port: StopReplica with delete and controller epoch 2^31-1 used to delete the logs and lock
the real controller out of that broker. It plays a stale controller on the control plane too.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kazoo.client import KazooClient
from kio.schema.metadata.v4.request import MetadataRequestTopic

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.local.cluster import ClusterState, Member
from odradek.protocol import schemas
from odradek.protocol.interbroker import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
    UpdateMetadataRequest,
)
from support.consuming import poll_records
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 30.0
CONTROLLER_EPOCH_MAX = 2**31 - 1
CONTROLLER_APIS = {4, 5, 6}


@pytest.fixture(scope="module")
def running(tmp_path_factory, local_cluster):
    with local_cluster(tmp_path_factory.mktemp("control-plane"), brokers=2) as state:
        yield state


def _broker(state: ClusterState, broker_id: int) -> Member:
    return next(m for m in state.members if m.role == "broker" and m.id == broker_id)


def _send(address: str, request):
    host, port = address.rsplit(":", 1)

    async def send():
        async with await BrokerConnection.open(host, int(port), connect_timeout_s=5) as conn:
            return await conn.send(request, timeout_s=10)

    return asyncio.run(send())


def _api_versions(address: str) -> dict[int, tuple[int, int]]:
    host, port = address.rsplit(":", 1)

    async def negotiate():
        async with await BrokerConnection.open(host, int(port), connect_timeout_s=5) as conn:
            return dict(await conn.negotiate_versions())

    return asyncio.run(negotiate())


def _zk_get(state: ClusterState, path: str):
    """(data, stat) of a znode under the cluster's chroot."""
    client = KazooClient(state.zookeeper_connect)
    client.start(timeout=10)
    try:
        return client.get(path)
    finally:
        client.stop()
        client.close()


def _create_topic(state: ClusterState, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=state.bootstrap_servers, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def _led_by(state: ClusterState, topic: str) -> dict[int, int]:
    """Partition -> leader, once every partition has one (from a broker's Metadata)."""
    request = schemas.request_schema(3, 4)(
        topics=(MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False
    )
    response = _send(state.bootstrap_servers.split(",")[0], request)
    (described,) = response.topics
    leaders = {p.partition_index: p.leader_id for p in described.partitions}
    return leaders if leaders and all(leader >= 0 for leader in leaders.values()) else {}


def _produce(state: ClusterState, topic: str, count: int) -> list[bytes]:
    """``count`` records with acks=all, every one acknowledged; returns their values."""
    producer = KafkaProducer(
        bootstrap_servers=state.bootstrap_servers, acks="all", enable_idempotence=False, retries=10
    )
    sent = [f"{topic}-{i}".encode() for i in range(count)]
    futures = [producer.send(topic, value=value) for value in sent]
    producer.flush(timeout=30)
    for future in futures:
        future.get(timeout=10)
    producer.close(timeout=5)
    return sent


def _consume(state: ClusterState, topic: str, partitions: int, expected: int) -> list[bytes]:
    """Every record of ``topic`` from the beginning, until ``expected`` came or time ran out."""
    consumer = KafkaConsumer(bootstrap_servers=state.bootstrap_servers, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    received = [r.value for r in poll_records(consumer, expected, WAIT_S)]
    consumer.close()
    return received


def _stop_replica_delete(topic: str, partitions: list[int], controller_epoch: int, **kw):
    return StopReplicaRequest(
        controller_id=1000,
        controller_epoch=controller_epoch,
        topic_states=(
            StopReplicaTopicState(
                topic_name=topic,
                partition_states=tuple(
                    StopReplicaPartitionState(
                        partition_index=p, leader_epoch=-2, delete_partition=True
                    )
                    for p in partitions
                ),
            ),
        ),
        **kw,
    )


def test_stop_replica_from_a_client_deletes_nothing_and_locks_nobody_out(running):
    state = running
    _create_topic(state, "victim", 4)
    leaders = wait_until(lambda: _led_by(state, "victim"), "victim's leaders", WAIT_S)
    kept = _produce(state, "victim", 40)
    target = _broker(state, 1)
    mine = sorted(p for p, leader in leaders.items() if leader == target.id)
    assert mine, f"broker 1 leads none of {leaders}"
    log_dirs = [
        d for p in mine for d in Path(target.data_dir).glob(f"disk-*/victim-{p}") if d.is_dir()
    ]
    assert len(log_dirs) == len(mine)

    response = _send(target.address, _stop_replica_delete("victim", mine, CONTROLLER_EPOCH_MAX))

    refused = ErrorCode.cluster_authorization_failed
    assert response.error_code == refused
    assert [(e.topic_name, e.partition_index, e.error_code) for e in response.partition_errors] == [
        ("victim", p, refused) for p in mine
    ]
    assert all(d.is_dir() for d in log_dirs)
    # The controller still leads that broker: a new topic on it is created and served ...
    _create_topic(state, "after-attack", 4)
    after = wait_until(lambda: _led_by(state, "after-attack"), "after-attack's leaders", WAIT_S)
    assert target.id in after.values()
    sent = _produce(state, "after-attack", 40)
    assert sorted(_consume(state, "after-attack", 4, len(sent))) == sorted(sent)
    # ... and the victim's records are all still there.
    assert sorted(_consume(state, "victim", 4, len(kept))) == sorted(kept)


def test_the_client_listener_does_not_advertise_the_controller_apis(running):
    state = running
    for broker in (m for m in state.members if m.role == "broker"):
        client = _api_versions(broker.address)
        assert not CONTROLLER_APIS & set(client)
        assert {0, 1, 3, 18, 19} <= set(client)
        control_plane = _api_versions(broker.control_plane)
        assert set(control_plane) == CONTROLLER_APIS | {18}


def test_the_control_plane_refuses_a_request_without_the_brokers_epoch(running):
    state = running
    target = _broker(state, 2)
    _, stat = _zk_get(state, "/brokers/ids/2")
    broker_epoch = stat.czxid  # Kafka's broker epoch

    def update_metadata(broker_epoch: int, controller_epoch: int) -> UpdateMetadataRequest:
        return UpdateMetadataRequest(
            controller_id=1000,
            controller_epoch=controller_epoch,
            broker_epoch=broker_epoch,
            topic_states=(),
            live_brokers=(),  # would empty the broker's view of the cluster if taken
        )

    for stale in (broker_epoch - 1, -1, broker_epoch + 1):
        for request in (
            update_metadata(stale, CONTROLLER_EPOCH_MAX),
            _stop_replica_delete("victim", [0, 1, 2, 3], CONTROLLER_EPOCH_MAX, broker_epoch=stale),
        ):
            response = _send(target.control_plane, request)
            assert response.error_code == ErrorCode.stale_broker_epoch, (stale, request)
    # Its own epoch passes the broker epoch check; the controller epoch check comes next.
    response = _send(target.control_plane, update_metadata(broker_epoch, 0))
    assert response.error_code == ErrorCode.stale_controller_epoch
    # Nothing was taken: the broker still knows both brokers and serves clients.
    request = schemas.request_schema(3, 1)(topics=())
    assert sorted(b.node_id for b in _send(target.address, request).brokers) == [1, 2]
