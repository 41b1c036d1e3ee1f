"""A raw AlterPartition over TCP to the active controller of a real cluster (ZooKeeper, two
controller processes, three brokers) changes a partition's ISR in ZooKeeper and in the brokers'
Metadata, and every stale or wrong request is refused with its own error code."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kazoo.client import KazooClient

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from support.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC = "isr-changes"
WAIT_S = 30.0
REQUEST_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def running(tmp_path_factory, local_cluster):
    with local_cluster(tmp_path_factory.mktemp("cluster"), brokers=3, controllers=2) as state:
        admin = KafkaAdminClient(bootstrap_servers=state.bootstrap_servers)
        try:
            admin.create_topics([NewTopic(TOPIC, 2, 3)])
        finally:
            admin.close()
        zk = KazooClient(state.zookeeper_connect)
        zk.start(timeout=WAIT_S)
        try:
            wait_until(
                lambda: zk.exists(f"/brokers/topics/{TOPIC}/partitions/1/state"), "states", WAIT_S
            )
            yield state, zk
        finally:
            zk.stop()
            zk.close()


def _snapshot(zk: KazooClient, partition: int) -> dict:
    """What a leader knows: topic id, state, partition epoch, broker epochs, the controller."""
    data, stat = zk.get(f"/brokers/topics/{TOPIC}/partitions/{partition}/state")
    controller = json.loads(zk.get("/controller")[0])
    topic_id = json.loads(zk.get(f"/brokers/topics/{TOPIC}")[0])["topic_id"]
    return {
        "state": json.loads(data),
        "partition_epoch": stat.version,
        "topic_id": uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "==")),
        "broker_epochs": {
            int(b): zk.exists(f"/brokers/ids/{b}").czxid for b in zk.get_children("/brokers/ids")
        },
        "controller": controller,
    }


def _request(version, broker_id, broker_epoch, topic_id, index, leader_epoch, isr, epoch):
    request_type = schemas.request_schema(ApiKey.ALTER_PARTITION, version)
    topic_type = request_type.__dataclass_fields__["topics"].type.__args__[0]
    partition_type = topic_type.__dataclass_fields__["partitions"].type.__args__[0]
    if version >= 3:
        state_type = partition_type.__dataclass_fields__["new_isr_with_epochs"].type.__args__[0]
        members = {
            "new_isr_with_epochs": tuple(state_type(broker_id=b, broker_epoch=e) for b, e in isr)
        }
    else:
        members = {"new_isr": tuple(isr)}
    partition = partition_type(
        partition_index=index,
        leader_epoch=leader_epoch,
        leader_recovery_state=0,
        partition_epoch=epoch,
        **members,
    )
    return request_type(
        broker_id=broker_id,
        broker_epoch=broker_epoch,
        topics=(topic_type(topic_id=topic_id, partitions=(partition,)),),
    )


async def _send(host: str, port: int, request):
    async with await BrokerConnection.open(host, port) as connection:
        return await connection.send(request, timeout_s=REQUEST_TIMEOUT_S)


def _send_sync(endpoint, request):
    return asyncio.run(_send(*endpoint, request))


async def _metadata_isr(bootstrap: str, partition: int) -> tuple[int, ...]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    request = schemas.request_schema(ApiKey.METADATA, 12)(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    async with await BrokerConnection.open(host, int(port)) as connection:
        response = await connection.send(request, timeout_s=REQUEST_TIMEOUT_S)
    topic = next(t for t in response.topics if t.name == TOPIC)
    return tuple(next(p for p in topic.partitions if p.partition_index == partition).isr_nodes)


def test_the_leader_shrinks_the_isr_through_the_controller(running):
    state, zk = running
    before = _snapshot(zk, 0)
    controller = before["controller"]
    endpoint = (controller["host"], controller["port"])
    leader = before["state"]["leader"]
    epochs = before["broker_epochs"]
    follower = next(b for b in before["state"]["isr"] if b != leader)
    new_isr = tuple(b for b in before["state"]["isr"] if b != follower)
    request = _request(
        3,
        leader,
        epochs[leader],
        before["topic_id"],
        0,
        before["state"]["leader_epoch"],
        [(b, epochs[b]) for b in new_isr],
        before["partition_epoch"],
    )
    response = _send_sync(endpoint, request)
    assert response.error_code == ErrorCode.none
    p = response.topics[0].partitions[0]
    assert (p.error_code, tuple(p.isr), p.partition_epoch) == (
        ErrorCode.none,
        new_isr,
        before["partition_epoch"] + 1,
    )
    after = _snapshot(zk, 0)
    assert after["state"]["isr"] == list(new_isr)
    assert after["state"]["leader"] == leader
    assert after["state"]["leader_epoch"] == before["state"]["leader_epoch"]
    assert after["partition_epoch"] == before["partition_epoch"] + 1
    # UpdateMetadata reached the brokers: Metadata shows the true ISR.
    wait_until(
        lambda: asyncio.run(_metadata_isr(state.bootstrap_servers, 0)) == new_isr,
        "Metadata to show the shrunk ISR",
        WAIT_S,
    )


def test_stale_and_wrong_requests_are_refused_each_with_its_error_code(running):
    state, zk = running
    now = _snapshot(zk, 1)
    controller = now["controller"]
    endpoint = (controller["host"], controller["port"])
    s = now["state"]
    leader, epochs, version = s["leader"], now["broker_epochs"], now["partition_epoch"]
    follower = next(b for b in s["isr"] if b != leader)
    shrunk = [b for b in s["isr"] if b != follower]
    topic_id = now["topic_id"]

    def refused(
        *,
        broker=leader,
        broker_epoch=None,
        tid=topic_id,
        index=1,
        leader_epoch=s["leader_epoch"],
        isr=None,
        epoch=version,
        api_version=2,
    ):
        isr = shrunk if isr is None else isr
        if api_version >= 3:
            isr = [(b, e) for b, e in isr]
        request = _request(
            api_version,
            broker,
            epochs[broker] if broker_epoch is None else broker_epoch,
            tid,
            index,
            leader_epoch,
            isr,
            epoch,
        )
        response = _send_sync(endpoint, request)
        if response.error_code != ErrorCode.none:
            return response.error_code
        return response.topics[0].partitions[0].error_code

    assert refused(broker_epoch=epochs[leader] - 1) == ErrorCode.stale_broker_epoch
    assert refused(tid=uuid.uuid4()) == ErrorCode.unknown_topic_id
    assert refused(index=9) == ErrorCode.unknown_topic_or_partition
    assert refused(broker=follower) == ErrorCode.not_leader_or_follower
    assert refused(leader_epoch=s["leader_epoch"] - 1) == ErrorCode.fenced_leader_epoch
    assert refused(epoch=version + 7) == ErrorCode.invalid_update_version
    assert refused(isr=[*shrunk, 99]) == ErrorCode.ineligible_replica
    stale_member = [(b, epochs[b] - (1 if b == shrunk[-1] else 0)) for b in shrunk]
    assert refused(isr=stale_member, api_version=3) == ErrorCode.ineligible_replica
    assert _snapshot(zk, 1)["partition_epoch"] == version  # nothing was written
    # The controller that is not active says so.
    standby = next(
        m for m in state.members if m.role == "controller" and m.id != controller["brokerid"]
    )
    host, port = standby.address.rsplit(":", 1)
    request = _request(2, leader, epochs[leader], topic_id, 1, s["leader_epoch"], shrunk, version)
    assert _send_sync((host, int(port)), request).error_code == ErrorCode.not_controller
