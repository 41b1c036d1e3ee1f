"""Batch headers: kafka-python's batches validate, and any damage the CRC covers is caught."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from odradek.errors import CorruptRecordError, InvalidRecordError
from odradek.storage.batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    check_producer_batch,
    compute_crc,
    encode_base_offset,
    iter_batches,
    read_prefix,
    set_base_offset,
    set_log_append_time,
    validate_batch,
)
from support.kafka_batches import kafka_python_batch

CODECS = [0, 1, 2, 3, 4]
NOW_MS = 1_700_000_000_000


def kafka_batch(count: int = 20, *, codec: int = 0, producer_id=-1, base_sequence=-1) -> bytes:
    """A batch from kafka-python's builder with compressible values (so the codec is kept)."""
    records = [
        (i, NOW_MS + i * 3, b"key-%d" % i, b"value " * (i + 10), [("h", b"v")])
        for i in range(count)
    ]
    return bytes(
        kafka_python_batch(
            records,
            codec=codec,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=base_sequence,
        )
    )


BATCHES = {codec: kafka_batch(codec=codec) for codec in CODECS}


def restamp(batch: bytearray) -> bytearray:
    """Recompute the CRC, for damage meant to pass the checksum."""
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    return batch


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_validate_and_headers_match_its_view(codec):
    batch = kafka_batch(codec=codec, producer_id=77, base_sequence=(1 << 31) - 5)
    header = validate_batch(batch, 0, len(batch))
    kafka = DefaultRecordBatch(batch)
    assert header.compression == kafka.compression_type == codec
    assert header.base_offset == kafka.base_offset
    assert header.size_in_bytes == kafka.size_in_bytes == len(batch)
    assert header.partition_leader_epoch == kafka.leader_epoch
    assert header.magic == kafka.magic == 2
    assert header.crc == kafka.crc
    assert header.attributes == kafka.attributes
    assert header.last_offset_delta == kafka.last_offset_delta == 19
    assert header.last_offset == kafka.last_offset
    assert header.next_offset == kafka.next_offset == 20
    assert header.base_timestamp == kafka.first_timestamp == NOW_MS
    assert header.max_timestamp == kafka.max_timestamp == NOW_MS + 57
    assert header.producer_id == kafka.producer_id == 77
    assert header.producer_epoch == kafka.producer_epoch
    assert header.base_sequence == kafka.base_sequence
    assert header.last_sequence == kafka.last_sequence == 14  # wrapped past 2**31 - 1
    assert header.records_count == kafka.records_count == 20
    assert header.is_transactional == kafka.is_transactional
    assert header.is_control == kafka.is_control_batch
    assert header.is_log_append_time == (kafka.timestamp_type == 1)
    assert header.has_producer_id
    check_producer_batch(header)


def test_validate_batch_at_a_position_inside_a_larger_buffer():
    buffer = b"\xaa" * 10 + BATCHES[3] + b"\xbb" * 5
    header = validate_batch(buffer, 10, len(BATCHES[3]))
    assert header == BatchHeader.parse(BATCHES[3])
    assert read_prefix(buffer, 10) == (0, len(BATCHES[3]))


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.data())
def test_any_byte_changed_in_the_crc_span_is_corrupt(codec, data):
    batch = bytearray(BATCHES[codec])
    index = data.draw(st.integers(ATTRIBUTES_OFFSET, len(batch) - 1))
    batch[index] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        validate_batch(batch, 0, len(batch))


@settings(max_examples=100, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.data())
def test_base_offset_and_leader_epoch_are_outside_the_crc(codec, data):
    batch = bytearray(BATCHES[codec])
    index = data.draw(st.sampled_from([*range(0, 8), *range(12, 16)]))
    batch[index] ^= data.draw(st.integers(1, 255))
    header = validate_batch(batch, 0, len(batch))
    assert (header.base_offset, header.partition_leader_epoch) == struct.unpack_from(">q4xi", batch)


@settings(max_examples=100, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.data())
def test_damaged_length_or_magic_is_corrupt(codec, data):
    batch = bytearray(BATCHES[codec])
    index = data.draw(st.sampled_from([8, 9, 10, 11, 16]))
    batch[index] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptRecordError):
        validate_batch(batch, 0, len(batch))


@settings(max_examples=150, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.data())
def test_truncation_at_any_length_is_corrupt(codec, data):
    batch = BATCHES[codec]
    cut = data.draw(st.integers(0, len(batch) - 1))
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batch(batch[:cut], 0, cut)
    # The same when the caller says fewer bytes belong to the record set than the buffer holds.
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batch(batch, 0, cut)


@pytest.mark.parametrize(("field", "value"), [("records_count", -1), ("last_offset_delta", -2)])
def test_negative_counts_with_a_good_crc_are_invalid(field, value):
    batch = bytearray(BATCHES[0])
    struct.pack_into(">i", batch, {"records_count": 57, "last_offset_delta": 23}[field], value)
    with pytest.raises(InvalidRecordError, match=f"{field} {value}"):
        validate_batch(restamp(batch), 0, len(batch))


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_with_a_good_crc_is_invalid(codec):
    batch = bytearray(BATCHES[0])
    batch[22] |= codec
    with pytest.raises(InvalidRecordError, match=f"codec id {codec}"):
        validate_batch(restamp(batch), 0, len(batch))


def test_batch_length_below_the_minimum_is_corrupt():
    batch = bytearray(BATCHES[0])
    struct.pack_into(">i", batch, 8, 48)
    with pytest.raises(CorruptRecordError, match="below the minimum 49"):
        validate_batch(batch, 0, len(batch))


@settings(max_examples=100, deadline=None)
@given(codecs=st.lists(st.sampled_from(CODECS), min_size=1, max_size=6))
def test_iter_batches_yields_each_batch_position(codecs):
    batches = [kafka_batch(count=i + 1, codec=codec) for i, codec in enumerate(codecs)]
    expected, position = [], 0
    for batch in batches:
        expected.append((position, BatchHeader.parse(batch)))
        position += len(batch)
    record_set = b"".join(batches)
    assert list(iter_batches(record_set)) == expected
    assert list(iter_batches(memoryview(record_set))) == expected


def test_iter_batches_of_nothing_is_empty():
    assert list(iter_batches(b"")) == []


@settings(max_examples=100, deadline=None)
@given(garbage=st.binary(min_size=1, max_size=200))
def test_trailing_garbage_after_whole_batches_is_corrupt(garbage):
    record_set = BATCHES[0] + BATCHES[3] + garbage
    batches = iter_batches(record_set)
    assert next(batches)[0] == 0
    assert next(batches)[0] == len(BATCHES[0])
    with pytest.raises(CorruptRecordError):
        next(batches)


def test_check_producer_batch_rules():
    header = BatchHeader.parse(BATCHES[0])
    check_producer_batch(header)
    with pytest.raises(InvalidRecordError, match="20 records but last_offset_delta 20"):
        check_producer_batch(header._replace(last_offset_delta=20))
    with pytest.raises(InvalidRecordError, match="19 records but last_offset_delta 19"):
        check_producer_batch(header._replace(records_count=19))
    with pytest.raises(InvalidRecordError, match="at least one record"):
        check_producer_batch(header._replace(records_count=0, last_offset_delta=0))


@pytest.mark.parametrize("codec", CODECS)
def test_set_base_offset_keeps_the_crc_valid(codec):
    first, second = BATCHES[0], BATCHES[codec]
    record_set = bytearray(first + second)
    set_base_offset(record_set, len(first), 1_000_000_000_000)
    (_, first_header), (position, header) = iter_batches(record_set)
    assert first_header.base_offset == 0
    assert (position, header.base_offset) == (len(first), 1_000_000_000_000)
    kafka = DefaultRecordBatch(record_set[len(first) :])
    assert kafka.validate_crc()
    assert [r.offset for r in kafka] == list(range(1_000_000_000_000, 1_000_000_000_020))
    assert encode_base_offset(1_000_000_000_000) == bytes(record_set[len(first) : len(first) + 8])


@pytest.mark.parametrize("codec", CODECS)
def test_set_log_append_time_sets_the_type_bit_max_timestamp_and_crc(codec):
    record_set = bytearray(BATCHES[0] + BATCHES[codec])
    position = len(BATCHES[0])
    before = BatchHeader.parse(record_set, position)
    set_log_append_time(record_set, position, NOW_MS + 5000)
    (_, first), (_, header) = iter_batches(record_set)
    assert first == BatchHeader.parse(BATCHES[0])
    assert header.is_log_append_time
    assert header.attributes == before.attributes | TIMESTAMP_TYPE_MASK
    assert header.compression == codec
    assert header.max_timestamp == NOW_MS + 5000
    assert header.base_timestamp == before.base_timestamp
    kafka = DefaultRecordBatch(record_set[position:])
    assert kafka.validate_crc()
    assert kafka.timestamp_type == 1
    assert {r.timestamp for r in kafka} == {NOW_MS + 5000}


def test_header_parse_needs_61_bytes():
    with pytest.raises(CorruptRecordError, match="needs 61 bytes, 60 remain"):
        BatchHeader.parse(BATCHES[0][: HEADER_SIZE - 1])


@pytest.mark.parametrize(
    ("base_sequence", "last_offset_delta", "last_sequence"),
    [(-1, 5, -1), (0, 5, 5), ((1 << 31) - 1, 0, (1 << 31) - 1), ((1 << 31) - 1, 1, 0)],
)
def test_last_sequence_wraps_as_kafka_does(base_sequence, last_offset_delta, last_sequence):
    header = BatchHeader.parse(BATCHES[0])._replace(
        base_sequence=base_sequence,
        last_offset_delta=last_offset_delta,
    )
    assert header.last_sequence == last_sequence


def test_a_producer_id_without_a_sequence_number_is_refused():
    """Kafka's LogValidator: a batch from an idempotent producer must carry a sequence."""
    header = BatchHeader(0, 100, -1, 2, 0, 0, 0, 0, 0, 7, 0, -1, 1)
    with pytest.raises(InvalidRecordError, match="invalid sequence number -1"):
        check_producer_batch(header)
    check_producer_batch(header._replace(base_sequence=0))
    check_producer_batch(header._replace(producer_id=-1))  # not idempotent: no sequence needed
