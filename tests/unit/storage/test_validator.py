"""Appends check every record as Kafka's LogValidator does, compressed or not, in bounded memory."""

from __future__ import annotations

import contextlib
import gc
import os
import random
import struct
import tracemalloc
import zlib
from pathlib import Path

import cramjam
import pytest
from kafka.record.default_records import DefaultRecordBatch

from odradek.config.topic import TopicConfig
from odradek.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
)
from odradek.storage.batch import (
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    MAX_TIMESTAMP_OFFSET,
    BatchHeader,
    compute_crc,
)
from odradek.storage.compression import MAX_DECOMPRESSED_BYTES, Compression, compress
from odradek.storage.records import decode_records, write_varint
from odradek.storage.validator import AppendOrigin, validate_records
from odradek.storage.walker import walk_batch
from support.kafka_batches import kafka_python_batch

T0 = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CONTROL = 0x20


def record(offset_delta, key=b"k", value=b"v", headers=(), timestamp_delta=0) -> bytes:
    """One record as the format says (see odradek.storage.records)."""
    body = bytearray(b"\x00")
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    for blob in (key, value):
        write_varint(body, -1 if blob is None else len(blob))
        body += blob or b""
    write_varint(body, len(headers))
    for header_key, header_value in headers:
        write_varint(body, len(header_key))
        body += header_key
        write_varint(body, -1 if header_value is None else len(header_value))
        body += header_value or b""
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out + body)


def batch(
    section: bytes,
    *,
    count: int,
    last_offset_delta: int | None = None,
    codec: int = 0,
    compressed: bytes | None = None,
    attributes: int = 0,
    base_timestamp: int = T0,
    base_offset: int = 0,
) -> bytes:
    """A batch around ``section`` with whatever header fields a test needs, and a valid CRC."""
    if compressed is None:
        compressed = compress(Compression(codec), section)
    data = bytearray(HEADER_SIZE) + compressed
    HEADER_STRUCT.pack_into(
        data,
        0,
        base_offset,
        len(data) - 12,
        -1,
        2,
        0,
        codec | attributes,
        count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        base_timestamp,
        -1,
        -1,
        -1,
        count,
    )
    struct.pack_into(">I", data, CRC_OFFSET, compute_crc(data))
    return bytes(data)


def kafka_batch(count=50, codec=0, headers=True) -> bytes:
    records = []
    for i in range(count):
        header_list = [("trace", b"t-%d" % i), ("empty", None)] if headers else []
        key = None if i % 3 == 0 else b"key-%d" % i
        value = None if i % 5 == 0 else b"value %d " % i * 20
        records.append((i, T0 + i, key, value, header_list))
    return bytes(kafka_python_batch(records, codec=codec))


def validate(data, origin=AppendOrigin.CLIENT, now_ms=T0, **config):
    return validate_records(data, TopicConfig(**config), origin=origin, now_ms=now_ms)


def refused(data, error=InvalidRecordError, match=None, **kwargs):
    with pytest.raises(error, match=match) as raised:
        validate(data, **kwargs)
    return raised.value


def lying_count_batch() -> bytes:
    """The batch of issue 6: a valid CRC, 2^31-1 records claimed, no records at all."""
    return batch(b"", count=(1 << 31) - 1, last_offset_delta=(1 << 31) - 2)


# -- the batch of issue 6 -------------------------------------------------------------------------


def test_the_lying_count_batch_is_refused_and_the_log_is_unchanged(make_log, kafka_batch):
    log = make_log()
    log.append(kafka_batch([(b"k", b"v")]))
    files = sorted(path.name for path in log.directory.iterdir())
    for _ in range(20):
        with pytest.raises(InvalidRecordError, match="end after 0 records") as raised:
            log.append(lying_count_batch())
        assert raised.value.error_code == ErrorCode.invalid_record
        assert log.log_end_offset == 1
    assert sorted(path.name for path in log.directory.iterdir()) == files
    assert len(log.segments()) == 1
    assert log.append(kafka_batch([(b"k", b"v")])).first_offset == 1  # still takes records


@pytest.mark.parametrize("codec", [1, 3, 4], ids=["gzip", "lz4", "zstd"])
def test_the_lying_count_batch_compressed_is_refused(codec):
    data = batch(record(0), count=(1 << 31) - 1, last_offset_delta=(1 << 31) - 2, codec=codec)
    assert "end after 1 records" in str(refused(data))


# -- each rule, with Kafka's error code ---------------------------------------------------------

SECTION = record(0) + record(1) + record(2)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (batch(SECTION, count=4), "end after 3 records"),
        (batch(SECTION, count=2), "bytes follow the last record"),
        (batch(SECTION + b"\x00", count=3), "bytes follow the last record"),
        (batch(SECTION[:-1], count=3), "end inside this record"),
        (batch(record(0) + record(2) + record(3), count=3), "offset delta 2 .*expected 1"),
        (batch(record(1) + record(0), count=2), "offset delta 1 .*expected 0"),
        (batch(bytes([record(0)[0] + 2]) + record(0)[1:] + b"\x00", count=1), "end before"),
        (batch(b"\x05" + record(0)[1:], count=1), "negative"),
        (batch(record(0, key=None)[:-1] + b"\x7f", count=1), "header count"),
        (batch(record(0, headers=[(b"", b"")])[:-2] + b"\x01\x00", count=1), "not nullable"),
        (batch(b"\x80\x80\x80\x80\x80\x01", count=1), "varint"),
        (batch(b"", count=0, last_offset_delta=0), "at least one record"),
        (batch(SECTION, count=3, last_offset_delta=5), "last_offset_delta 5"),
    ],
    ids=[
        "fewer-records-than-count",
        "more-records-than-count",
        "trailing-byte",
        "truncated-record",
        "offset-gap",
        "offsets-out-of-order",
        "length-beyond-fields",
        "negative-length",
        "header-count-beyond-record",
        "null-header-key",
        "varint-too-long",
        "no-records",
        "count-disagrees-with-last-offset-delta",
    ],
)
def test_each_record_rule_is_invalid_record(data, match):
    error = refused(data, match=match)
    assert error.error_code == ErrorCode.invalid_record and not error.retriable


@pytest.mark.parametrize("codec", list(CODECS.values())[1:], ids=list(CODECS)[1:])
def test_compressed_batches_are_walked_too(codec):
    assert validate(batch(SECTION, count=3, codec=codec)).batches
    refused(batch(SECTION, count=4, codec=codec), match="end after 3 records")
    refused(batch(SECTION + b"\x00", count=3, codec=codec), match="bytes follow")
    refused(batch(record(0) + record(5), count=2, codec=codec), match="offset delta 5")


def test_error_messages_say_which_record_and_which_byte():
    data = batch(record(0) + record(1) + record(1), count=3, codec=CODECS["lz4"])
    message = str(refused(data))
    where = len(record(0) + record(1)) + 3  # length, attributes, timestamp delta: then the delta
    assert "invalid record 2 of 3 in the batch at position 0" in message
    assert f"at byte {where} of its decompressed lz4 records section" in message


def test_a_second_batch_is_judged_and_named_by_its_position():
    good = batch(SECTION, count=3)
    message = str(refused(good + batch(SECTION, count=4), match="end after 3 records"))
    assert f"batch at position {len(good)}" in message


def test_corrupt_compressed_data_is_corrupt_message():
    data = bytearray(compress(Compression.GZIP, SECTION * 50))
    data[len(data) // 2 :] = bytes(len(data) - len(data) // 2)
    error = refused(batch(b"", count=150, compressed=bytes(data), codec=1), CorruptRecordError)
    assert error.error_code == ErrorCode.corrupt_message


def test_lz4_with_linked_blocks_is_refused_as_kafka_refuses_it():
    compressor = cramjam.lz4.Compressor(block_linked=True)
    compressor.compress(SECTION)
    linked = bytes(compressor.finish())
    refused(batch(b"", count=3, compressed=linked, codec=3), CorruptRecordError, "linked blocks")


# -- origins -------------------------------------------------------------------------------------


def test_replicated_batches_may_have_compaction_gaps_but_not_broken_records():
    gappy = batch(record(0) + record(4) + record(9), count=3, last_offset_delta=12)
    assert validate(gappy, AppendOrigin.REPLICATION).batches
    refused(gappy)  # from a producer, the same batch is refused
    empty = batch(b"", count=0, last_offset_delta=7)  # the cleaner keeps one for producer state
    assert validate(empty, AppendOrigin.REPLICATION).batches
    for broken, match in [
        (batch(record(0) + record(13), count=2, last_offset_delta=12), "offset delta 13"),
        (batch(record(3) + record(3), count=2, last_offset_delta=12), "offset delta 3"),
        (lying_count_batch(), "end after 0 records"),
        (batch(SECTION[:-1], count=3), "end inside this record"),
    ]:
        refused(broken, match=match, origin=AppendOrigin.REPLICATION)


def test_coordinators_write_control_batches_whose_records_are_walked():
    control_record = record(0, key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00")
    control = batch(control_record, count=1, attributes=CONTROL)
    assert validate(control, AppendOrigin.COORDINATOR).batches
    refused(control, match="control batches")
    broken = batch(control_record + b"\x00", count=1, attributes=CONTROL)
    refused(broken, match="bytes follow", origin=AppendOrigin.COORDINATOR)


# -- the topic's record rules ---------------------------------------------------------------------


def test_compacted_topics_refuse_a_null_key_and_say_which_record():
    data = batch(record(0) + record(1, key=None), count=2)
    error = refused(data, match="without a key.*record 1", cleanup_policy="compact")
    assert error.error_code == ErrorCode.invalid_record
    assert validate(batch(SECTION, count=3), cleanup_policy="compact").batches


def test_timestamp_bounds_use_every_record_and_skip_those_without_a_timestamp():
    late = batch(record(0) + record(1, timestamp_delta=10_000), count=2)
    assert validate(late, message_timestamp_after_max_ms=10_000).batches
    with pytest.raises(InvalidTimestampError, match="record 1 "):
        validate(late, message_timestamp_after_max_ms=9_999)
    # -1 is "no timestamp": Kafka does not judge it.
    untimed = batch(record(0, timestamp_delta=-1 - T0) + record(1), count=2)
    assert validate(untimed, message_timestamp_before_max_ms=1000).batches


# -- real clients' batches ----------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
@pytest.mark.parametrize("headers", [True, False], ids=["headers", "no-headers"])
def test_kafka_python_batches_with_every_codec_pass_and_read_back(make_log, codec, headers):
    data = kafka_batch(200, codec, headers)
    log = make_log()
    info = log.append(data)
    assert (info.first_offset, info.last_offset) == (0, 199)
    [(_, stored)] = list(log.batches())
    kafka = DefaultRecordBatch(bytes(stored))
    assert kafka.validate_crc()
    assert [(r.key, r.value) for r in kafka] == [(r.key, r.value) for r in decode_records(data)]
    # And as a follower and a compacted topic would take it.
    assert validate(data, AppendOrigin.REPLICATION).batches
    assert validate(_all_keyed(codec), cleanup_policy="compact").batches


def _all_keyed(codec: int) -> bytes:
    return bytes(
        kafka_python_batch(((i, T0, b"k%d" % i, None, ()) for i in range(20)), codec=codec)
    )


# -- decompression bombs: refused, in bounded memory ---------------------------------------------

BOMB_OUTPUT_BYTES = MAX_DECOMPRESSED_BYTES + (16 << 20)  # past the limit


def bomb_section_start() -> bytes:
    """One record that claims the largest length a record can have: the walker skips its value
    bytes without keeping them, so only the decompression limit stops the walk."""
    length = (1 << 31) - 1
    body = bytearray(b"\x00\x00\x00\x01")  # attributes, deltas 0, null key
    write_varint(body, length - len(body) - 5 - 1)  # a value to the end, then no headers
    assert len(body) == 9
    out = bytearray()
    write_varint(out, length)
    return bytes(out + body)


def build_bomb(codec: int) -> bytes:
    zeros = bytes(BOMB_OUTPUT_BYTES)
    section = bomb_section_start() + zeros
    if codec == CODECS["gzip"]:
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
        compressed = compressor.compress(section) + compressor.flush()
    else:
        compressed = compress(Compression(codec), section)
    del zeros, section
    gc.collect()
    return batch(b"", count=1, compressed=compressed, codec=codec)


def peak_rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


@pytest.mark.parametrize("codec", [1, 3, 4], ids=["gzip", "lz4", "zstd"])
def test_a_bomb_is_refused_at_the_limit_in_bounded_memory(codec):
    bomb = build_bomb(codec)
    assert len(bomb) < TopicConfig().max_message_bytes  # a batch the broker would take in
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak resident size (VmHWM)
    rss_before = peak_rss_bytes()
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match=f"more than {MAX_DECOMPRESSED_BYTES} bytes"):
            validate(bomb)
        _, peak_traced = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss_growth = peak_rss_bytes() - rss_before
    assert peak_traced < 4 << 20, peak_traced  # one piece and a few bytes, not the section
    assert rss_growth < 24 << 20, rss_growth  # the libraries' own buffers included


def test_a_snappy_bomb_is_refused_before_anything_is_decompressed():
    block = bytearray(cramjam.snappy.compress_raw(bytes(1 << 20)))
    stated = bytearray()
    value = 1 << 31  # a raw block starts with its decompressed length, as a plain varint
    while value >= 0x80:
        stated.append(value & 0x7F | 0x80)
        value >>= 7
    stated.append(value)
    claimed = bytes(stated) + block[4:]  # 1 MiB of zeros states 4 preamble bytes
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="more than"):
            validate(batch(b"", count=1, compressed=claimed, codec=2))
        _, peak_traced = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_traced < 1 << 20


def test_xerial_snappy_blocks_count_towards_the_limit_one_block_at_a_time():
    section = bomb_section_start() + bytes(8 << 20)
    data = batch(b"", count=1, compressed=compress(Compression.SNAPPY, section), codec=2)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="more than 4194304 bytes"):
            walk_batch(
                memoryview(data),
                0,
                BatchHeader.parse(data),
                exact_offsets=True,
                max_decompressed_bytes=4 << 20,
            )
        _, peak_traced = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_traced < 1 << 20


def test_decode_records_keeps_the_bound_too():
    with pytest.raises(CorruptRecordError, match="more than 1048576 bytes"):
        decode_records(build_small_bomb(), max_size=1 << 20)


def build_small_bomb() -> bytes:
    section = bomb_section_start() + bytes(4 << 20)
    return batch(b"", count=1, compressed=compress(Compression.ZSTD, section), codec=4)


def test_random_bytes_never_crash_validation():
    rng = random.Random(6)
    for _ in range(300):
        section = os.urandom(rng.randrange(0, 200))
        data = batch(section, count=rng.randrange(0, 5), codec=rng.choice([0, 0, 1, 3]))
        for origin in (AppendOrigin.CLIENT, AppendOrigin.REPLICATION):
            with contextlib.suppress(InvalidRecordError, CorruptRecordError):
                validate(data, origin)


# -- max_timestamp is the records' ----------------------------------------------------------------


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("claimed", [T0 + 10**12, T0 - 10**9, -1])
def test_a_header_lying_about_its_max_timestamp_is_stored_with_the_truth(make_log, codec, claimed):
    section = record(0, timestamp_delta=5) + record(1, timestamp_delta=42) + record(2)
    data = bytearray(batch(section, count=3, codec=CODECS[codec]))
    struct.pack_into(">q", data, MAX_TIMESTAMP_OFFSET, claimed)
    struct.pack_into(">I", data, CRC_OFFSET, compute_crc(data))
    validated = validate(bytes(data))
    [(_, header)] = validated.batches
    assert header.max_timestamp == T0 + 42
    assert compute_crc(validated.records) == header.crc  # still a valid batch
    log = make_log()
    log.append(bytes(data))
    assert log.segments()[-1].max_timestamp == T0 + 42  # what retention and the time index see
    stored = DefaultRecordBatch(next(log.batches())[1])
    assert stored.validate_crc()
    assert [r.timestamp for r in stored] == [T0 + 5, T0 + 42, T0]


def test_a_batch_telling_its_true_max_timestamp_is_not_copied():
    data = kafka_batch(count=5)
    validated = validate(data)
    assert validated.records.obj is data  # untouched: still the caller's buffer
