"""The controller-to-broker schemas Kafka 4 dropped match Kafka 3.9's wire format and round-trip."""

from __future__ import annotations

import dataclasses
import struct
import subprocess
import sys
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.errors import ErrorCode
from odradek.protocol import interbroker, schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey, is_supported
from odradek.protocol.codec import decode_request, decode_response, encode_request, encode_response
from odradek.protocol.interbroker import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
    LeaderAndIsrTopicState,
    RemainingPartition,
    StopReplicaPartitionError,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaTopicState,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    UpdateMetadataTopicState,
)
from odradek.protocol.reader import read_entity
from odradek.protocol.writer import encode

PAIRS = [
    pytest.param(request, response, id=request.__name__.removesuffix("Request"))
    for request, response in interbroker.PAIRS
]
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


@pytest.fixture(autouse=True)
def _registered():
    # Another test may register a stand-in for (4, 7) (test_serial's example of ``register``).
    interbroker.register_all()


# -- the table and the lookups ------------------------------------------------------------------


def test_one_version_each_the_highest_of_kafka_3_9():
    # kafka-python's record of a real Kafka 3.9 broker's ApiVersions answer has 0-7, 0-4, 0-8, 0-3.
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

    kafka_3_9 = BROKER_API_VERSIONS[(3, 9)]
    for api_key, version in [(4, 7), (5, 4), (6, 8), (7, 3)]:
        assert SUPPORTED_VERSIONS[api_key] == (version, version)
        assert kafka_3_9[api_key][1] == version
        assert is_supported(api_key, version) and not is_supported(api_key, version - 1)
    assert ApiKey(7) is ApiKey.CONTROLLED_SHUTDOWN


@pytest.mark.parametrize(("request_type", "response_type"), PAIRS)
def test_registered_flexible_with_header_v2_and_v1(request_type, response_type):
    api_key, version = int(request_type.__api_key__), int(request_type.__version__)
    assert schemas.request_schema(api_key, version) is request_type
    assert schemas.response_schema(api_key, version) is response_type
    assert schemas.known_versions(api_key) == {version}
    assert schemas.is_flexible(api_key, version)
    assert schemas.request_header_version(api_key, version) == 2
    assert schemas.response_header_version(api_key, version) == 1


def test_importing_the_codec_alone_registers_them():
    """The broker only imports ``codec``; the controller may import nothing else either."""
    code = (
        "from odradek.protocol import codec, schemas\n"
        "print(sorted((k, v, schemas.request_schema(k, v).__name__)"
        " for k, v in [(4, 7), (5, 4), (6, 8), (7, 3)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(
        [
            (4, 7, "LeaderAndIsrRequest"),
            (5, 4, "StopReplicaRequest"),
            (6, 8, "UpdateMetadataRequest"),
            (7, 3, "ControlledShutdownRequest"),
        ]
    )


# -- round trips through the codec --------------------------------------------------------------


@pytest.mark.parametrize(("request_type", "response_type"), PAIRS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_codec_round_trips(request_type, response_type, data, correlation_id, entities):
    request = data.draw(entities(request_type))
    decoded = decode_request(encode_request(request, correlation_id, "controller-1"))
    assert decoded.body == request
    assert decoded.header.correlation_id == correlation_id
    assert decoded.header.client_id == "controller-1" and decoded.header.header_version == 2

    response = data.draw(entities(response_type))
    frame = encode_response(decoded.header, response)
    back = decode_response(request_type.__api_key__, request_type.__version__, frame)
    assert back == (correlation_id, response)


# -- bytes written out by hand from Kafka 3.9's JSON definitions ---------------------------------
# Flexible versions: compact strings and arrays (unsigned varint length + 1), and a tagged-field
# section (a count, here 0 unless said) closing every struct.


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def flag(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def text(v: str | None) -> bytes:
    if v is None:
        return b"\x00"
    raw = v.encode()
    return bytes([len(raw) + 1]) + raw  # lengths below 127: one varint byte


def array(items: list[bytes]) -> bytes:
    return bytes([len(items) + 1]) + b"".join(items)


def ints(values: list[int]) -> bytes:
    return array([i32(v) for v in values])


NO_TAGS = b"\x00"


def exact(entity, expected: bytes) -> None:
    assert encode(entity) == expected
    assert read_entity(type(entity), memoryview(expected)) == (entity, len(expected))


def test_leader_and_isr_v7_bytes():
    request = LeaderAndIsrRequest(
        controller_id=100,
        controller_epoch=3,
        broker_epoch=77,
        type_=0,
        topic_states=(
            LeaderAndIsrTopicState(
                topic_name="orders",
                topic_id=TOPIC_ID,
                partition_states=(
                    LeaderAndIsrPartitionState(
                        partition_index=2,
                        controller_epoch=3,
                        leader=1,
                        leader_epoch=5,
                        isr=(1, 2),
                        partition_epoch=9,
                        replicas=(1, 2, 3),
                        removing_replicas=(3,),
                        is_new=True,
                        leader_recovery_state=1,
                    ),
                ),
            ),
        ),
        live_leaders=(LeaderAndIsrLiveLeader(broker_id=1, host_name="b1", port=9092),),
    )
    partition = (
        i32(2) + i32(3) + i32(1) + i32(5)  # index, controller epoch, leader, leader epoch
        + ints([1, 2]) + i32(9) + ints([1, 2, 3])  # isr, partition epoch, replicas
        + ints([]) + ints([3])  # adding, removing
        + flag(True) + i8(1) + NO_TAGS  # is new, leader recovery state
    )  # fmt: skip
    topic = text("orders") + TOPIC_ID.bytes + array([partition]) + NO_TAGS
    leader = i32(1) + text("b1") + i32(9092) + NO_TAGS
    exact(
        request,
        i32(100) + flag(False) + i32(3) + i64(77) + i8(0)  # ..., KRaft flag, ..., type
        + array([topic]) + array([leader]) + NO_TAGS,
    )  # fmt: skip

    response = LeaderAndIsrResponse(
        error_code=ErrorCode.none,
        topics=(
            LeaderAndIsrTopicError(
                topic_id=TOPIC_ID,
                partition_errors=(
                    LeaderAndIsrPartitionError(
                        partition_index=2, error_code=ErrorCode.stale_controller_epoch
                    ),
                ),
            ),
        ),
    )
    errors = array([i32(2) + i16(11) + NO_TAGS])
    exact(response, i16(0) + array([TOPIC_ID.bytes + errors + NO_TAGS]) + NO_TAGS)


def test_update_metadata_v8_bytes_with_its_tagged_type():
    state = UpdateMetadataPartitionState(
        partition_index=0,
        controller_epoch=3,
        leader=-2,
        leader_epoch=4,
        isr=(1,),
        zk_version=6,
        replicas=(1, 2),
        offline_replicas=(2,),
    )
    endpoint = UpdateMetadataEndpoint(
        port=9092, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0
    )
    request = UpdateMetadataRequest(
        controller_id=100,
        controller_epoch=3,
        topic_states=(
            UpdateMetadataTopicState(topic_name="t", topic_id=None, partition_states=(state,)),
        ),
        live_brokers=(UpdateMetadataBroker(id_=1, endpoints=(endpoint,), rack=None),),
    )
    partition = (
        i32(0) + i32(3) + i32(-2) + i32(4) + ints([1]) + i32(6) + ints([1, 2]) + ints([2])
        + NO_TAGS
    )  # fmt: skip
    topic = text("t") + bytes(16) + array([partition]) + NO_TAGS  # no topic id: zeros
    broker = (
        i32(1)
        + array([i32(9092) + text("127.0.0.1") + text("PLAINTEXT") + i16(0) + NO_TAGS])
        + text(None)  # rack
        + NO_TAGS
    )
    body = i32(100) + flag(False) + i32(3) + i64(-1) + array([topic]) + array([broker])
    exact(request, body + NO_TAGS)  # type_ 0 is the default: not written
    full = dataclasses.replace(request, type_=2)
    exact(full, body + b"\x01" + b"\x00" + b"\x01" + i8(2))  # one tag: tag 0, size 1, value 2

    exact(UpdateMetadataResponse(error_code=ErrorCode.none), i16(0) + NO_TAGS)


def test_stop_replica_v4_bytes():
    request = StopReplicaRequest(
        controller_id=100,
        controller_epoch=3,
        broker_epoch=12,
        topic_states=(
            StopReplicaTopicState(
                topic_name="orders",
                partition_states=(
                    StopReplicaPartitionState(partition_index=1, delete_partition=True),
                    StopReplicaPartitionState(
                        partition_index=2, leader_epoch=-2, delete_partition=False
                    ),
                ),
            ),
        ),
    )
    partitions = [
        i32(1) + i32(-1) + flag(True) + NO_TAGS,  # leader epoch defaults to -1 (no epoch)
        i32(2) + i32(-2) + flag(False) + NO_TAGS,
    ]
    topic = text("orders") + array(partitions) + NO_TAGS
    exact(request, i32(100) + flag(False) + i32(3) + i64(12) + array([topic]) + NO_TAGS)

    response = StopReplicaResponse(
        error_code=ErrorCode.none,
        partition_errors=(
            StopReplicaPartitionError(
                topic_name="orders", partition_index=1, error_code=ErrorCode.fenced_leader_epoch
            ),
        ),
    )
    errors = array([text("orders") + i32(1) + i16(74) + NO_TAGS])
    exact(response, i16(0) + errors + NO_TAGS)


def test_controlled_shutdown_v3_bytes():
    exact(ControlledShutdownRequest(broker_id=2, broker_epoch=40), i32(2) + i64(40) + NO_TAGS)
    response = ControlledShutdownResponse(
        error_code=ErrorCode.none,
        remaining_partitions=(RemainingPartition(topic_name="orders", partition_index=0),),
    )
    exact(response, i16(0) + array([text("orders") + i32(0) + NO_TAGS]) + NO_TAGS)


def test_a_frame_from_a_newer_sender_with_unknown_tags_still_decodes():
    """Kafka skips tagged fields it does not know; so must the broker."""
    request = ControlledShutdownRequest(broker_id=2)
    frame = encode_request(request, 1, "b2")
    assert frame.endswith(NO_TAGS)
    with_tag = frame[:-1] + b"\x01" + b"\x07" + b"\x02" + b"hi"  # tag 7, 2 bytes
    assert decode_request(with_tag).body == request
