"""ApiVersions: exact bytes with no default tagged fields, the KIP-511 fallback, client overlap."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import (
    SUPPORTED_VERSIONS,
    ApiKey,
    api_versions_fallback,
    build_api_versions_response,
    client_software_is_valid,
)
from odradek.protocol.codec import decode_request, decode_response, encode_response
from odradek.protocol.errors import UnsupportedVersionError
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.header import parse_request_header


def api_versions_header(version: int, correlation_id: int):
    request = ApiVersionsRequest[min(version, 4)](
        client_software_name="kcat", client_software_version="1.7.1"
    )
    request.with_header(correlation_id=correlation_id, client_id="rdkafka")
    (frame,) = FrameDecoder().feed(request.encode(framed=True, header=True))
    frame = bytearray(frame)
    frame[2:4] = struct.pack(">h", version)
    return parse_request_header(bytes(frame)), bytes(frame)


@pytest.mark.parametrize("version", [3, 4])
def test_flexible_response_bytes_carry_no_default_tagged_fields(version):
    """Debian's kcat (librdkafka 2.0.2) misreads v3 with default-valued tagged fields present."""
    header, _ = api_versions_header(version, 0x01020304)
    expected = bytearray(b"\x01\x02\x03\x04")  # response header v0: no tagged-field section
    expected += b"\x00\x00"  # error_code
    expected.append(len(SUPPORTED_VERSIONS) + 1)  # compact array length
    for api_key, (lowest, highest) in sorted(SUPPORTED_VERSIONS.items()):
        expected += struct.pack(">hhh", api_key, lowest, highest) + b"\x00"
    expected += b"\x00\x00\x00\x00"  # throttle_time_ms
    expected += b"\x00"  # tagged fields: none (no features, epoch -1, not migration-ready)
    assert encode_response(header, build_api_versions_response(version)) == bytes(expected)


def test_a_non_default_tagged_field_is_written():
    header, _ = api_versions_header(3, 1)
    response = dataclasses.replace(build_api_versions_response(3), finalized_features_epoch=7)
    encoded = encode_response(header, response)
    assert encoded.endswith(b"\x00\x00\x00\x00" + b"\x01" + b"\x01\x08" + struct.pack(">q", 7))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_kafka_python_reads_our_table_at_every_version(version):
    header, _ = api_versions_header(version, 9)
    encoded = encode_response(header, build_api_versions_response(version))
    theirs = ApiVersionsResponse[version].decode(encoded, header=True)
    assert theirs.header.correlation_id == 9 and theirs.error_code == 0
    ranges = {e.api_key: (e.min_version, e.max_version) for e in theirs.api_keys}
    assert ranges == dict(SUPPORTED_VERSIONS)


@pytest.mark.parametrize("version", [5, 42, 32767])
def test_unknown_version_gets_error_35_in_a_v0_body_under_a_v0_header(version):
    header, frame = api_versions_header(version, 0x0A0B0C0D)
    with pytest.raises(UnsupportedVersionError) as raised:
        decode_request(frame)
    assert raised.value.header == header
    encoded = encode_response(raised.value.header, api_versions_fallback())
    assert encoded == (
        b"\x0a\x0b\x0c\x0d"  # correlation id; header v0
        + b"\x00\x23"  # error_code 35 UNSUPPORTED_VERSION
        + b"\x00\x00\x00\x01"  # int32 array length (v0 is not flexible)
        + b"\x00\x12\x00\x00\x00\x04"  # ApiVersions: 0-4, all Kafka's fallback lists
    )
    # kafka-python, having asked at any version, reads it as v0 and retries at 4.
    for asked in range(5):
        theirs = ApiVersionsResponse[asked].decode(encoded, header=True)
        assert theirs.header.correlation_id == 0x0A0B0C0D
        assert theirs.error_code == ErrorCode.unsupported_version
        assert [(e.api_key, e.min_version, e.max_version) for e in theirs.api_keys] == [(18, 0, 4)]
    # And so does our own client side.
    ours = decode_response(ApiKey.API_VERSIONS, 4, encoded)
    assert ours.body == api_versions_fallback()


def test_ranges_overlap_what_each_client_asks_for():
    """Client ranges from PROTOCOL.md: each must find a common version for what it uses."""
    anything = (0, 99)  # the client asks whatever the broker offers ("v3+" -> (3, 99))
    clients = {
        "aiokafka": {0: (0, 8), 1: (1, 11), 2: (0, 5), 3: (0, 5), 18: (0, 0), 19: (0, 3),
                     20: (0, 3), 22: (0, 0), 32: (0, 2), 33: (0, 1), 37: (0, 1)},
        "librdkafka 2.x": {0: (3, 99), 1: (4, 99), 2: (1, 99), 3: (0, 13), 18: (0, 3),
                           19: (0, 4), 20: (0, 4), 21: (0, 2), 22: (0, 4), 32: (0, 1),
                           33: (0, 2), 37: (0, 2), 44: (0, 1)},
        "kafka-python 3": {key: anything for key in SUPPORTED_VERSIONS},
    }  # fmt: skip
    for client, wanted in clients.items():
        for api_key, (lowest, highest) in wanted.items():
            ours = SUPPORTED_VERSIONS[api_key]
            assert max(lowest, ours[0]) <= min(highest, ours[1]), (client, api_key)


def test_kafka_python_takes_us_for_kafka_3_8():
    """kafka-python turns features on by the broker version it infers from our table."""
    assert infer_broker_version_from_api_versions(dict(SUPPORTED_VERSIONS)) == (3, 8)


def test_client_software_names():
    request_type = schemas.request_schema(ApiKey.API_VERSIONS, 3)
    assert client_software_is_valid(
        request_type(client_software_name="librdkafka", client_software_version="2.0.2")
    )
    assert not client_software_is_valid(
        request_type(client_software_name="bad name", client_software_version="1")
    )
    assert client_software_is_valid(schemas.request_schema(ApiKey.API_VERSIONS, 0)())
