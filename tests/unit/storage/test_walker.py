"""The C record walker reaches the pure-Python reference's outcome on any bytes, however cut."""

from __future__ import annotations

import random
import threading
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from odradek.storage import _recordwalk
from odradek.storage.batch import HEADER_SIZE, BatchHeader
from odradek.storage.compression import decompress
from odradek.storage.records import write_varint
from odradek.storage.walker import RecordWalker, _feed_pieces
from odradek.storage.walker_reference import (
    INT64_MAX,
    INT64_MIN,
    WalkError,
    WalkOutcome,
    reference_walk,
)
from support import kafka_batches

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def c_walk(data, count, last_offset_delta, base_timestamp, exact, cuts=()) -> WalkOutcome:
    """The C walker's outcome, fed ``data`` in pieces cut at ``cuts`` (as decompression does)."""
    walker = RecordWalker(count, last_offset_delta, base_timestamp, exact)
    bounds = [0, *sorted(set(cuts)), len(data)]
    _feed_pieces(walker, (data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)))
    return outcome_of(walker)


def outcome_of(walker) -> WalkOutcome:
    return WalkOutcome(
        walker.records,
        WalkError(walker.error),
        walker.error_record,
        walker.error_position,
        walker.error_value,
        walker.null_key_record,
        walker.min_timestamp,
        walker.max_timestamp,
        walker.min_timestamp_record,
        walker.max_timestamp_record,
    )


def assert_same(data, count, last_offset_delta, base_timestamp, exact, cuts=()):
    expected = reference_walk(data, count, last_offset_delta, base_timestamp, exact)
    assert c_walk(data, count, last_offset_delta, base_timestamp, exact) == expected
    assert c_walk(data, count, last_offset_delta, base_timestamp, exact, cuts) == expected
    return expected


def encode_record(
    offset_delta, timestamp_delta=0, key=b"k", value=b"v", headers=(), attributes=0
) -> bytes:
    body = bytearray((attributes,))
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    for blob in (key, value):
        if blob is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(blob))
            body += blob
    write_varint(body, len(headers))
    for header_key, header_value in headers:
        write_varint(body, len(header_key))
        body += header_key
        if header_value is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(header_value))
            body += header_value
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out + body)


def kafka_python_batch(count=30, codec=0, seed=0) -> bytes:
    rng = random.Random(seed)
    records = []
    for i in range(count):
        key = None if i % 4 == 0 else b"key-%d" % i
        value = None if i % 7 == 3 else rng.randbytes(rng.randrange(0, 300))
        headers = [(f"h{j}", None if j == 1 else b"x" * j) for j in range(i % 3)]
        records.append((i, 1_700_000_000_000 + rng.randrange(-5000, 5000), key, value, headers))
    return bytes(kafka_batches.kafka_python_batch(records, codec=codec))


def section_of(batch: bytes) -> tuple[bytes, BatchHeader]:
    header = BatchHeader.parse(batch)
    return decompress(header.compression, memoryview(batch)[HEADER_SIZE:]), header


# -- real batches --------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_kafka_python_batches_walk_clean_and_the_facts_are_right(codec):
    section, header = section_of(kafka_python_batch(40, codec))
    outcome = assert_same(section, 40, 39, header.base_timestamp, True, cuts=range(7, 9999, 97))
    assert outcome.error is WalkError.NONE and outcome.records == 40
    assert outcome.null_key_record == 0
    timestamps = [r.timestamp for r in DefaultRecordBatch(kafka_python_batch(40, codec))]
    assert outcome.min_timestamp == min(timestamps)
    assert outcome.max_timestamp == max(timestamps)
    assert timestamps[outcome.min_timestamp_record] == min(timestamps)
    assert timestamps[outcome.max_timestamp_record] == max(timestamps)


def test_every_truncation_point_of_a_real_batch():
    section, header = section_of(kafka_python_batch(12))
    for cut in range(len(section) + 1):
        outcome = assert_same(section[:cut], 12, 11, header.base_timestamp, True, cuts=[cut // 2])
        if cut < len(section):
            assert outcome.error in (WalkError.RECORD_TRUNCATED, WalkError.TOO_FEW_RECORDS)


def test_every_single_byte_change_of_a_real_batch():
    section, header = section_of(kafka_python_batch(8))
    for position in range(len(section)):
        for flip in (0x01, 0x40, 0x80, 0xFF):
            mutated = bytearray(section)
            mutated[position] ^= flip
            for exact in (True, False):
                assert_same(bytes(mutated), 8, 7, header.base_timestamp, exact, cuts=[position])


# -- random and mutated sections ----------------------------------------------------------------

blobs = st.one_of(st.none(), st.binary(max_size=40))
record_fields = st.tuples(
    st.integers(-(1 << 40), 1 << 40),  # timestamp delta
    st.integers(0, 3),  # offset gap (0: consecutive)
    blobs,
    blobs,
    st.lists(st.tuples(st.binary(max_size=8), blobs), max_size=3),
)


@st.composite
def sections(draw):
    """A records section: valid, then perhaps damaged; with the header fields to judge it by."""
    fields = draw(st.lists(record_fields, max_size=8))
    delta = -1
    parts = []
    for timestamp_delta, gap, key, value, headers in fields:
        delta += 1 + gap
        parts.append(encode_record(delta, timestamp_delta, key, value, headers))
    data = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(0, 3))):
        if not data:
            break
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=6))
        else:
            del data[at : at + draw(st.integers(1, 6))]
    count = max(0, len(fields) + draw(st.integers(-1, 1)))
    last_offset_delta = max(delta, 0) + draw(st.integers(-1, 2))
    base_timestamp = draw(st.sampled_from([0, -1, 1_700_000_000_000, INT64_MAX, INT64_MIN]))
    cuts = draw(st.lists(st.integers(0, max(len(data), 1)), max_size=6))
    return bytes(data), count, last_offset_delta, base_timestamp, cuts


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=sections(), exact=st.booleans())
def test_random_and_mutated_sections(case, exact):
    data, count, last_offset_delta, base_timestamp, cuts = case
    assert_same(data, count, last_offset_delta, base_timestamp, exact, cuts)


@settings(max_examples=800, deadline=None)
@given(
    data=st.binary(max_size=120),
    count=st.integers(0, 5),
    last_offset_delta=st.integers(-1, 6),
    exact=st.booleans(),
    cuts=st.lists(st.integers(0, 120), max_size=5),
)
@example(data=b"\xff" * 11, count=1, last_offset_delta=0, exact=True, cuts=[3])
@example(data=b"\x80" * 6 + b"\x01", count=1, last_offset_delta=0, exact=True, cuts=[])
def test_arbitrary_bytes(data, count, last_offset_delta, exact, cuts):
    assert_same(data, count, last_offset_delta, 0, exact, cuts)


@pytest.mark.parametrize(
    ("data", "error", "position", "value"),
    [
        (b"", WalkError.TOO_FEW_RECORDS, 0, 0),
        (b"\x01", WalkError.RECORD_LENGTH_NEGATIVE, 0, -1),
        (b"\x02", WalkError.RECORD_TRUNCATED, 0, 1),
        (b"\x00", WalkError.FIELD_OVERRUN, 1, 0),
        (b"\x80\x80\x80\x80\x80\x00", WalkError.VARINT_TOO_LONG, 0, 0),
        (b"\xfe\xff\xff\xff\x1f", WalkError.VARINT_TOO_LONG, 0, 0),  # 2^32-1: not an int32
        (encode_record(0, key=None)[:-1] + b"\x02", WalkError.HEADER_COUNT, 7, 1),
        (encode_record(1), WalkError.OFFSET_DELTA, 3, 1),
        (encode_record(0) + b"\x00", WalkError.TRAILING_BYTES, len(encode_record(0)), 0),
        (encode_record(0, headers=[(b"a", b"b")])[:11] + b"\x04b", WalkError.FIELD_OVERRUN, 11, 12),
    ],
    ids=[
        "empty",
        "negative-length",
        "truncated",
        "attributes-overrun",
        "varint-too-long",
        "varint-overflow",
        "header-count",
        "offset-delta",
        "trailing",
        "header-value-overrun",
    ],
)
def test_known_errors(data, error, position, value):
    outcome = assert_same(data, 1, 0, 0, True)
    assert (outcome.error, outcome.error_position, outcome.error_value) == (error, position, value)


def test_null_header_key_and_negative_lengths():
    record = bytearray(encode_record(0, key=b"", value=b"", headers=[(b"", b"")]))
    # body: attributes, ts 0, delta 0, key len 0, value len 0, header count 1, key len 0, value 0
    for index, bad, error in [
        (4, 3, WalkError.KEY_LENGTH),  # zigzag 3 = -2
        (5, 3, WalkError.VALUE_LENGTH),
        (7, 1, WalkError.HEADER_KEY_NULL),  # -1: header keys are not nullable
        (8, 3, WalkError.HEADER_VALUE_LENGTH),
    ]:
        mutated = bytearray(record)
        mutated[index] = bad
        outcome = assert_same(bytes(mutated), 1, 0, 0, True)
        assert outcome.error is error, (index, outcome)


def test_compacted_gaps_are_allowed_only_when_offsets_need_not_be_exact():
    data = encode_record(0) + encode_record(2) + encode_record(5)
    assert assert_same(data, 3, 5, 0, False).error is WalkError.NONE
    assert assert_same(data, 3, 5, 0, True).error is WalkError.OFFSET_DELTA
    assert assert_same(data, 3, 4, 0, False).error is WalkError.OFFSET_DELTA  # 5 > last delta
    repeated = encode_record(0) + encode_record(0)
    assert assert_same(repeated, 2, 1, 0, False).error is WalkError.OFFSET_DELTA


def test_a_value_spanning_many_pieces_is_skipped_not_kept():
    value = bytes(1 << 20)
    data = encode_record(0, value=value)
    outcome = assert_same(data, 1, 0, 0, True, cuts=range(3, len(data), 4099))
    assert outcome.error is WalkError.NONE


# -- the extension's contract ----------------------------------------------------------------------


def test_the_walker_reads_any_buffer_and_refuses_what_is_not_one():
    data = encode_record(0)
    for buffer in (data, bytearray(data), memoryview(data), memoryview(b"xx" + data)[2:]):
        walker = RecordWalker(1, 0, 0, True)
        assert walker.feed(buffer, True) == len(data) and walker.done
    with pytest.raises(TypeError):
        RecordWalker(1, 0, 0, True).feed("text")
    with pytest.raises(ValueError):
        RecordWalker(-1, 0, 0, True)


def test_feed_after_an_error_changes_nothing():
    walker = RecordWalker(1, 0, 0, True)
    walker.feed(b"\x01")
    assert walker.error == WalkError.RECORD_LENGTH_NEGATIVE
    assert walker.feed(encode_record(0), True) == 0
    assert walker.error == WalkError.RECORD_LENGTH_NEGATIVE and walker.records == 0


def test_large_buffers_are_walked_without_the_gil():
    """Another thread runs while one feed walks 60 MB (it could not if the GIL were held)."""
    headers = 30_000_000  # each 2 bytes: an empty key, a null value; walked one by one
    body = bytearray(b"\x00\x00\x00\x01\x01")  # attributes, deltas 0, null key and value
    write_varint(body, headers)
    body += b"\x00\x01" * headers
    data = bytearray()
    write_varint(data, len(body))
    data += body
    assert len(data) >= _recordwalk.RELEASE_GIL_MIN_BYTES
    ticks: list[float] = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    walker = RecordWalker(1, 0, 0, True)
    thread = threading.Thread(target=tick)
    thread.start()
    try:
        start = time.perf_counter()
        walker.feed(data, True)
        end = time.perf_counter()
    finally:
        stop.set()
        thread.join(timeout=10)
    assert walker.done and walker.records == 1
    # Margins: a switch between reading the clock and entering or leaving feed lets the other
    # thread run for a switch interval (5 ms) outside the walk.
    margin_s = 0.02
    assert end - start > 3 * margin_s, "the walk was too quick to tell"
    inside = [t for t in ticks if start + margin_s < t < end - margin_s]
    assert inside, f"no other thread ran during a {end - start:.3f} s walk"
