"""An empty broker leads what a controller tells it on its control plane, and refuses a stale one.

The test plays the controller: it speaks LeaderAndIsr, UpdateMetadata and StopReplica to a real
broker's control-plane server (RunningBroker, on its own event loop thread) over a real socket,
with the protocol layer's client half; clients (kafka-python, and the same client half) use the
client listener. A request from an older controller epoch, or without this broker's epoch, is
refused and changes nothing; on the client listener the controller's requests are refused.
"""

from __future__ import annotations

import importlib.util
import socket
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from odradek.errors import ErrorCode
from odradek.protocol import interbroker, schemas
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.framing import FrameDecoder, encode_frame
from odradek.protocol.interbroker import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from support.consuming import poll_records

pytestmark = pytest.mark.integration

_spec = importlib.util.spec_from_file_location(
    "in_process_broker", Path(__file__).with_name("conftest.py")
)
real_clients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_clients)

BROKER_ID = real_clients.BROKER_ID
BROKER_EPOCH = 4242  # what the registration's czxid would be
OTHER_BROKER = 2
CONTROLLER_ID = 100
TOPIC = "orders"
TOPIC_ID = uuid.uuid4()
PARTITIONS = range(3)


class EmptyBroker(real_clients.RunningBroker):
    """A RunningBroker that hosts nothing and knows no broker until the controller says."""

    def _lead_topic(self) -> None:
        self.context.broker_epoch = BROKER_EPOCH  # as the registrar sets it

    def hosted(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, partition) -> (leader, leader_epoch), read on the broker's loop."""
        return self.call_sync(
            lambda: {
                tp: (p.state.leader, p.state.leader_epoch)
                for tp, p in self.replicas.partitions.items()
            }
        )


class Connection:
    """One connection to a listener of the broker: a request out, its response back."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.decoder = FrameDecoder(min_frame_bytes=4)  # a response can be 8 bytes
        self.correlation_id = 0

    def send(self, request):
        self.correlation_id += 1
        self.sock.sendall(
            b"".join(encode_frame([encode_request(request, self.correlation_id, "c")]))
        )
        frames = []
        while not frames:
            chunk = self.sock.recv(65536)
            assert chunk, "the broker closed the connection"
            frames = self.decoder.feed(chunk)
        (frame,) = frames
        correlation_id, body = decode_response(request.__api_key__, request.__version__, frame)
        assert correlation_id == self.correlation_id
        return body

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def broker(tmp_path):
    interbroker.register_all()  # in case another test registered a stand-in for one of them
    running = EmptyBroker(tmp_path)
    yield running
    running.close()


@pytest.fixture
def controller(broker):
    """The controller's connection: to the control-plane listener."""
    connection = Connection(broker.control_port)
    yield connection
    connection.close()


@pytest.fixture
def client(broker):
    """A client's connection: to the client listener."""
    connection = Connection(broker.port)
    yield connection
    connection.close()


def update_metadata(
    broker,
    controller_epoch,
    leader=BROKER_ID,
    leader_epoch=0,
    partitions=PARTITIONS,
    broker_epoch=BROKER_EPOCH,
):
    live = [
        UpdateMetadataBroker(
            id_=BROKER_ID,
            endpoints=(
                UpdateMetadataEndpoint(
                    port=broker.port, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0
                ),
                UpdateMetadataEndpoint(
                    port=broker.control_port,
                    host="127.0.0.1",
                    listener="CONTROL_PLANE",
                    security_protocol=0,
                ),
            ),
            rack="rack-a",
        )
    ]
    states = tuple(
        UpdateMetadataPartitionState(
            partition_index=p,
            controller_epoch=controller_epoch,
            leader=leader,
            leader_epoch=leader_epoch,
            isr=(BROKER_ID,),
            zk_version=leader_epoch,
            replicas=(BROKER_ID,),
        )
        for p in partitions
    )
    return UpdateMetadataRequest(
        controller_id=CONTROLLER_ID,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=(
            UpdateMetadataTopicState(topic_name=TOPIC, topic_id=TOPIC_ID, partition_states=states),
        ),
        live_brokers=tuple(live),
    )


def leader_and_isr(
    broker,
    controller_epoch,
    *,
    leader=BROKER_ID,
    leader_epoch=0,
    replicas=(BROKER_ID,),
    partitions=PARTITIONS,
    broker_epoch=BROKER_EPOCH,
):
    states = tuple(
        LeaderAndIsrPartitionState(
            partition_index=p,
            controller_epoch=controller_epoch,
            leader=leader,
            leader_epoch=leader_epoch,
            isr=(leader,),
            partition_epoch=leader_epoch,
            replicas=replicas,
            is_new=leader_epoch == 0,
        )
        for p in partitions
    )
    return LeaderAndIsrRequest(
        controller_id=CONTROLLER_ID,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        type_=0,
        topic_states=(
            LeaderAndIsrTopicState(topic_name=TOPIC, topic_id=TOPIC_ID, partition_states=states),
        ),
        live_leaders=(LeaderAndIsrLiveLeader(broker_id=leader, host_name="127.0.0.1", port=1),),
    )


def stop_replica(
    controller_epoch, partition, *, leader_epoch=-2, delete=True, broker_epoch=BROKER_EPOCH
):
    return StopReplicaRequest(
        controller_id=CONTROLLER_ID,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=(
            StopReplicaTopicState(
                topic_name=TOPIC,
                partition_states=(
                    StopReplicaPartitionState(
                        partition_index=partition,
                        leader_epoch=leader_epoch,
                        delete_partition=delete,
                    ),
                ),
            ),
        ),
    )


def partition_errors(response) -> dict[int, ErrorCode]:
    (topic,) = response.topics
    assert topic.topic_id == TOPIC_ID
    return {p.partition_index: p.error_code for p in topic.partition_errors}


def lead_orders(broker, controller, controller_epoch=1):
    assert controller.send(update_metadata(broker, controller_epoch)).error_code == ErrorCode.none
    response = controller.send(leader_and_isr(broker, controller_epoch))
    assert response.error_code == ErrorCode.none
    assert partition_errors(response) == dict.fromkeys(PARTITIONS, ErrorCode.none)


def produce(client, partition: int, value: bytes) -> ErrorCode:
    """One record to ``orders``/``partition`` with acks=1, on a client connection."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, int(time.time() * 1000), None, value, [])
    produce_type = schemas.request_schema(0, 9)
    module = importlib.import_module(produce_type.__module__)
    request = produce_type(
        transactional_id=None,
        acks=1,
        timeout=timedelta(seconds=5),
        topic_data=(
            module.TopicProduceData(
                name=TOPIC,
                partition_data=(
                    module.PartitionProduceData(index=partition, records=bytes(builder.build())),
                ),
            ),
        ),
    )
    (topic,) = client.send(request).responses
    return topic.partition_responses[0].error_code


def metadata(client):
    request = schemas.request_schema(3, 12)(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    return client.send(request)


def api_versions(connection) -> dict[int, tuple[int, int]]:
    response = connection.send(
        schemas.request_schema(18, 3)(client_software_name="test", client_software_version="1")
    )
    assert response.error_code == ErrorCode.none
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_each_listener_advertises_what_it_serves(broker, controller, client):
    control_plane = api_versions(controller)
    assert control_plane == {4: (7, 7), 5: (4, 4), 6: (8, 8), 18: (0, 4)}
    assert control_plane == broker.control_plane.served_versions
    served = api_versions(client)
    assert served == broker.server.served_versions
    assert not {4, 5, 6, 7} & set(served)  # ControlledShutdown is the controller's to answer
    assert {0, 1, 3, 18, 19} <= set(served)


def test_a_client_api_on_the_control_plane_closes_the_connection(broker, controller):
    with pytest.raises(AssertionError, match="closed the connection"):
        metadata(controller)


def test_controller_requests_on_the_client_listener_are_refused_and_change_nothing(
    broker, controller, client
):
    lead_orders(broker, controller)
    assert produce(client, 0, b"kept") == ErrorCode.none
    before_hosted, before_topics = broker.hosted(), dict(broker.metadata.topics)
    refused = ErrorCode.cluster_authorization_failed
    big = 2**31 - 1  # a controller epoch no controller has: it would lock the real one out

    stop = client.send(stop_replica(big, 0, broker_epoch=BROKER_EPOCH))
    assert stop.error_code == refused
    assert [(p.topic_name, p.partition_index, p.error_code) for p in stop.partition_errors] == [
        (TOPIC, 0, refused)
    ]
    lead = client.send(leader_and_isr(broker, big, leader=OTHER_BROKER, leader_epoch=9))
    assert lead.error_code == refused
    assert partition_errors(lead) == dict.fromkeys(PARTITIONS, refused)
    assert client.send(update_metadata(broker, big, leader=-2)).error_code == refused

    assert broker.hosted() == before_hosted
    assert dict(broker.metadata.topics) == before_topics
    assert broker.context.controller_epoch == 1  # the real controller is not locked out
    assert (broker.log_manager.log_dir_of(TOPIC, 0) / f"{TOPIC}-0").is_dir()
    assert produce(client, 0, b"still served") == ErrorCode.none
    counted = broker.registry.get_sample_value(
        "odradek_broker_refused_controller_requests_total", {"api": "StopReplica"}
    )
    assert counted == 1
    # The real controller is obeyed still: its next decision is taken.
    moved = controller.send(
        leader_and_isr(broker, 2, leader=OTHER_BROKER, leader_epoch=1, replicas=(1, 2))
    )
    assert partition_errors(moved) == dict.fromkeys(PARTITIONS, ErrorCode.none)


def test_a_request_without_this_brokers_epoch_is_refused_and_changes_nothing(
    broker, controller, client
):
    lead_orders(broker, controller)
    before_hosted, before_topics = broker.hosted(), dict(broker.metadata.topics)
    stale = ErrorCode.stale_broker_epoch
    # An older incarnation's epoch, none (-1), and a newer one ZooKeeper does not confirm.
    for epoch in (BROKER_EPOCH - 1, -1, BROKER_EPOCH + 1):
        moved = controller.send(
            leader_and_isr(
                broker, 2, leader=OTHER_BROKER, leader_epoch=1, replicas=(1, 2), broker_epoch=epoch
            )
        )
        assert moved.error_code == stale
        assert partition_errors(moved) == dict.fromkeys(PARTITIONS, stale)
        stopped = controller.send(stop_replica(2, 0, broker_epoch=epoch))
        assert (stopped.error_code, stopped.partition_errors) == (stale, ())
        dropped = controller.send(update_metadata(broker, 2, leader=-2, broker_epoch=epoch))
        assert dropped.error_code == stale

    assert broker.hosted() == before_hosted
    assert dict(broker.metadata.topics) == before_topics
    assert broker.context.controller_epoch == 1  # refused before the controller epoch counts
    assert (broker.log_manager.log_dir_of(TOPIC, 0) / f"{TOPIC}-0").is_dir()
    assert produce(client, 0, b"still leader") == ErrorCode.none


def test_told_to_lead_orders_the_broker_serves_kafka_python(broker, controller, client):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    assert broker.hosted() == {}
    assert metadata(client).topics == ()
    lead_orders(broker, controller)
    assert broker.hosted() == {(TOPIC, p): (BROKER_ID, 0) for p in PARTITIONS}
    assert broker.context.controller_epoch == 1
    for p in PARTITIONS:
        assert (broker.log_manager.log_dir_of(TOPIC, p) / f"{TOPIC}-{p}").is_dir()

    answer = metadata(client)
    assert [(b.node_id, b.host, b.port, b.rack) for b in answer.brokers] == [
        (BROKER_ID, "127.0.0.1", broker.port, "rack-a")
    ]
    # The controller process is no broker: Metadata names a live broker, which serves admin.
    assert answer.controller_id == BROKER_ID != CONTROLLER_ID
    (topic,) = answer.topics
    assert (topic.name, topic.topic_id) == (TOPIC, TOPIC_ID)
    assert [(p.partition_index, p.leader_id) for p in topic.partitions] == [
        (p, BROKER_ID) for p in PARTITIONS
    ]

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, enable_idempotence=False)
    sent = [(b"k%d" % i, b"v%d" % i) for i in range(60)]
    for key, value in sent:
        producer.send(TOPIC, key=key, value=value)
    producer.flush(timeout=20)
    producer.close(timeout=5)

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    consumer.assign([TopicPartition(TOPIC, p) for p in PARTITIONS])
    received = [(r.key, r.value) for r in poll_records(consumer, len(sent), 20)]
    consumer.close()
    assert sorted(received) == sorted(sent)


def test_a_stale_controller_epoch_is_refused_and_changes_nothing(broker, controller, client):
    lead_orders(broker, controller, controller_epoch=5)
    assert produce(client, 0, b"before") == ErrorCode.none
    before_hosted, before_topics = broker.hosted(), dict(broker.metadata.topics)

    deposed = controller.send(
        leader_and_isr(broker, 4, leader=OTHER_BROKER, leader_epoch=1, replicas=(1, 2))
    )
    assert deposed.error_code == ErrorCode.stale_controller_epoch
    assert partition_errors(deposed) == dict.fromkeys(PARTITIONS, ErrorCode.stale_controller_epoch)
    stale_metadata = controller.send(update_metadata(broker, 4, leader=-2))
    assert stale_metadata.error_code == ErrorCode.stale_controller_epoch
    stale_stop = controller.send(stop_replica(4, 0))
    assert stale_stop.error_code == ErrorCode.stale_controller_epoch
    assert stale_stop.partition_errors == ()

    assert broker.hosted() == before_hosted
    assert dict(broker.metadata.topics) == before_topics
    assert broker.context.controller_epoch == 5
    assert (broker.log_manager.log_dir_of(TOPIC, 0) / f"{TOPIC}-0").is_dir()
    assert produce(client, 0, b"after") == ErrorCode.none


def test_a_newer_leader_elsewhere_makes_this_broker_a_follower(broker, controller, client):
    lead_orders(broker, controller)
    assert produce(client, 1, b"as leader") == ErrorCode.none

    # Same leader epoch again (a new controller's first LeaderAndIsr): ignored, as in Kafka.
    again = controller.send(leader_and_isr(broker, 2, leader=OTHER_BROKER, replicas=(1, 2)))
    assert partition_errors(again) == dict.fromkeys(PARTITIONS, ErrorCode.stale_controller_epoch)
    assert produce(client, 1, b"still leader") == ErrorCode.none

    # A state that does not name this broker as a replica is not taken.
    elsewhere = controller.send(
        leader_and_isr(broker, 2, leader=OTHER_BROKER, leader_epoch=1, replicas=(OTHER_BROKER,))
    )
    assert partition_errors(elsewhere) == dict.fromkeys(
        PARTITIONS, ErrorCode.unknown_topic_or_partition
    )

    moved = controller.send(
        leader_and_isr(broker, 2, leader=OTHER_BROKER, leader_epoch=1, replicas=(1, 2))
    )
    assert partition_errors(moved) == dict.fromkeys(PARTITIONS, ErrorCode.none)
    assert broker.hosted() == {(TOPIC, p): (OTHER_BROKER, 1) for p in PARTITIONS}
    assert produce(client, 1, b"as follower") == ErrorCode.not_leader_or_follower
    # The follower keeps the log it had (replication will fetch from the new leader).
    assert broker.call_sync(lambda: broker.replicas.partitions[(TOPIC, 1)].log.log_end_offset) == 2

    # An older leader epoch does not take leadership back.
    back = controller.send(leader_and_isr(broker, 2, leader=BROKER_ID, leader_epoch=0))
    assert partition_errors(back) == dict.fromkeys(PARTITIONS, ErrorCode.stale_controller_epoch)
    assert produce(client, 1, b"still follower") == ErrorCode.not_leader_or_follower


def test_stop_replica_with_delete_removes_the_log_and_deletion_empties_the_cache(
    broker, controller, client
):
    lead_orders(broker, controller)
    assert produce(client, 1, b"doomed") == ErrorCode.none
    log_dir = broker.log_manager.log_dir_of(TOPIC, 1) / f"{TOPIC}-1"
    assert log_dir.is_dir()

    fenced = controller.send(stop_replica(1, 1, leader_epoch=0))  # not above ours
    assert [(p.partition_index, p.error_code) for p in fenced.partition_errors] == [
        (1, ErrorCode.fenced_leader_epoch)
    ]
    assert log_dir.is_dir()

    stopped = controller.send(stop_replica(1, 1))  # -2: the topic is being deleted
    assert stopped.error_code == ErrorCode.none
    assert [(p.topic_name, p.partition_index, p.error_code) for p in stopped.partition_errors] == [
        (TOPIC, 1, ErrorCode.none)
    ]
    assert not log_dir.exists()
    assert (TOPIC, 1) not in broker.hosted()
    assert produce(client, 1, b"gone") == ErrorCode.unknown_topic_or_partition
    assert produce(client, 0, b"alive") == ErrorCode.none

    # UpdateMetadata with LeaderDuringDelete (-2) drops partitions, the topic with its last one.
    dropped = controller.send(update_metadata(broker, 1, leader=-2, partitions=[1]))
    assert dropped.error_code == ErrorCode.none
    (topic,) = metadata(client).topics
    assert [p.partition_index for p in topic.partitions] == [0, 2]
    controller.send(update_metadata(broker, 1, leader=-2))
    assert metadata(client).topics == ()
