"""Request headers built by kafka-python parse for every served version, and for unserved ones."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol import schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey
from odradek.protocol.codec import decode_request, encode_request
from odradek.protocol.errors import InvalidRequestError, UnsupportedVersionError
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.header import (
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
)

SERVED = [
    (api_key, version)
    for api_key, (lowest, highest) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(lowest, highest + 1)
]


def kafka_python_frame(kafka_python, api_key: int, version: int, correlation_id: int) -> bytes:
    request = kafka_python[api_key, "request"][version]()
    request.with_header(correlation_id=correlation_id, client_id="kafka-python-test")
    return request.encode(framed=True, header=True)


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_kafka_python_requests_parse(kafka_python, api_key, version):
    if (api_key, "request") not in kafka_python:
        pytest.skip("kafka-python has no class for this API (Kafka 4 dropped it)")
    (frame,) = FrameDecoder().feed(kafka_python_frame(kafka_python, api_key, version, 12345))
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version) == (api_key, version)
    assert header.correlation_id == 12345
    assert header.client_id == "kafka-python-test"
    flexible = kafka_python[api_key, "request"].flexible_version_q(version)
    assert header.header_version == (2 if flexible else 1)
    # The body decodes, and encoding it again gives kafka-python's bytes exactly.
    decoded = decode_request(frame)
    assert encode_request(decoded.body, 12345, "kafka-python-test") == bytes(frame)


def test_header_versions_agree_with_kafka_pythons_schemas(kafka_python):
    """kio's schemas (our source) and kafka-python's JSON (theirs) agree on every version both
    have; ApiVersions' response header stays v0 when flexible."""
    checked = 0
    for (api_key, kind), cls in kafka_python.items():
        for version in schemas.known_versions(api_key) & set(range(cls.max_version + 1)):
            flexible = cls.flexible_version_q(version)
            if kind == "request":
                assert schemas.request_header_version(api_key, version) == (2 if flexible else 1)
            else:
                expected = 0 if api_key == ApiKey.API_VERSIONS else int(flexible)
                assert schemas.response_header_version(api_key, version) == expected
            checked += 1
    assert checked > 400  # 468 with kafka-python 3.0.12


@pytest.mark.parametrize(
    ("api_key", "version", "header_version"),
    [
        (ApiKey.API_VERSIONS, 5, 2),  # above kio's range, flexibleVersions "3+": flexible
        (ApiKey.API_VERSIONS, 32767, 2),
        (ApiKey.PRODUCE, 2, 1),  # below the range: before flexible versions
        (ApiKey.FETCH, 0, 1),
        (ApiKey.FIND_COORDINATOR, 6, 2),  # in kio (share groups), not served
        (1000, 0, 1),  # no such API
        (-1, -1, 1),
    ],
)
def test_unsupported_versions_still_yield_the_correlation_id(api_key, version, header_version):
    header_bytes = encode_request_header(api_key, version, 987, "new-client")
    frame = header_bytes + b"\x05whatever the body of a newer version holds"
    assert parse_request_header(frame).header_version == header_version
    with pytest.raises(UnsupportedVersionError) as raised:
        decode_request(frame)
    assert raised.value.header.correlation_id == 987
    assert raised.value.header.client_id == "new-client"


def test_kafka_pythons_api_versions_at_an_unknown_version(kafka_python):
    frame = bytearray(kafka_python_frame(kafka_python, ApiKey.API_VERSIONS, 4, 55)[4:])
    frame[2:4] = struct.pack(">h", 7)  # as a client from the future would send it
    with pytest.raises(UnsupportedVersionError) as raised:
        decode_request(frame)
    assert raised.value.header.api_version == 7
    assert raised.value.header.correlation_id == 55


def test_null_and_non_utf8_client_ids():
    assert parse_request_header(encode_request_header(3, 1, 1, None)).client_id is None
    frame = struct.pack(">hhih", 3, 1, 1, 2) + b"\xff\xfe"
    assert parse_request_header(frame).client_id == "\ufffd\ufffd"


def test_header_v2_tagged_fields_are_kept_and_skipped():
    header_bytes = encode_request_header(ApiKey.METADATA, 12, 4, "c")
    assert header_bytes.endswith(b"\x00")
    tagged = header_bytes[:-1] + b"\x02" + b"\x01\x01x" + b"\x07\x00"
    metadata = schemas.request_schema(ApiKey.METADATA, 12)(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    body = encode_request(metadata, 4, "c")[len(header_bytes) :]
    decoded = decode_request(tagged + body)
    assert decoded.header.tagged_fields == ((1, b"x"), (7, b""))
    assert decoded.header.size == len(tagged)


@given(st.binary(max_size=40))
def test_garbage_headers_are_invalid_requests(frame):
    try:
        header = parse_request_header(frame)
    except InvalidRequestError as e:
        assert e.header is None
    else:
        assert header.size <= len(frame)


def test_response_headers():
    assert encode_response_header(7, 0) == b"\x00\x00\x00\x07"
    assert encode_response_header(7, 1) == b"\x00\x00\x00\x07\x00"
    assert parse_response_header(b"\x00\x00\x00\x07\x00rest", 1) == (7, 5)
    assert parse_response_header(b"\x00\x00\x00\x07\x01\x00\x01zrest", 1) == (7, 8)
    assert parse_response_header(b"\x00\x00\x00\x07", 0) == (7, 4)
