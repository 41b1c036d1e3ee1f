"""A real broker (in process, real sockets) with a test authorizer: kafka-python sees only the
topics it may describe and gets TOPIC_AUTHORIZATION_FAILED for the others; forged controller
requests and follower fetches from a client are refused before any epoch is compared."""

from __future__ import annotations

import asyncio
import importlib.util
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from odradek.broker.metadata_cache import PartitionMetadata, TopicMetadata
from odradek.broker.partition import PartitionState
from odradek.client.connection import BrokerConnection
from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode
from odradek.protocol import interbroker, schemas
from odradek.protocol.apis import ApiKey
from odradek.protocol.interbroker import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from odradek.security.acl import AclOperation, ResourceType
from odradek.security.principal import ANONYMOUS
from support.authorizer import MemoryAuthorizer
from support.requests import entry_type, fill

pytestmark = pytest.mark.integration

_spec = importlib.util.spec_from_file_location(
    "in_process_broker_authz", Path(__file__).with_name("conftest.py")
)
in_process = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(in_process)

HIDDEN = "hidden"
BROKER_EPOCH = 4242
WRONG_EPOCH = 4243


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    running = in_process.RunningBroker(tmp_path_factory.mktemp("authz"))

    def lead_hidden() -> None:
        state = PartitionState(leader=1, leader_epoch=0, isr=(1,), replicas=(1,))
        running.replicas.become_leader_or_follower(HIDDEN, 0, state, TopicConfig())
        running.metadata.update_topic(
            TopicMetadata(HIDDEN, uuid.uuid4(), {0: PartitionMetadata(0, 1, 0, (1,), (1,))})
        )
        running.context.broker_epoch = BROKER_EPOCH

    running.call_sync(lead_hidden)
    topic = ResourceType.TOPIC
    authorizer = MemoryAuthorizer(super_users=set())
    for operation in (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.READ):
        authorizer.allow(operation, topic, running.topic, principal=ANONYMOUS)
    running.context.authorizer = authorizer
    yield running
    running.close()


def test_kafka_python_sees_and_writes_only_what_it_may(secured):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    consumer = KafkaConsumer(bootstrap_servers=secured.bootstrap)
    try:
        assert consumer.topics() == {secured.topic}
    finally:
        consumer.close()

    producer = KafkaProducer(
        bootstrap_servers=secured.bootstrap,
        enable_idempotence=False,
        acks=1,
        max_block_ms=5000,
        retries=0,
    )
    try:
        assert producer.send(secured.topic, b"v", partition=0).get(timeout=10).offset >= 0
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(HIDDEN, b"v", partition=0).get(timeout=10)
    finally:
        producer.close(timeout=5)


def send(secured, request, *, control_plane=False):
    port = secured.control_port if control_plane else secured.port

    async def run():
        async with await BrokerConnection.open("127.0.0.1", port) as connection:
            return await connection.send(request, timeout_s=10)

    return asyncio.run(asyncio.wait_for(run(), 15))


def forged_controller_requests(secured):
    state = LeaderAndIsrPartitionState(
        partition_index=0,
        controller_epoch=1,
        leader=2,
        leader_epoch=99,
        isr=(2,),
        partition_epoch=9,
        replicas=(1, 2),
    )
    return [
        LeaderAndIsrRequest(
            controller_id=100,
            controller_epoch=1,
            broker_epoch=WRONG_EPOCH,
            type_=0,
            topic_states=(
                LeaderAndIsrTopicState(
                    topic_name=secured.topic, topic_id=uuid.uuid4(), partition_states=(state,)
                ),
            ),
            live_leaders=(),
        ),
        UpdateMetadataRequest(
            controller_id=100,
            controller_epoch=1,
            broker_epoch=WRONG_EPOCH,
            topic_states=(),
            live_brokers=(),
        ),
        StopReplicaRequest(
            controller_id=100, controller_epoch=1, broker_epoch=WRONG_EPOCH, topic_states=()
        ),
    ]


def test_forged_controller_requests_are_refused_before_the_broker_epoch(secured):
    interbroker.register_all()
    for request in forged_controller_requests(secured):
        answer = send(secured, request, control_plane=True)
        assert answer.error_code == ErrorCode.cluster_authorization_failed, type(request)
    leader = secured.replicas.get_partition(secured.topic, 0)
    assert leader.state.leader == 1  # nothing changed


def test_with_cluster_action_the_epoch_is_compared(secured):
    interbroker.register_all()
    secured.context.authorizer.super_users.add(str(ANONYMOUS))
    try:
        for request in forged_controller_requests(secured):
            answer = send(secured, request, control_plane=True)
            assert answer.error_code == ErrorCode.stale_broker_epoch, type(request)
    finally:
        secured.context.authorizer.super_users.discard(str(ANONYMOUS))


def fetch(secured, replica_id):
    request_type = schemas.request_schema(ApiKey.FETCH, 12)
    topic_type = entry_type(request_type, "topics")
    partition_type = entry_type(topic_type, "partitions")
    request = fill(
        request_type,
        replica_id=replica_id,
        max_wait=timedelta(0),
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=tuple(
            fill(
                topic_type,
                topic=name,
                partitions=(
                    fill(
                        partition_type,
                        partition=0,
                        current_leader_epoch=-1,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 16,
                    ),
                ),
            )
            for name in (secured.topic, HIDDEN)
        ),
    )
    answer = send(secured, request)
    return {t.topic: t.partitions[0].error_code for t in answer.responses}


def test_a_follower_fetch_without_cluster_action_and_a_consumer_fetch_per_topic(secured):
    assert fetch(secured, 2) == {
        secured.topic: ErrorCode.topic_authorization_failed,
        HIDDEN: ErrorCode.topic_authorization_failed,
    }
    assert fetch(secured, -1) == {
        secured.topic: ErrorCode.none,
        HIDDEN: ErrorCode.topic_authorization_failed,
    }


def test_confluent_kafka_describes_the_cluster_with_its_authorized_operations(secured):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    described = admin.describe_cluster(
        include_authorized_operations=True, request_timeout=10
    ).result(timeout=15)
    assert described.cluster_id == "test-cluster"
    assert [n.id for n in described.nodes] == [1]
    assert described.controller.id == 1
    assert not described.authorized_operations  # no DESCRIBE on the cluster: 0, none
    secured.context.authorizer.super_users.add(str(ANONYMOUS))
    try:
        described = admin.describe_cluster(
            include_authorized_operations=True, request_timeout=10
        ).result(timeout=15)
    finally:
        secured.context.authorizer.super_users.discard(str(ANONYMOUS))
    assert len(described.authorized_operations) == 7  # Kafka's seven Cluster operations
