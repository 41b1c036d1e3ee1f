"""Records decode from kafka-python's batches, encode into batches it reads, and reject damage."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from odradek.errors import CorruptRecordError
from odradek.storage.batch import (
    HEADER_SIZE,
    BatchHeader,
    check_producer_batch,
    set_log_append_time,
    validate_batch,
)
from odradek.storage.compression import Compression
from odradek.storage.records import (
    Record,
    decode_records,
    encode_batch,
    read_varint,
    write_varint,
)
from support.kafka_batches import kafka_python_batch

CODECS = list(Compression)
NOW_MS = 1_700_000_000_000

# Compressible values, so that kafka-python keeps the codec (it sends uncompressed otherwise).
RECORDS = [
    Record(
        offset=i,
        timestamp=NOW_MS + (i * 37) % 1000 - 500,  # out of order, some before base_timestamp
        key=None if i % 5 == 0 else b"key-%d" % i,
        value=None if i % 7 == 3 else b"value %d " % i * (i % 50),
        headers=() if i % 3 else (("trace", b"abc%d" % i), ("empty", b""), ("null", None)),
    )
    for i in range(300)
]


def kafka_batch(
    records, *, codec: int = 0, producer_id=-1, producer_epoch=-1, base_sequence=-1
) -> bytes:
    """A batch from kafka-python's own builder; offsets and timestamps relative to base 0."""
    return bytes(
        kafka_python_batch(
            ((r.offset, r.timestamp, r.key, r.value, r.headers) for r in records),
            codec=codec,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
    )


def kafka_view(batch: bytes) -> list[tuple]:
    """Records as kafka-python reads them, after it checked the CRC."""
    kafka = DefaultRecordBatch(batch)
    assert kafka.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in kafka]


def as_tuples(records: list[Record]) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


# -- reading kafka-python's batches ------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_decodes_kafka_python_batches(codec):
    batch = kafka_batch(RECORDS, codec=codec, producer_id=7, producer_epoch=2, base_sequence=40)
    assert BatchHeader.parse(batch).compression == codec
    assert decode_records(batch) == RECORDS
    assert decode_records(memoryview(batch)) == RECORDS
    assert decode_records(bytearray(batch)) == RECORDS


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_gives_every_record_the_batch_max_timestamp(codec):
    batch = bytearray(kafka_batch(RECORDS[:20], codec=codec))
    set_log_append_time(batch, 0, NOW_MS + 99_999)
    records = decode_records(batch)
    assert {record.timestamp for record in records} == {NOW_MS + 99_999}
    assert [r.value for r in records] == [r.value for r in RECORDS[:20]]


def test_single_record_batch_with_empty_key_and_value():
    record = Record(offset=0, timestamp=NOW_MS, key=b"", value=b"")
    assert decode_records(kafka_batch([record])) == [record]


# -- writing batches kafka-python reads --------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(codec):
    batch = encode_batch(
        RECORDS,
        base_offset=0,
        compression=codec,
        producer_id=12,
        producer_epoch=3,
        base_sequence=100,
        partition_leader_epoch=9,
        is_transactional=True,
    )
    assert kafka_view(batch) == as_tuples(RECORDS)
    kafka = DefaultRecordBatch(batch)
    assert kafka.compression_type == codec
    assert (kafka.producer_id, kafka.producer_epoch, kafka.base_sequence) == (12, 3, 100)
    assert kafka.leader_epoch == 9
    assert kafka.is_transactional and not kafka.is_control_batch
    assert kafka.first_timestamp == RECORDS[0].timestamp
    assert kafka.max_timestamp == max(r.timestamp for r in RECORDS)
    assert kafka.last_offset_delta == len(RECORDS) - 1
    header = validate_batch(batch, 0, len(batch))
    check_producer_batch(header)
    assert decode_records(batch) == RECORDS


@pytest.mark.parametrize("codec", CODECS)
def test_gappy_offsets_and_a_kept_last_offset_delta(codec):
    # What the cleaner writes: survivors of a batch that covered offsets 1000..1049.
    survivors = [RECORDS[i] for i in (3, 4, 17, 30)]
    survivors = [Record(1000 + r.offset, r.timestamp, r.key, r.value, r.headers) for r in survivors]
    batch = encode_batch(survivors, base_offset=1000, compression=codec, last_offset_delta=49)
    assert kafka_view(batch) == as_tuples(survivors)
    kafka = DefaultRecordBatch(batch)
    assert (kafka.base_offset, kafka.last_offset_delta, kafka.records_count) == (1000, 49, 4)
    header = validate_batch(batch, 0, len(batch))
    assert header.next_offset == 1050
    assert decode_records(batch) == survivors


@pytest.mark.parametrize("codec", CODECS)
def test_empty_batch_keeps_its_offsets_and_is_uncompressed(codec):
    batch = encode_batch(
        [],
        base_offset=500,
        last_offset_delta=9,
        compression=codec,
        max_timestamp=NOW_MS,
        producer_id=4,
        producer_epoch=1,
        base_sequence=20,
    )
    header = validate_batch(batch, 0, len(batch))
    assert len(batch) == HEADER_SIZE
    assert (header.records_count, header.last_offset, header.compression) == (0, 509, 0)
    assert header.base_timestamp == header.max_timestamp == NOW_MS
    assert header.last_sequence == 29
    assert kafka_view(batch) == []
    assert decode_records(batch) == []


def test_log_append_time_batches_read_as_kafka_python_reads_them():
    batch = encode_batch(RECORDS[:10], base_offset=0, log_append_time=True, max_timestamp=123)
    assert {timestamp for _, timestamp, *_ in kafka_view(batch)} == {123}
    assert {r.timestamp for r in decode_records(batch)} == {123}


def test_control_batch():
    commit = Record(offset=8, timestamp=NOW_MS, key=struct.pack(">hh", 0, 1), value=b"\0\0\0\0\0\0")
    batch = encode_batch(
        [commit],
        base_offset=8,
        producer_id=5,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    kafka = DefaultRecordBatch(batch)
    assert kafka.is_control_batch
    (marker,) = list(kafka)
    assert marker.commit and marker.offset == 8
    assert decode_records(batch) == [commit]


def test_base_offset_and_timestamp_can_be_set():
    records = [Record(10, NOW_MS, b"k", b"v"), Record(12, NOW_MS + 5, b"k", b"w")]
    batch = encode_batch(records, base_offset=4, base_timestamp=NOW_MS - 1000)
    header = BatchHeader.parse(batch)
    assert (header.base_offset, header.base_timestamp, header.max_timestamp) == (
        4,
        NOW_MS - 1000,
        NOW_MS + 5,
    )
    assert decode_records(batch) == records


def test_header_keys_keep_their_bytes_even_when_not_utf8():
    record = Record(0, NOW_MS, None, b"v", headers=(("caf\udcc3", b"x"),))
    batch = encode_batch([record], base_offset=0)
    assert b"caf\xc3" in batch
    assert decode_records(batch) == [record]


@pytest.mark.parametrize(
    ("records", "kwargs", "message"),
    [
        ([], {}, "empty batch needs last_offset_delta"),
        ([Record(5, 0, None, None), Record(5, 0, None, None)], {}, "must be above 5"),
        ([Record(3, 0, None, None)], {"base_offset": 4}, "must be above 3"),
        ([Record(1 << 31, 0, None, None)], {"base_offset": 0}, "within 2147483647"),
        ([Record(9, 0, None, None)], {"last_offset_delta": 8}, "before the last record"),
        ([], {"last_offset_delta": -1}, "outside 0..2147483647"),
        ([Record(0, 0, None, None, attributes=128)], {}, "int8"),
        ([Record(0, 1 << 63, None, None)], {"base_timestamp": -1}, "out of range"),
        ([Record(0, 0, None, None)], {"producer_epoch": 1 << 15}, "out of range"),
    ],
)
def test_impossible_batches_are_value_errors(records, kwargs, message):
    kwargs = {"base_offset": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        encode_batch(records, **kwargs)


# -- round trips and damage (Hypothesis) -------------------------------------------------------

int64 = st.integers(-(1 << 63), (1 << 63) - 1)
nullable_bytes = st.none() | st.binary(max_size=200)
headers = st.lists(st.tuples(st.text(max_size=10), nullable_bytes), max_size=3).map(tuple)


@st.composite
def record_lists(draw):
    base_offset = draw(st.integers(0, 1 << 40))
    base_timestamp = draw(st.integers(-1, 1 << 45))
    offset = base_offset + draw(st.integers(0, 100))
    records = []
    for _ in range(draw(st.integers(1, 12))):
        records.append(
            Record(
                offset=offset,
                timestamp=base_timestamp + draw(st.integers(-(1 << 40), 1 << 40)),
                key=draw(nullable_bytes),
                value=draw(nullable_bytes),
                headers=draw(headers),
                attributes=draw(st.integers(-128, 127)),
            )
        )
        offset += draw(st.integers(1, 1 << 20))
    return base_offset, records


@settings(max_examples=150, deadline=None)
@given(case=record_lists(), codec=st.sampled_from(CODECS), extra_offsets=st.integers(0, 1000))
def test_records_round_trip(case, codec, extra_offsets):
    base_offset, records = case
    last_offset_delta = records[-1].offset - base_offset + extra_offsets
    if last_offset_delta > (1 << 31) - 1:
        return
    batch = encode_batch(
        records, base_offset=base_offset, compression=codec, last_offset_delta=last_offset_delta
    )
    assert validate_batch(batch, 0, len(batch)).last_offset_delta == last_offset_delta
    assert decode_records(batch) == records


@settings(max_examples=200, deadline=None)
@given(value=int64)
def test_varints_round_trip(value):
    out = bytearray()
    write_varint(out, value)
    assert len(out) <= 10
    assert read_varint(bytes(out), 0) == (value, len(out))
    if -(1 << 31) <= value < (1 << 31):
        assert len(out) <= 5
        assert read_varint(bytes(out), 0, 32) == (value, len(out))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01")],
)
def test_varints_are_zigzag(value, encoded):
    out = bytearray()
    write_varint(out, value)
    assert out == encoded


@pytest.mark.parametrize(
    ("data", "bits", "message"),
    [
        (b"\xff" * 10 + b"\x01", 64, "longer than 10 bytes"),
        (b"\xff" * 5 + b"\x01", 32, "longer than 5 bytes"),
        (b"\xff" * 4 + b"\x7f", 32, "does not fit in 32 bits"),
        (b"\xff" * 9 + b"\x7f", 64, "does not fit in 64 bits"),
    ],
)
def test_overlong_varints_are_corrupt(data, bits, message):
    with pytest.raises(CorruptRecordError, match=message):
        read_varint(data, 0, bits)


VALID = {codec: encode_batch(RECORDS[:12], base_offset=0, compression=codec) for codec in CODECS}


def expect_decoded_or_corrupt(batch) -> None:
    try:
        records = decode_records(batch, max_size=1 << 20)
    except CorruptRecordError:
        return
    assert isinstance(records, list)


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.data())
def test_mutated_batches_decode_or_raise_corrupt_record_error(codec, data):
    batch = bytearray(VALID[codec])
    for _ in range(data.draw(st.integers(1, 5))):
        index = data.draw(st.integers(0, len(batch) - 1))
        batch[index] = data.draw(st.integers(0, 255))
    expect_decoded_or_corrupt(batch)


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.data())
def test_mutated_records_sections_decode_or_raise_corrupt_record_error(codec, data):
    # The header is kept consistent (length and count) so that parsing reaches the records.
    batch = bytearray(VALID[codec])
    cut = data.draw(st.integers(HEADER_SIZE, len(batch)))
    batch = batch[:cut] + data.draw(st.binary(max_size=20))
    for _ in range(data.draw(st.integers(0, 5))):
        index = data.draw(st.integers(HEADER_SIZE, max(HEADER_SIZE, len(batch) - 1)))
        if index < len(batch):
            batch[index] = data.draw(st.integers(0, 255))
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 57, data.draw(st.sampled_from([12, 11, 13, 0, -1, 1 << 30])))
    expect_decoded_or_corrupt(batch)


@settings(max_examples=100, deadline=None)
@given(codec=st.sampled_from(CODECS), cut=st.integers(0, 10_000))
def test_truncated_batches_are_corrupt(codec, cut):
    batch = VALID[codec]
    if cut >= len(batch):
        return
    with pytest.raises(CorruptRecordError):
        decode_records(batch[:cut])


# -- damage, case by case ----------------------------------------------------------------------


def with_records_section(section: bytes, count: int, attributes: int = 0) -> bytes:
    """An uncompressed batch around hand-made record bytes (the CRC is left stale)."""
    batch = bytearray(encode_batch([], base_offset=0, last_offset_delta=0)) + section
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">i", batch, 57, count)
    return bytes(batch)


def record_bytes(*fields: int | bytes, length: int | None = None) -> bytes:
    """One record: each int is a varint (the attributes byte included), bytes are copied."""
    body = bytearray()
    for field in fields:
        if isinstance(field, bytes):
            body += field
        else:
            write_varint(body, field)
    out = bytearray()
    write_varint(out, len(body) if length is None else length)
    return bytes(out + body)


GOOD = record_bytes(0, 0, 0, 1, b"k", 1, b"v", 0)  # attributes 0, deltas 0, key, value, no headers


@pytest.mark.parametrize(
    ("section", "count", "message"),
    [
        (GOOD, 2, "ends inside a record"),
        (GOOD + GOOD, 1, "bytes after the 1 records"),
        (GOOD, -1, "negative records_count"),
        (record_bytes(0, 0, 0, 1, b"k", 1, b"v", 0, length=7), 1, "declares 7 bytes"),
        (record_bytes(0, 0, 0, 1, b"k", 1, b"v", 0, length=200), 1, "record of 200 bytes"),
        (record_bytes(0, 0, 0, 1, b"k", 1, b"v", 0, length=-3), 1, "record of -3 bytes"),
        (record_bytes(0, 0, 0, -2, 1, b"v", 0), 1, "negative key length -2"),
        (record_bytes(0, 0, 0, 1, b"k", -7, 0), 1, "negative value length -7"),
        (record_bytes(0, 0, 0, 1, b"k", 1, b"v", -1), 1, "negative header count"),
        (record_bytes(0, 0, 0, 1, b"k", 1, b"v", 1, -1, 0), 1, "header key length -1"),
        (record_bytes(0, 0, 0, 1, b"k", 1, b"v", 1, 1, b"h", -9), 1, "header value length"),
        (record_bytes(0, 0, 0, 1, b"k", 1, b"v", 1 << 30), 1, "headers do not fit"),
        (record_bytes(0, b"\xff" * 10 + b"\x01", 0, -1, -1, 0), 1, "longer than 10 bytes"),
        (record_bytes(0, 0, b"\xff" * 5 + b"\x01", -1, -1, 0), 1, "longer than 5 bytes"),
        (record_bytes(0, 0, 0, 100, b"k", -1, 0), 1, "record"),
    ],
)
def test_malformed_records_are_corrupt_with_a_reason(section, count, message):
    with pytest.raises(CorruptRecordError, match=message):
        decode_records(with_records_section(section, count))


def test_good_hand_made_record_decodes():
    assert decode_records(with_records_section(GOOD, 1)) == [Record(0, -1, b"k", b"v")]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[: HEADER_SIZE - 1], "header needs 61 bytes"),
        (lambda b: b + b"\x00", "length says"),
        (lambda b: b[:16] + b"\x01" + b[17:], "magic 1"),
        (lambda b: b[:22] + b"\x07" + b[23:], "codec id 7"),
    ],
)
def test_malformed_batches_are_corrupt_with_a_reason(damage, message):
    with pytest.raises(CorruptRecordError, match=message):
        decode_records(damage(VALID[Compression.NONE]))


def test_decompressed_size_is_bounded():
    batch = encode_batch([Record(0, 0, None, bytes(1 << 20))], base_offset=0, compression=4)
    assert len(batch) < 1000
    with pytest.raises(CorruptRecordError, match="more than 65536 bytes"):
        decode_records(batch, max_size=1 << 16)
    assert decode_records(batch)[0].value == bytes(1 << 20)
