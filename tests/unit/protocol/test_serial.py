"""Our writer produces kio's bytes exactly, and our reader reads them back, for every served API."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader as kio_reader
from kio.serial import entity_writer as kio_writer

from odradek.protocol import schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS
from odradek.protocol.codec import DecodedResponse, decode_response, encode_request
from odradek.protocol.header import encode_response_header, parse_request_header
from odradek.protocol.reader import read_entity
from odradek.protocol.writer import OutBuffer, encode, entity_writer

SCHEMAS = [
    pytest.param(lookup(api_key, version), id=f"{lookup.__name__[:-7]}-{api_key}-v{version}")
    for api_key, (lowest, highest) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(lowest, highest + 1)
    for lookup in (schemas.request_schema, schemas.response_schema)
]


def kio_encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    kio_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@pytest.mark.parametrize("schema", SCHEMAS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_writer_matches_kio_and_reader_round_trips(schema, data, entities):
    entity = data.draw(entities(schema))
    ours = encode(entity)
    assert ours == kio_encode(entity)
    back, end = read_entity(schema, memoryview(ours))
    assert end == len(ours)
    assert back == entity
    # kio's native reader (safe on well-formed input) agrees too.
    assert kio_reader(schema)(ours, 0)[0] == back


def test_every_served_version_has_a_schema_with_a_layout():
    for api_key, (lowest, highest) in SUPPORTED_VERSIONS.items():
        for version in range(lowest, highest + 1):
            for schema in (
                schemas.request_schema(api_key, version),
                schemas.response_schema(api_key, version),
            ):
                entity_writer(schema)  # builds the layout of every nested struct
                assert schema.__api_key__ == api_key and schema.__version__ == version


def test_out_buffer_without_holes_is_one_part():
    out = OutBuffer(b"abc")
    assert out.parts() == [b"abc"]


# A schema kio lacks, written in kio's style: how the controller's LeaderAndIsr, StopReplica and
# UpdateMetadata (dropped by Kafka 4, so absent from kio 0.6.5) plug in.
@dataclass(frozen=True, slots=True, kw_only=True)
class Partition:
    __version__: ClassVar[int] = 7
    __flexible__: ClassVar[bool] = True
    partition_index: int = field(metadata={"kafka_type": "int32"})
    isr: tuple[int, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    __api_key__: ClassVar[int] = 1000  # no real API: registering it must not shadow one
    __version__: ClassVar[int] = 7
    __flexible__: ClassVar[bool] = True
    __header_schema__: ClassVar[type] = RequestHeaderV2
    controller_epoch: int = field(metadata={"kafka_type": "int32"})
    partitions: tuple[Partition, ...]
    is_kraft: bool = field(metadata={"kafka_type": "bool", "tag": 0}, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    __api_key__: ClassVar[int] = 1000  # no real API: registering it must not shadow one
    __version__: ClassVar[int] = 7
    __flexible__: ClassVar[bool] = True
    __header_schema__: ClassVar[type] = ResponseHeaderV1
    error_code: int = field(metadata={"kafka_type": "int16"})


def test_a_registered_schema_kio_lacks_is_read_and_written():
    schemas.register(Request, Response)
    request = Request(
        controller_epoch=3, partitions=(Partition(partition_index=1, isr=(1, 2)),), is_kraft=True
    )
    frame = encode_request(request, correlation_id=5, client_id="controller")
    header = parse_request_header(frame)
    assert header.header_version == 2
    assert read_entity(Request, memoryview(frame), header.size) == (request, len(frame))
    response = encode_response_header(5, 1) + encode(Response(error_code=0))
    assert decode_response(1000, 7, response) == DecodedResponse(5, Response(error_code=0))
