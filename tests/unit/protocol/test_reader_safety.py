"""Hostile request bytes end in InvalidRequestError (never a crash); records are never copied."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from odradek.protocol import schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS
from odradek.protocol.codec import decode_request, encode_request
from odradek.protocol.errors import InvalidRequestError, UnsupportedVersionError
from odradek.protocol.framing import FrameDecoder, encode_frame
from odradek.protocol.header import encode_request_header

SERVED = [
    (api_key, version)
    for api_key, (lowest, highest) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(lowest, highest + 1)
]


def fetch_request() -> FetchRequest:
    partition = FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=10,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    return FetchRequest(
        max_wait=timedelta(milliseconds=500),
        min_bytes=1,
        topics=(FetchTopic(topic="t", partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def produce_request(records: bytes) -> ProduceRequest:
    return ProduceRequest(
        acks=-1,
        timeout=timedelta(seconds=30),
        topic_data=(
            TopicProduceData(
                name="t", partition_data=(PartitionProduceData(index=0, records=records),)
            ),
        ),
    )


def test_huge_array_lengths_are_refused_before_anything_is_allocated():
    # Metadata v0: an int32 topic count of 2**31 - 1 in a 4-byte body. kio's native reader
    # reserves 16 GiB for it (see the next test); ours checks it against the bytes left.
    for version, body in ((0, b"\x7f\xff\xff\xff"), (9, b"\xff\xff\xff\xff\x0f")):
        frame = encode_request_header(3, version, 1, "c") + body
        with pytest.raises(InvalidRequestError, match="exceeds"):
            decode_request(frame)


def test_kio_native_reader_still_aborts_on_a_huge_array_length():
    """Why ``reader`` exists: if this starts failing, kio fixed the bug; see reader.py."""
    script = textwrap.dedent(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from kio.serial import entity_reader
        from kio.index import load_request_schema
        try:
            entity_reader(load_request_schema(3, 0))(b"\\x7f\\xff\\xff\\xff", 0)
        except Exception:
            pass
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert result.returncode < 0, "kio's reader survived: reconsider using it (reader.py)"
    assert b"memory allocation" in result.stderr


def test_unknown_tagged_fields_are_skipped():
    frame = encode_request(fetch_request(), correlation_id=3, client_id="c")
    assert frame.endswith(b"\x00")  # the top-level tagged-field section: empty
    extended = frame[:-1] + b"\x01" + b"\x63\x02zz"  # one field, tag 99, 2 bytes
    decoded = decode_request(extended)
    assert decoded.body == fetch_request()


def test_a_known_tagged_field_of_the_wrong_size_is_refused():
    frame = encode_request(fetch_request(), correlation_id=3, client_id="c")
    # Tag 0 of FetchRequest v12 is cluster_id (compact string): claim 5 bytes, hold "a" (2).
    bad = frame[:-1] + b"\x01\x00\x05\x02a\x00\x00\x00"
    with pytest.raises(InvalidRequestError, match="tagged field 0"):
        decode_request(bad)


def test_null_in_a_non_nullable_array_is_refused():
    frame = encode_request(produce_request(b""), correlation_id=3, client_id="c")
    header_size = len(encode_request_header(0, 9, 3, "c"))
    # Produce v9 body: transactional_id (0x00 = null), acks, timeout, then topic_data.
    topic_data_at = header_size + 1 + 2 + 4
    bad = frame[:topic_data_at] + b"\x00\x00"  # a null array, then no tagged fields
    with pytest.raises(InvalidRequestError, match="null in non-nullable"):
        decode_request(bad)


def test_bytes_after_the_body_are_ignored_as_kafka_ignores_them():
    frame = encode_request(fetch_request(), correlation_id=3, client_id="c")
    assert decode_request(frame + b"\x00\x01\x02") == decode_request(frame)


def test_librdkafka_admin_metadata_request_with_trailing_bytes_decodes():
    """Captured from confluent-kafka 2.16's AdminClient.list_topics() (librdkafka 2.16)."""
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version, header.client_id) == (3, 12, "rdkafka")
    assert body.topics is None


def test_produce_records_are_a_view_of_the_frame_not_a_copy():
    records = os.urandom(1 << 20)
    wire = b"".join(encode_frame([encode_request(produce_request(records), 1, "c")]))
    decoder = FrameDecoder()
    # Received as the server receives it: into the decoder's own buffer.
    frames, position = [], 0
    while position < len(wire):
        target = decoder.get_buffer()
        count = min(len(target), len(wire) - position)
        target[:count] = wire[position : position + count]
        del target
        position += count
        decoder.buffer_updated(count)
        while (whole := decoder.next_frame()) is not None:
            frames.append(whole.data)
    (frame,) = frames
    decoded = decode_request(frame)
    view = decoded.body.topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview) and view.readonly
    assert view == records
    assert view.obj is frame.obj  # the same bytearray the socket was read into


@pytest.mark.parametrize(("api_key", "version"), SERVED)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=64))
def test_random_bodies_never_escape_as_other_errors(api_key, version, body):
    frame = encode_request_header(api_key, version, 7, "fuzz") + body
    try:
        decoded = decode_request(frame)
    except InvalidRequestError as e:
        assert e.header is not None and e.header.correlation_id == 7
    else:
        assert decoded.header.correlation_id == 7


@pytest.mark.parametrize(("api_key", "version"), SERVED)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_valid_requests_decode_or_are_refused(api_key, version, data, entities):
    request = data.draw(entities(schemas.request_schema(api_key, version)))
    frame = bytearray(encode_request(request, 7, "fuzz"))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(frame) - 1))
        frame[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    with contextlib.suppress(InvalidRequestError, UnsupportedVersionError):
        decode_request(bytes(frame[:cut]))
