"""Bytes kafka-python sends decode with ours; kafka-python reads every response we write."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch
from kio.schema.metadata.v12 import response as metadata_v12
from kio.schema.produce.v9 import response as produce_v9

from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey, build_api_versions_response
from odradek.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
)
from odradek.protocol.framing import FrameDecoder, encode_frame
from odradek.protocol.writer import encode
from support.kafka_batches import kafka_python_batch

SERVED = [
    (api_key, version)
    for api_key, (lowest, highest) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(lowest, highest + 1)
]


def record_batch(values: list[bytes]) -> bytes:
    records = ((index, 1_700_000_000_000, None, value, ()) for index, value in enumerate(values))
    return bytes(kafka_python_batch(records))


def from_kafka_python(request, correlation_id: int = 77):
    request.with_header(correlation_id=correlation_id, client_id="kafka-python")
    (frame,) = FrameDecoder().feed(request.encode(framed=True, header=True))
    decoded = decode_request(frame)
    assert decoded.header.correlation_id == correlation_id
    return decoded.body


@pytest.mark.parametrize("version", [3, 7, 8, 9, 11])
def test_produce_from_kafka_python(version):
    batch = record_batch([b"v0", b"v1", b"v2"])
    partition = ProduceRequest.TopicProduceData.PartitionProduceData(index=2, records=batch)
    request = ProduceRequest[version](
        transactional_id=None,
        acks=-1,
        timeout_ms=1500,
        topic_data=[ProduceRequest.TopicProduceData(name="orders", partition_data=[partition])],
    )
    body = from_kafka_python(request)
    assert body.acks == -1 and body.timeout == timedelta(milliseconds=1500)
    (topic,) = body.topic_data
    assert topic.name == "orders" and topic.partition_data[0].index == 2
    records = topic.partition_data[0].records
    assert isinstance(records, memoryview) and records == batch


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_fetch_from_kafka_python(version):
    partition = FetchRequest.FetchTopic.FetchPartition(
        partition=1, fetch_offset=42, partition_max_bytes=1 << 20, current_leader_epoch=3
    )
    request = FetchRequest[version](
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=1,
        topics=[FetchRequest.FetchTopic(topic="orders", partitions=[partition])],
    )
    body = from_kafka_python(request)
    assert body.max_wait == timedelta(milliseconds=500) and body.min_bytes == 1
    assert body.isolation_level == 1
    (topic,) = body.topics
    assert topic.topic == "orders"
    (fetched,) = topic.partitions
    assert (fetched.partition, fetched.fetch_offset, fetched.partition_max_bytes) == (
        1,
        42,
        1 << 20,
    )


@pytest.mark.parametrize("version", [1, 4, 6, 7])
def test_list_offsets_from_kafka_python(version):
    partitions = [
        ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-2),
        ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=1, timestamp=1_700_000_000_000
        ),
    ]
    request = ListOffsetsRequest[version](
        replica_id=-1,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name="orders", partitions=partitions)],
    )
    body = from_kafka_python(request)
    (topic,) = body.topics
    assert [(p.partition_index, p.timestamp) for p in topic.partitions] == [
        (0, -2),
        (1, 1_700_000_000_000),
    ]


@pytest.mark.parametrize("version", [0, 4, 9, 12])
def test_metadata_from_kafka_python(version):
    topics = [MetadataRequest.MetadataRequestTopic(name=name) for name in ("a", "b")]
    body = from_kafka_python(MetadataRequest[version](topics=topics))
    assert [t.name for t in body.topics] == ["a", "b"]
    if version >= 1:
        assert from_kafka_python(MetadataRequest[version](topics=None)).topics is None


@pytest.mark.parametrize("version", [0, 3, 4])
def test_api_versions_from_kafka_python(version):
    request = ApiVersionsRequest[version](
        client_software_name="kafka-python", client_software_version="3.0.12"
    )
    body = from_kafka_python(request)
    if version >= 3:
        assert body.client_software_name == "kafka-python"
        assert body.client_software_version == "3.0.12"


@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_create_topics_from_kafka_python(version):
    topic = CreateTopicsRequest.CreatableTopic(
        name="orders",
        num_partitions=6,
        replication_factor=3,
        assignments=[],
        configs=[
            CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(
                name="retention.ms", value="60000"
            )
        ],
    )
    body = from_kafka_python(
        CreateTopicsRequest[version](topics=[topic], timeout_ms=30000, validate_only=False)
    )
    (created,) = body.topics
    assert (created.name, created.num_partitions, created.replication_factor) == ("orders", 6, 3)
    assert [(c.name, c.value) for c in created.configs] == [("retention.ms", "60000")]


@pytest.mark.parametrize(("api_key", "version"), SERVED)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_reads_every_response_we_write(api_key, version, data, entities, kafka_python):
    if (api_key, "response") not in kafka_python:
        pytest.skip("kafka-python has no class for this API (Kafka 4 dropped it)")
    response = data.draw(entities(schemas.response_schema(api_key, version)))
    if api_key == ApiKey.API_VERSIONS and version > 0:
        # kafka-python reads any ApiVersions response with an error as v0 (KIP-511 taken wide).
        response = dataclasses.replace(response, error_code=ErrorCode.none)
    request = schemas.request_schema(api_key, version)
    header = decode_request(
        encode_request(data.draw(entities(request)), correlation_id=31, client_id="c")
    ).header
    wire = b"".join(encode_frame([encode_response(header, response)]))
    theirs = kafka_python[api_key, "response"][version].decode(wire, framed=True, header=True)
    assert theirs.header.correlation_id == 31
    # kafka-python writes the same body back: the two agree on every byte we wrote.
    assert theirs.encode() == encode(response)


def test_produce_response_read_by_kafka_python():
    response = produce_v9.ProduceResponse(
        responses=(
            produce_v9.TopicProduceResponse(
                name="orders",
                partition_responses=(
                    produce_v9.PartitionProduceResponse(
                        index=2,
                        error_code=ErrorCode.none,
                        base_offset=1000,
                        log_append_time=None,
                        log_start_offset=0,
                        record_errors=(),
                        error_message=None,
                    ),
                ),
            ),
        ),
        throttle_time=timedelta(0),
    )
    header = decode_request(encode_request(produce_request_v9(), 9, "c")).header
    theirs = ProduceResponse[9].decode(encode_response(header, response), header=True)
    (partition,) = theirs.responses[0].partition_responses
    assert (partition.index, partition.error_code, partition.base_offset) == (2, 0, 1000)


def produce_request_v9():
    return schemas.request_schema(0, 9)(acks=1, timeout=timedelta(seconds=1), topic_data=())


def test_metadata_response_read_by_kafka_python():
    topic_id = uuid.uuid4()
    response = metadata_v12.MetadataResponse(
        throttle_time=timedelta(0),
        brokers=(metadata_v12.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9093),),
        cluster_id="odradek",
        controller_id=1,
        topics=(
            metadata_v12.MetadataResponseTopic(
                error_code=ErrorCode.none,
                name="orders",
                topic_id=topic_id,
                partitions=(
                    metadata_v12.MetadataResponsePartition(
                        error_code=ErrorCode.none,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=4,
                        replica_nodes=(1,),
                        isr_nodes=(1,),
                    ),
                ),
            ),
        ),
    )
    request = schemas.request_schema(3, 12)(topics=None, include_topic_authorized_operations=False)
    header = decode_request(encode_request(request, 5, "c")).header
    theirs = MetadataResponse[12].decode(encode_response(header, response), header=True)
    assert [(b.node_id, b.host, b.port) for b in theirs.brokers] == [(1, "127.0.0.1", 9093)]
    (topic,) = theirs.topics
    assert topic.name == "orders" and topic.topic_id == topic_id
    assert topic.partitions[0].leader_id == 1 and topic.partitions[0].leader_epoch == 4


def build(entity_type, **values):
    """``entity_type`` from those of ``values`` its version has."""
    names = {field.name for field in dataclasses.fields(entity_type)}
    return entity_type(**{name: value for name, value in values.items() if name in names})


class Slice:
    """Like the storage engine's FileSlice: a byte range of an open file."""

    def __init__(self, file, position: int, size: int):
        self.file, self.position, self.size = file, position, size


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_response_leaves_file_records_for_sendfile(tmp_path: Path, version):
    batches = [record_batch([b"first", b"second"]), record_batch([b"third"])]
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"padding!" + batches[0] + batches[1])
    response_type = schemas.response_schema(1, version)
    module = __import__(response_type.__module__, fromlist=["PartitionData"])
    with segment.open("rb", buffering=0) as file:
        first, second = len(batches[0]), len(batches[1])
        regions = [Slice(file, 8, first), Slice(file, 8 + first, second)]
        partitions = tuple(
            build(
                module.PartitionData,
                partition_index=index,
                error_code=ErrorCode.none,
                high_watermark=10,
                last_stable_offset=10,
                log_start_offset=0,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=region,
            )
            for index, region in enumerate(regions)
        )
        topic = module.FetchableTopicResponse(topic="orders", partitions=partitions)
        response = build(
            response_type,
            throttle_time=timedelta(0),
            error_code=ErrorCode.none,
            session_id=0,
            responses=(topic,),
        )
        request = decode_request(encode_request(fetch_request(version), 8, "c"))
        parts = encode_frame(encode_response_parts(request.header, response))
        # Exactly the two regions are holes; everything else is small buffers.
        assert [p for p in parts if isinstance(p, Slice)] == regions
        assert all(len(p) < 200 for p in parts if isinstance(p, bytes))
        # What the server would put on the wire: buffers, and each region via sendfile.
        wire = b"".join(
            p if isinstance(p, bytes) else os_pread(p.file, p.size, p.position) for p in parts
        )
    theirs = FetchResponse[version].decode(wire, framed=True, header=True)
    assert theirs.header.correlation_id == 8
    for index, partition in enumerate(theirs.responses[0].partitions):
        assert partition.partition_index == index
        assert bytes(partition.records) == batches[index]
        batch = DefaultRecordBatch(bytes(partition.records))
        assert batch.validate_crc()
    with pytest.raises(TypeError, match="file regions"):
        encode_response(request.header, response)


def os_pread(file, size: int, position: int) -> bytes:
    import os

    return os.pread(file.fileno(), size, position)


def fetch_request(version: int):
    return build(
        schemas.request_schema(1, version),
        max_wait=timedelta(milliseconds=10),
        min_bytes=1,
        topics=(),
        forgotten_topics_data=(),
    )


def test_a_response_must_answer_its_request():
    header = decode_request(encode_request(produce_request_v9(), 1, "c")).header
    with pytest.raises(ValueError, match="does not answer"):
        encode_response(header, build_api_versions_response(3))


def test_client_side_round_trip():
    request = schemas.request_schema(18, 3)(
        client_software_name="odradek", client_software_version="0.1.0"
    )
    decoded = decode_request(encode_request(request, 11, "controller"))
    assert decoded.body == request
    frame = encode_response(decoded.header, build_api_versions_response(3))
    response = decode_response(18, 3, frame)
    assert response.correlation_id == 11
    assert response.body == build_api_versions_response(3)
