"""A partition log assigns offsets, rejects bad input untouched, rolls, retains, recovers."""

from __future__ import annotations

import contextlib
import errno
import os
import random
import shutil
import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch

from odradek.common.clock import ManualClock
from odradek.config.topic import TopicConfig
from odradek.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from odradek.storage.batch import BatchHeader, iter_batches
from odradek.storage.files import LEADER_EPOCH_CHECKPOINT
from odradek.storage.log import Log, TimestampAndOffset
from odradek.storage.segment import LogSegment

T0 = 1_700_000_000_000
GZIP, LZ4 = 1, 3


@pytest.fixture
def reopen():
    """``reopen(log, directory=None, **kwargs)``: a new Log on the files of ``log``.

    ``directory`` defaults to the log's own; the new log is closed at the end of the test.
    """
    opened: list[Log] = []

    def open_again(
        log: Log, directory: Path | None = None, config: TopicConfig | None = None, **kwargs
    ) -> Log:
        again = Log(directory or log.directory, config or log.config, clock=log.clock, **kwargs)
        opened.append(again)
        return again

    yield open_again
    for log in opened:
        with contextlib.suppress(Exception):
            log.close()


def _crash(log: Log, tmp_path: Path) -> Path:
    """The log's files as a killed process leaves them, copied while the log is still open.

    The copy holds what the process wrote, without close()'s flush, trims and final index
    entries; tests damage and reopen the copy. Returns the copy's directory.
    """
    copy = tmp_path / "crashed" / log.directory.name
    shutil.copytree(log.directory, copy)
    return copy


def _segment_files(directory: Path) -> list[Path]:
    """The segments' files: not producer snapshots, not the leader-epoch checkpoint."""
    return [
        p
        for p in directory.iterdir()
        if p.suffix != ".snapshot" and p.name != LEADER_EPOCH_CHECKPOINT
    ]


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def _records(log: Log, start_offset: int = 0) -> list[tuple[int, int, bytes | None, bytes]]:
    """Every stored record, decoded by kafka-python: (offset, timestamp, key, value)."""
    out = []
    for base_offset, data in log.batches(start_offset):
        batch = DefaultRecordBatch(data)
        assert batch.validate_crc()
        assert batch.base_offset == base_offset
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    return out


def _headers(data: bytes) -> list[BatchHeader]:
    """Headers of a fetched record set; iter_batches raises unless it is whole batches only."""
    return [header for _, header in iter_batches(data)]


def _append_n(log: Log, kafka_batch, count: int, records_per_batch: int = 2, **kwargs) -> None:
    for n in range(count):
        records = [(b"key-%d" % (n % 5), b"value-%d-%d" % (n, i)) for i in range(records_per_batch)]
        log.append(kafka_batch(records, **{"timestamp_ms": T0, **kwargs}))


def _with_crc(batch: bytearray) -> bytes:
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)


# -- offsets -----------------------------------------------------------------------------


def test_offsets_are_assigned_consecutively(make_log, kafka_batch):
    log = make_log()
    info = log.append(kafka_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]))
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 2, 3)

    record_set = b"".join(kafka_batch([(b"k%d" % n, b"v")] * n) for n in (1, 4, 2))
    info = log.append(record_set)
    assert (info.first_offset, info.last_offset, info.records_count) == (3, 9, 7)
    assert [base_offset for base_offset, _ in info.batches] == [3, 4, 8]
    assert info.valid_bytes == len(record_set)

    info = log.append(kafka_batch([(b"z", b"last")]))
    assert (info.first_offset, info.last_offset) == (10, 10)
    assert log.log_end_offset == 11
    assert [base_offset for base_offset, _ in log.batches()] == [0, 3, 4, 8, 10]
    assert [record[0] for record in _records(log)] == list(range(11))
    assert log.append(b"").records_count == 0
    assert log.log_end_offset == 11


@pytest.mark.parametrize("leader_epoch", [None, 7])
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_only_the_base_offset_is_rewritten(make_log, kafka_batch, codec, leader_epoch):
    log = make_log()
    log.append(kafka_batch([(b"k", b"v")] * 5))
    produced = kafka_batch([(b"k%d" % i, b"odradek " * 30) for i in range(10)], codec=codec)
    log.append(produced, leader_epoch=leader_epoch)
    ((base_offset, stored),) = log.batches(5)

    assert base_offset == 5 and len(stored) == len(produced)
    changed = {i for i in range(len(stored)) if stored[i] != produced[i]}
    allowed = set(range(8)) | (set() if leader_epoch is None else set(range(12, 16)))
    assert changed and changed <= allowed
    assert struct.unpack_from(">q", stored)[0] == 5
    if leader_epoch is not None:
        assert struct.unpack_from(">i", stored, 12)[0] == 7
    batch = DefaultRecordBatch(stored)
    assert batch.validate_crc() and batch.compression_type == codec
    assert [r.offset for r in batch] == list(range(5, 15))


# -- rejections --------------------------------------------------------------------------


def _flip_last_byte(kafka_batch) -> bytes:
    damaged = bytearray(kafka_batch([(b"k", b"value")]))
    damaged[-1] ^= 0x01
    return bytes(damaged)


def _magic_1(kafka_batch) -> bytes:
    damaged = bytearray(kafka_batch([(b"k", b"value")]))
    damaged[16] = 1
    return bytes(damaged)


def _delta_mismatch(kafka_batch) -> bytes:
    batch = bytearray(kafka_batch([(b"k", b"a"), (b"k", b"b"), (b"k", b"c")]))
    struct.pack_into(">i", batch, 23, 5)  # last_offset_delta 5 for 3 records
    return _with_crc(batch)


def _control_batch(kafka_batch) -> bytes:
    batch = bytearray(kafka_batch([(b"k", b"v")]))
    batch[22] |= 0x20
    return _with_crc(batch)


REJECTIONS = {
    "bad-crc": ({}, _flip_last_byte, CorruptRecordError, ErrorCode.corrupt_message),
    "bad-magic": ({}, _magic_1, CorruptRecordError, ErrorCode.corrupt_message),
    "truncated": (
        {},
        lambda kb: kb([(b"k", b"value")])[:-5],
        CorruptRecordError,
        ErrorCode.corrupt_message,
    ),
    "second-batch-truncated": (
        {},
        lambda kb: kb([(b"k", b"good")]) + kb([(b"k", b"value")])[:-1],
        CorruptRecordError,
        ErrorCode.corrupt_message,
    ),
    "trailing-bytes": (
        {},
        lambda kb: kb([(b"k", b"good")]) + b"\x00\x01\x02",
        CorruptRecordError,
        ErrorCode.corrupt_message,
    ),
    "batch-over-max.message.bytes": (
        {"max_message_bytes": 200},
        lambda kb: kb([(b"k", b"x" * 200)]),
        RecordTooLargeError,
        ErrorCode.message_too_large,
    ),
    "record-set-over-segment.bytes": (
        {"segment_bytes": 1000},
        lambda kb: b"".join(kb([(b"k", b"x" * 300)]) for _ in range(3)),
        RecordTooLargeError,
        ErrorCode.message_too_large,
    ),
    "count-delta-mismatch": ({}, _delta_mismatch, InvalidRecordError, ErrorCode.invalid_record),
    "control-batch-from-a-client": (
        {},
        _control_batch,
        InvalidRecordError,
        ErrorCode.invalid_record,
    ),
    "null-key-compacted": (
        {"cleanup_policy": "compact"},
        lambda kb: kb([(b"k", b"v"), (None, b"no key")]),
        InvalidRecordError,
        ErrorCode.invalid_record,
    ),
    "timestamp-too-old": (
        {"message_timestamp_before_max_ms": 1000},
        lambda kb: kb([(b"k", b"v")], timestamp_ms=[T0 - 1001]),
        InvalidTimestampError,
        ErrorCode.invalid_timestamp,
    ),
    "timestamp-too-new": (
        {"message_timestamp_after_max_ms": 1000},
        lambda kb: kb([(b"k", b"v"), (b"k", b"w")], timestamp_ms=[T0, T0 + 1001]),
        InvalidTimestampError,
        ErrorCode.invalid_timestamp,
    ),
}


@pytest.mark.parametrize("case", REJECTIONS, ids=list(REJECTIONS))
def test_rejected_record_sets_leave_the_log_untouched(make_log, kafka_batch, case):
    config, build, error, code = REJECTIONS[case]
    log = make_log(clock=ManualClock(T0), index_interval_bytes=0, **config)
    _append_n(log, kafka_batch, 3)
    before = _snapshot(log.directory)
    log_end_offset = log.log_end_offset

    with pytest.raises(error) as raised:
        log.append(build(kafka_batch))
    assert raised.value.error_code is code

    assert log.log_end_offset == log_end_offset
    assert _snapshot(log.directory) == before
    assert log.read(log_end_offset, 1 << 20).records is None
    assert log.append(kafka_batch([(b"k", b"after")], timestamp_ms=T0)).first_offset == 6


def test_timestamps_within_the_bounds_are_accepted(make_log, kafka_batch):
    clock = ManualClock(T0)
    log = make_log(
        clock=clock, message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000
    )
    info = log.append(kafka_batch([(b"k", b"v")] * 2, timestamp_ms=[T0 - 1000, T0 + 1000]))
    assert info.last_offset == 1
    clock.advance(ms=5000)  # the bound moves with the broker's clock
    with pytest.raises(InvalidTimestampError):
        log.append(kafka_batch([(b"k", b"v")], timestamp_ms=T0))


# -- rolling -----------------------------------------------------------------------------


def test_segments_roll_at_segment_bytes_and_old_indexes_are_trimmed(make_log, kafka_batch):
    log = make_log(segment_bytes=1000, index_interval_bytes=100, segment_index_bytes=4096)
    for n in range(40):
        log.append(kafka_batch([(b"k", b"x" * (20 + n * 37 % 150))] * 2, timestamp_ms=T0 + n))
    segments = log.segments()
    assert len(segments) >= 4
    for segment, following in zip(segments, segments[1:], strict=False):
        assert 0 < segment.size <= 1000
        assert following.base_offset == segment.next_offset
        first_following = following.read_header(0)
        assert segment.size + first_following.size_in_bytes > 1000  # rolled only when full
        assert segment.offset_index.entries > 0
        assert segment.offset_index.path.stat().st_size == 8 * segment.offset_index.entries
        assert segment.time_index.path.stat().st_size == 12 * segment.time_index.entries
        assert segment.time_index.last_entry == (
            segment.max_timestamp,
            segment.offset_of_max_timestamp,
        )
    active = segments[-1]
    assert active.offset_index.path.stat().st_size == 4096
    assert sorted(p.name for p in log.directory.glob("*.log")) == [
        f"{s.base_offset:020d}.log" for s in segments
    ]
    assert [record[0] for record in _records(log)] == list(range(80))


def test_segments_roll_at_segment_ms_by_record_time(make_log, kafka_batch):
    clock = ManualClock(T0)
    log = make_log(clock=clock, segment_ms=1000)

    def append(timestamp: int) -> None:
        log.append(kafka_batch([(b"k", b"v")], timestamp_ms=timestamp))

    append(T0)
    append(T0 + 1000)  # waited exactly segment.ms: not yet
    clock.advance(ms=10**9)  # the broker's clock does not matter when records carry time
    append(T0 + 300)
    assert [s.base_offset for s in log.segments()] == [0]
    append(T0 + 1001)
    assert [s.base_offset for s in log.segments()] == [0, 3]
    append(T0 + 2001)
    assert [s.base_offset for s in log.segments()] == [0, 3]
    append(T0 + 2002)
    assert [s.base_offset for s in log.segments()] == [0, 3, 5]
    assert log.segments()[0].offset_index.path.stat().st_size == 0


def test_segments_roll_at_segment_ms_by_clock_without_record_time(make_log, kafka_batch):
    clock = ManualClock(T0)
    log = make_log(clock=clock, segment_ms=1000, segment_jitter_ms=0)
    no_timestamp = kafka_batch([(b"k", b"v")], timestamp_ms=-1)
    log.append(no_timestamp)
    clock.advance(ms=1000)
    log.append(no_timestamp)
    assert len(log.segments()) == 1
    clock.advance(ms=1)
    log.append(no_timestamp)
    assert [s.base_offset for s in log.segments()] == [0, 2]
    assert log.segments()[-1].created_ms == T0 + 1001


# -- reading -----------------------------------------------------------------------------


@pytest.mark.parametrize("max_bytes", [1, 150, 400, 1 << 20])
def test_a_consumer_reads_every_record_across_segments(make_log, kafka_batch, max_bytes):
    log = make_log(segment_bytes=600, index_interval_bytes=0)
    for n in range(40):
        log.append(kafka_batch([(b"k", b"%d" % n)] * (n % 3 + 1), timestamp_ms=T0 + n))
    segments = log.segments()
    assert len(segments) >= 4
    files = {id(s.file) for s in segments}
    offset, seen = 0, []
    while offset < log.log_end_offset:
        info = log.read(offset, max_bytes)
        assert info.log_end_offset == log.log_end_offset
        assert id(info.records.file) in files  # one segment's file per read
        data = info.records.read_bytes()
        batches = list(iter_batches(data))  # whole batches only
        assert len(data) <= max_bytes or len(batches) == 1  # over max_bytes: one batch (KIP-74)
        for position, header in batches:
            batch = DefaultRecordBatch(data[position : position + header.size_in_bytes])
            seen += [r.offset for r in batch if r.offset >= offset]
            next_offset = header.next_offset
        offset = next_offset
    assert seen == list(range(log.log_end_offset))


def test_a_batch_larger_than_max_bytes_is_never_skipped(make_log, kafka_batch):
    log = make_log()
    log.append(kafka_batch([(b"k", b"small")]))
    log.append(kafka_batch([(b"k", b"x" * 1000)]))  # offset 1, last batch of its segment
    log.roll()
    log.append(kafka_batch([(b"k", b"small")]))
    assert [s.base_offset for s in log.segments()] == [0, 2]
    assert log.read(1, 100, min_one_message=False).records is None
    records = log.read(1, 100, min_one_message=True).records
    assert [h.base_offset for h in _headers(records.read_bytes())] == [1]


def test_reads_never_return_data_at_or_after_max_offset(make_log, kafka_batch):
    log = make_log(segment_bytes=500, index_interval_bytes=0)
    for n in range(20):
        log.append(kafka_batch([(b"k", b"%d" % n)] * (n % 3 + 1), timestamp_ms=T0))
    batches = [(base, BatchHeader.parse(data)) for base, data in log.batches()]
    log_end_offset = log.log_end_offset
    for high_watermark in range(log_end_offset + 1):
        assert log.update_high_watermark(high_watermark) == high_watermark
        for offset in range(log_end_offset + 1):
            info = log.read(offset, 1 << 20, max_offset=high_watermark)
            assert info.high_watermark == high_watermark
            holding = next((h for _, h in batches if h.last_offset >= offset), None)
            if holding is None or holding.last_offset >= high_watermark:
                assert info.records is None
                continue
            headers = _headers(info.records.read_bytes())
            assert headers[0].base_offset == holding.base_offset
            assert all(h.last_offset < high_watermark for h in headers)


def test_reads_outside_the_log_raise_offset_out_of_range(make_log, kafka_batch):
    log = make_log()
    _append_n(log, kafka_batch, 5)
    assert log.read(10, 1000).records is None  # the LEO itself: nothing yet, not an error
    with pytest.raises(OffsetOutOfRangeError) as raised:
        log.read(11, 1000)
    assert raised.value.error_code is ErrorCode.offset_out_of_range
    log.update_high_watermark(log.log_end_offset)
    log.advance_log_start_offset(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 1000)
    assert _headers(log.read(4, 1000).records.read_bytes())[0].base_offset == 4
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)


# -- timestamps --------------------------------------------------------------------------


def _first_at(records, timestamp, max_offset=None):
    """Brute force: the first record (in offset order) with a timestamp at or after."""
    for offset, record_timestamp, _, _ in records:
        if max_offset is not None and offset >= max_offset:
            return None
        if record_timestamp >= timestamp:
            return TimestampAndOffset(record_timestamp, offset)
    return None


def test_offset_for_timestamp_with_create_time(make_log, kafka_batch):
    log = make_log()
    for timestamps in ([100, 300, 200], [250], [400, 50], [500, 500]):
        records = [(b"k", b"v")] * len(timestamps)
        log.append(kafka_batch(records, timestamp_ms=[T0 + t for t in timestamps]))
    records = _records(log)

    assert log.offset_for_timestamp(-2) == TimestampAndOffset(-1, 0)
    assert log.offset_for_timestamp(-1) == TimestampAndOffset(-1, 8)
    assert log.offset_for_timestamp(-3) == TimestampAndOffset(T0 + 500, 6)
    assert log.offset_for_timestamp(T0 + 300) == TimestampAndOffset(T0 + 300, 1)  # exact
    assert log.offset_for_timestamp(T0 + 260) == TimestampAndOffset(T0 + 300, 1)  # between
    assert log.offset_for_timestamp(T0 + 301) == TimestampAndOffset(T0 + 400, 4)
    assert log.offset_for_timestamp(T0 + 501) is None  # beyond every record
    for target in range(T0, T0 + 520, 7):
        assert log.offset_for_timestamp(target) == _first_at(records, target)
    # Below max_offset (the high watermark) only.
    assert log.offset_for_timestamp(-1, max_offset=5) == TimestampAndOffset(-1, 5)
    assert log.offset_for_timestamp(T0 + 450, max_offset=6) is None
    assert log.offset_for_timestamp(-3, max_offset=6) is None
    for target in range(T0, T0 + 520, 7):
        assert log.offset_for_timestamp(target, max_offset=5) == _first_at(records, target, 5)


def test_offset_for_timestamp_with_log_append_time(make_log, kafka_batch):
    clock = ManualClock(T0)
    log = make_log(clock=clock, message_timestamp_type="LogAppendTime")
    for _ in range(5):
        clock.advance(ms=10)
        log.append(kafka_batch([(b"k", b"v")] * 2, timestamp_ms=12345))  # producer time ignored
    assert [record[1] for record in _records(log)] == [T0 + 10 * (n // 2 + 1) for n in range(10)]
    assert log.offset_for_timestamp(T0 + 10) == TimestampAndOffset(T0 + 10, 0)
    assert log.offset_for_timestamp(T0 + 25) == TimestampAndOffset(T0 + 30, 4)
    assert log.offset_for_timestamp(-3) == TimestampAndOffset(T0 + 50, 8)
    assert log.offset_for_timestamp(T0 + 51) is None
    assert log.offset_for_timestamp(12345) == TimestampAndOffset(T0 + 10, 0)


def test_offset_for_timestamp_through_time_indexes_of_many_segments(make_log, kafka_batch, reopen):
    rng = random.Random(7)
    log = make_log(segment_bytes=800, index_interval_bytes=0, segment_index_bytes=4096)
    for n in range(60):
        timestamps = [T0 + n * 10 + rng.randint(-25, 25) for _ in range(rng.randint(1, 3))]
        log.append(kafka_batch([(b"k", b"%d" % n)] * len(timestamps), timestamp_ms=timestamps))
    records = _records(log)
    segments = log.segments()
    assert len(segments) >= 4
    assert all(s.time_index.entries >= 2 for s in segments[:-1])
    targets = range(T0 - 50, T0 + 650, 3)
    expected = [_first_at(records, target) for target in targets]
    assert [log.offset_for_timestamp(t) for t in targets] == expected
    maximum = max(records, key=lambda r: (r[1], -r[0]))
    assert log.offset_for_timestamp(-3) == TimestampAndOffset(maximum[1], maximum[0])

    log.close()
    again = reopen(log, clean_shutdown=True)
    assert [again.offset_for_timestamp(t) for t in targets] == expected
    assert again.offset_for_timestamp(-3) == TimestampAndOffset(maximum[1], maximum[0])


@pytest.mark.parametrize("codec", [0, GZIP, 4], ids=["none", "gzip", "zstd"])
def test_log_append_time_stamps_batches_and_keeps_the_crc_valid(make_log, kafka_batch, codec):
    clock = ManualClock(T0 + 12345)
    log = make_log(clock=clock, message_timestamp_type="LogAppendTime")
    values = [(b"k%d" % i, b"value %d" % i) for i in range(3)]
    produced = bytearray(kafka_batch(values, codec=codec, timestamp_ms=T0))
    original = bytes(produced)
    info = log.append(produced)
    assert produced == original  # the producer's buffer is not modified
    assert info.log_append_time_ms == T0 + 12345

    ((_, stored),) = log.batches()
    batch = DefaultRecordBatch(stored)
    assert batch.validate_crc()
    assert batch.timestamp_type == 1
    assert batch.max_timestamp == T0 + 12345
    assert [(r.key, r.value, r.timestamp) for r in batch] == [
        (key, value, T0 + 12345) for key, value in values
    ]
    # Only the base offset, CRC, attributes (timestamp type) and max_timestamp changed.
    changed = {i for i in range(len(stored)) if stored[i] != original[i]}
    assert changed <= set(range(8)) | set(range(17, 23)) | set(range(35, 43))


def test_compression_type_reencodes_batches(make_log, kafka_batch):
    log = make_log(compression_type="lz4")
    log.append(kafka_batch([(b"k", b"first")]))
    values = [(b"key-%d" % i, b"value " * i) for i in range(20)]
    timestamps = [T0 + 7 * i for i in range(20)]
    produced = kafka_batch(
        values,
        codec=GZIP,
        timestamp_ms=timestamps,
        headers=[("trace", b"1")],
        producer_id=42,
        producer_epoch=3,
        base_sequence=9,
    )
    info = log.append(produced)
    assert (info.first_offset, info.last_offset) == (1, 20)

    ((_, first), (base_offset, stored)) = log.batches()
    assert DefaultRecordBatch(first).compression_type == LZ4
    batch = DefaultRecordBatch(stored)
    assert base_offset == 1
    assert batch.validate_crc() and batch.compression_type == LZ4
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 9)
    assert (batch.first_timestamp, batch.max_timestamp) == (T0, T0 + 133)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch] == [
        (1 + i, timestamps[i], key, value, [("trace", b"1")])
        for i, (key, value) in enumerate(values)
    ]


# -- retention ---------------------------------------------------------------------------


def _rolled_log(
    make_log, kafka_batch, segments: int, clock: ManualClock | None = None, **config
) -> Log:
    """``segments`` rolled segments of one 3-record batch each (record time T0 + 5000 n),
    then an empty active one; the high watermark at the end."""
    log = make_log(clock=clock or ManualClock(T0 + 5000 * segments), **config)
    for n in range(segments):
        log.append(kafka_batch([(b"k", b"x" * 50)] * 3, timestamp_ms=T0 + 5000 * n))
        log.roll()
    log.update_high_watermark(log.log_end_offset)
    return log


def test_retention_ms_deletes_whole_old_segments(make_log, kafka_batch):
    clock = ManualClock(T0 + 10_000 + 10_001)
    log = _rolled_log(
        make_log, kafka_batch, 5, clock=clock, retention_ms=10_000, file_delete_delay_ms=0
    )
    # Newest records: T0, T0+5000, ..., T0+20000; more than retention.ms old: the first three.
    assert log.delete_old_segments() == 3
    assert [s.base_offset for s in log.segments()] == [9, 12, 15]
    assert log.log_start_offset == 9
    assert sorted(p.name for p in log.directory.glob("*.log")) == [
        "00000000000000000009.log",
        "00000000000000000012.log",
        "00000000000000000015.log",
    ]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(8, 1000)
    assert log.delete_old_segments() == 0

    clock.advance(ms=10**9)
    assert log.delete_old_segments() == 2  # never the active segment
    assert [s.base_offset for s in log.segments()] == [15]
    assert log.log_start_offset == 15


def test_retention_keeps_a_non_empty_active_segment(make_log, kafka_batch):
    clock = ManualClock(T0 + 10**9)
    log = make_log(clock=clock, retention_ms=1000, file_delete_delay_ms=0)
    for n in range(3):
        log.append(kafka_batch([(b"k", b"v")], timestamp_ms=T0 + n))
        if n < 2:
            log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 2
    assert [s.base_offset for s in log.segments()] == [2]
    assert [record[0] for record in _records(log)] == [2]


def test_retention_never_deletes_above_the_high_watermark(make_log, kafka_batch):
    clock = ManualClock(T0 + 10**9)
    log = _rolled_log(make_log, kafka_batch, 5, clock=clock, retention_ms=1000)
    log.update_high_watermark(7)  # inside the third segment [6, 9)
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 6
    log.update_high_watermark(9)
    assert log.delete_old_segments() == 1


@pytest.mark.parametrize("retention_segments", [0, 1, 2.5, 4, 6, 10])
def test_retention_bytes_deletes_the_oldest_segments(make_log, kafka_batch, retention_segments):
    segment_size = len(kafka_batch([(b"k", b"x" * 50)] * 3, timestamp_ms=T0))  # one batch each
    retention_bytes = int(segment_size * retention_segments)
    log = _rolled_log(
        make_log, kafka_batch, 6, retention_bytes=retention_bytes, file_delete_delay_ms=0
    )
    expected, total = 0, 6 * segment_size
    while expected < 6 and total - segment_size >= retention_bytes:
        total -= segment_size
        expected += 1
    assert log.delete_old_segments() == expected
    assert log.size_in_bytes == total
    assert log.log_start_offset == 3 * expected
    assert [record[0] for record in _records(log)] == list(range(3 * expected, 18))


def test_delete_records_then_retention(make_log, kafka_batch):
    log = _rolled_log(make_log, kafka_batch, 4, file_delete_delay_ms=0)
    assert [s.base_offset for s in log.segments()] == [0, 3, 6, 9, 12]
    assert log.advance_log_start_offset(7) == 7
    assert log.offset_for_timestamp(-2) == TimestampAndOffset(-1, 7)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 1000)
    assert _headers(log.read(7, 1000).records.read_bytes())[0].base_offset == 6
    assert log.advance_log_start_offset(5) == 7  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start_offset(log.high_watermark + 1)

    assert log.delete_old_segments() == 2  # wholly below offset 7
    assert [s.base_offset for s in log.segments()] == [6, 9, 12]
    assert log.log_start_offset == 7
    assert [record[0] for record in _records(log, 7)][0] == 6  # the batch still holds 6


def test_deleted_files_go_after_file_delete_delay_and_slices_stay_readable(make_log, kafka_batch):
    clock = ManualClock(T0 + 10**6)
    log = _rolled_log(
        make_log, kafka_batch, 2, clock=clock, retention_ms=1000, file_delete_delay_ms=5000
    )
    fetched = log.read(0, 1 << 20).records
    data = fetched.read_bytes()
    assert log.delete_old_segments() == 2
    names = sorted(p.name for p in _segment_files(log.directory))
    # Producer state snapshots before the new log start offset go with the segments.
    assert [p.name for p in log.directory.glob("*.snapshot")] == [f"{6:020d}.snapshot"]
    assert names == sorted(
        f"{base:020d}{suffix}.deleted"
        for base in (0, 3)
        for suffix in (".log", ".index", ".timeindex")
    ) + sorted(f"{6:020d}{suffix}" for suffix in (".index", ".log", ".timeindex"))
    assert fetched.read_bytes() == data

    clock.advance(ms=4999)
    log.delete_expired_files()
    assert fetched.read_bytes() == data
    assert len(list(log.directory.glob("*.deleted"))) == 6

    clock.advance(ms=1)
    log.delete_expired_files()
    assert list(log.directory.glob("*.deleted")) == []
    with pytest.raises(ValueError):  # the file is closed now
        fetched.read_bytes()


# -- durability --------------------------------------------------------------------------


@pytest.fixture
def fsyncs(disk):
    """The names of the ``.log`` files fsynced through ``disk``, in order (the calls still
    happen): a test passes ``file_ops=disk`` to the log it watches."""
    names: list[str] = []
    disk.before("fsync", lambda c: c.path.endswith(".log") and names.append(Path(c.path).name))
    return names


def test_an_unclean_reopen_keeps_batches_larger_than_a_lowered_max_message_bytes(
    make_log, kafka_batch, reopen, tmp_path
):
    log = make_log(max_message_bytes=200_000)
    sizes = []
    for n in range(4):
        value = random.Random(n).randbytes(30_000 * (n + 1))  # incompressible
        log.append(kafka_batch([(b"k", value)], codec=LZ4))
        sizes.append(len(list(log.batches())[-1][1]))
    batches = list(log.batches())
    crashed = _crash(log, tmp_path)

    lowered = TopicConfig(max_message_bytes=1_000)  # below every stored batch
    again = reopen(log, crashed, config=lowered, recovery_point=0)
    assert min(sizes) > lowered.max_message_bytes
    assert list(again.batches()) == batches
    assert again.log_end_offset == log.log_end_offset
    with pytest.raises(RecordTooLargeError):  # the lower limit holds for new appends
        again.append(kafka_batch([(b"k", b"x" * 2_000)]))


def test_flush_messages_1_flushes_every_append(make_log, kafka_batch, disk, fsyncs):
    log = make_log(flush_messages=1, file_ops=disk)
    for n in range(4):
        log.append(kafka_batch([(b"k", b"v")] * (n + 1)))
        assert log.recovery_point == log.log_end_offset
        assert len(fsyncs) == n + 1


def test_flush_messages_counts_offsets(make_log, kafka_batch, disk, fsyncs):
    log = make_log(flush_messages=3, file_ops=disk)
    log.append(kafka_batch([(b"k", b"v")] * 2))
    assert (log.recovery_point, len(fsyncs)) == (0, 0)
    log.append(kafka_batch([(b"k", b"v")]))
    assert (log.recovery_point, len(fsyncs)) == (3, 1)
    default = make_log("default-0")
    _append_n(default, kafka_batch, 5)
    assert default.recovery_point == 0


def test_flush_if_due_with_flush_ms(make_log, kafka_batch, disk, fsyncs):
    clock = ManualClock(T0)
    log = make_log(clock=clock, flush_ms=1000, file_ops=disk)
    _append_n(log, kafka_batch, 3)
    clock.advance(ms=999)
    log.flush_if_due()
    assert (log.recovery_point, len(fsyncs)) == (0, 0)
    clock.advance(ms=1)
    log.flush_if_due()
    assert log.recovery_point == 6 and len(fsyncs) == 1
    assert log.last_flush_ms == T0 + 1000
    log.flush_if_due()  # nothing new
    assert len(fsyncs) == 1


def test_a_flush_over_a_roll_makes_the_new_files_durable_in_their_directory(
    make_log, kafka_batch, disk
):
    """As Kafka's LocalLog.flush: segments created since the last flush need the directory
    entry fsynced too, or a power cut could lose whole files the recovery point counts."""
    fsynced: list[str] = []
    disk.before("fsync", lambda call: fsynced.append(call.path))
    log = make_log(file_ops=disk)
    _append_n(log, kafka_batch, 2)
    log.flush()
    assert fsynced[-1] == str(log.directory)  # the first segment's files are new too
    fsynced.clear()
    _append_n(log, kafka_batch, 1)
    log.flush()
    assert str(log.directory) not in fsynced  # no file created since the last flush
    log.roll()
    _append_n(log, kafka_batch, 1)
    fsynced.clear()
    log.flush()
    assert fsynced[-1] == str(log.directory)
    assert log.recovery_point == log.log_end_offset


def test_flush_if_due_flushes_rolled_segments(make_log, kafka_batch, disk, fsyncs):
    clock = ManualClock(T0)
    log = make_log(clock=clock, file_ops=disk)  # flush.ms: never
    _append_n(log, kafka_batch, 2)
    log.roll()
    _append_n(log, kafka_batch, 1)
    log.flush_if_due()
    assert log.recovery_point == 4  # up to the active segment, not into it
    assert fsyncs == ["00000000000000000000.log"]


# -- shutdown and recovery ---------------------------------------------------------------


def _segment_state(log: Log) -> list[tuple]:
    return [
        (s.base_offset, s.size, s.next_offset, s.max_timestamp, s.offset_of_max_timestamp)
        for s in log.segments()
    ]


def _build(make_log, kafka_batch, batches: int = 30, **config) -> Log:
    defaults = {"segment_bytes": 700, "index_interval_bytes": 64, "segment_index_bytes": 4096}
    log = make_log(**{**defaults, **config})
    rng = random.Random(3)
    for n in range(batches):
        timestamps = [T0 + n * 100 + rng.randint(-150, 150) for _ in range(rng.randint(1, 3))]
        log.append(kafka_batch([(b"k", b"%d" % n)] * len(timestamps), timestamp_ms=timestamps))
    return log


def test_clean_close_then_reopen_uses_the_indexes(make_log, kafka_batch, reopen, monkeypatch):
    log = _build(make_log, kafka_batch)
    state, records = _segment_state(log), _records(log)
    targets = range(T0 - 200, T0 + 3200, 37)
    answers = [log.offset_for_timestamp(t) for t in targets]
    log.close()
    on_disk = _snapshot(log.directory)

    def no_recovery(self, *args):
        raise AssertionError(f"{self} was recovered after a clean shutdown")

    monkeypatch.setattr(LogSegment, "recover", no_recovery)
    again = reopen(log, clean_shutdown=True, recovery_point=log.log_end_offset)
    assert again.log_end_offset == log.log_end_offset
    assert again.recovery_point == log.log_end_offset
    assert _segment_state(again) == state
    assert _records(again) == records
    assert [again.offset_for_timestamp(t) for t in targets] == answers
    # Nothing was rewritten; only the active segment's indexes are preallocated again.
    active = again.segments()[-1]
    for name, data in on_disk.items():
        now = (log.directory / name).read_bytes()
        if name in (active.offset_index.path.name, active.time_index.path.name):
            entry_size = 8 if name.endswith(".index") else 12
            assert len(now) == 4096 // entry_size * entry_size
            assert now[: len(data)] == data and not any(now[len(data) :])
        else:
            assert now == data
    assert again.append(kafka_batch([(b"k", b"next")])).first_offset == log.log_end_offset


@pytest.mark.parametrize("from_segment", ["first", "active"])
def test_unclean_reopen_truncates_garbage_in_the_active_segment(
    make_log, kafka_batch, reopen, monkeypatch, tmp_path, from_segment
):
    log = _build(make_log, kafka_batch)
    batches, state = list(log.batches()), _segment_state(log)
    segments = log.segments()
    recovery_point = 0 if from_segment == "first" else segments[-1].base_offset
    crashed = _crash(log, tmp_path)
    active_path = crashed / segments[-1].log_path.name
    good = active_path.read_bytes()
    torn = bytearray(kafka_batch([(b"k", b"torn")] * 3))
    struct.pack_into(">q", torn, 0, log.log_end_offset)
    with active_path.open("ab") as f:
        f.write(bytes(torn[:-7]) + os.urandom(100))

    recovered = []
    real_recover = LogSegment.recover

    def counting_recover(self, *args):
        recovered.append(self.base_offset)
        return real_recover(self, *args)

    monkeypatch.setattr(LogSegment, "recover", counting_recover)
    again = reopen(log, crashed, recovery_point=recovery_point)
    expected = [s.base_offset for s in segments]
    assert recovered == (expected if from_segment == "first" else expected[-1:])
    assert again.log_end_offset == log.log_end_offset
    assert again.recovery_point == log.log_end_offset
    assert list(again.batches()) == batches
    assert _segment_state(again) == state
    assert active_path.read_bytes() == good
    for segment in again.segments()[:-1]:  # recovered or not, old indexes are trimmed
        assert segment.offset_index.path.stat().st_size == 8 * segment.offset_index.entries
        assert segment.time_index.path.stat().st_size == 12 * segment.time_index.entries
    assert again.append(kafka_batch([(b"k", b"next")])).first_offset == log.log_end_offset


@pytest.mark.parametrize("clean_shutdown", [False, True])
def test_a_crash_with_a_zero_filled_index_rebuilds_it(
    make_log, kafka_batch, reopen, tmp_path, clean_shutdown
):
    # Even when told the shutdown was clean, the index's sanity check sends it to recovery.
    log = _build(make_log, kafka_batch)
    batches, state = list(log.batches()), _segment_state(log)
    crashed = _crash(log, tmp_path)
    active = log.segments()[-1]
    # The active segment's indexes were left at their preallocated size, zeros at the end.
    index = (crashed / active.offset_index.path.name).read_bytes()
    assert len(index) == 4096 and index.endswith(bytes(8))
    again = reopen(log, crashed, recovery_point=log.log_end_offset, clean_shutdown=clean_shutdown)
    assert list(again.batches()) == batches
    assert _segment_state(again) == state
    assert again.offset_for_timestamp(-3) == log.offset_for_timestamp(-3)


def test_a_corrupt_middle_segment_deletes_the_later_ones(make_log, kafka_batch, reopen, tmp_path):
    log = _build(make_log, kafka_batch, batches=40)
    segments = log.segments()
    assert len(segments) >= 4
    middle = segments[1]
    bad_position, bad = list(middle.batches_from(0))[1]
    kept = [(b, d) for b, d in log.batches() if b < bad.base_offset]
    crashed = _crash(log, tmp_path)
    middle_path = crashed / middle.log_path.name
    later = [crashed / s.log_path.name for s in segments[2:]]
    assert all(path.exists() for path in later)
    data = bytearray(middle_path.read_bytes())
    data[bad_position + bad.size_in_bytes // 2] ^= 0xFF
    middle_path.write_bytes(data)

    again = reopen(log, crashed, recovery_point=0)
    assert [s.base_offset for s in again.segments()] == [0, middle.base_offset]
    assert again.log_end_offset == bad.base_offset
    assert list(again.batches()) == kept
    assert middle_path.stat().st_size == bad_position
    assert not any(path.exists() for path in later)
    assert again.append(kafka_batch([(b"k", b"next")])).first_offset == bad.base_offset


# -- truncation --------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["inside-a-segment", "segment-boundary", "log-start", "leo"])
def test_truncate_to_then_append_continues_there(make_log, kafka_batch, reopen, where):
    log = _build(make_log, kafka_batch)
    log.update_high_watermark(log.log_end_offset)
    segments = log.segments()
    offset = {
        "inside-a-segment": list(segments[2].batches_from(0))[1][1].base_offset,
        "segment-boundary": segments[2].base_offset,
        "log-start": 0,
        "leo": log.log_end_offset,
    }[where]
    kept = [(b, d) for b, d in log.batches() if b < offset]

    log.truncate_to(offset)
    assert log.log_end_offset == log.high_watermark == offset
    assert log.recovery_point <= offset
    assert list(log.batches()) == kept
    assert all(s.base_offset <= offset for s in log.segments())
    new = kafka_batch([(b"k", b"after truncation")] * 2)
    info = log.append(new)
    assert info.first_offset == offset
    assert _headers(log.read(offset, 1 << 20).records.read_bytes())[0].base_offset == offset

    log.close()
    assert list(log.directory.glob("*.deleted")) == []
    again = reopen(log, clean_shutdown=True)
    assert again.log_end_offset == offset + 2
    assert [b for b, _ in again.batches()] == [b for b, _ in kept] + [offset]
    assert list(again.batches())[:-1] == kept


def test_truncate_inside_a_batch_is_refused_and_changes_nothing(make_log, kafka_batch):
    log = make_log()
    log.append(kafka_batch([(b"k", b"v")] * 3))
    log.roll()
    log.append(kafka_batch([(b"k", b"w")]))
    before, batches = _snapshot(log.directory), list(log.batches())
    with pytest.raises(InvalidRecordError):
        log.truncate_to(1)
    assert _snapshot(log.directory) == before
    assert list(log.batches()) == batches
    assert [s.base_offset for s in log.segments()] == [0, 3]
    assert log.log_end_offset == 4
    assert _headers(log.read(3, 1000).records.read_bytes())[0].base_offset == 3


def test_truncate_below_the_log_start_is_refused(make_log, kafka_batch):
    log = make_log()
    _append_n(log, kafka_batch, 3)
    log.update_high_watermark(6)
    log.advance_log_start_offset(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_to(1)
    assert log.log_end_offset == 6


# -- leftovers of interrupted work -------------------------------------------------------


@pytest.mark.parametrize("old_renamed", [0, 1, 2])
def test_a_swap_segment_is_completed_at_open(make_log, kafka_batch, reopen, old_renamed):
    log = make_log(index_interval_bytes=0)
    for segment_batches in range(3):
        for _ in range(3 if segment_batches < 2 else 1):
            log.append(kafka_batch([(b"k", b"v")] * 2, timestamp_ms=T0))
        if segment_batches < 2:
            log.roll()
    assert [s.base_offset for s in log.segments()] == [0, 6, 12]
    batches = list(log.batches())
    log.close()

    # The cleaner's output for segments 0 and 6, offsets kept, some batches dropped...
    survivors = [batches[i] for i in (0, 2, 5)]
    cleaned = LogSegment(
        log.directory,
        0,
        index_interval_bytes=0,
        max_index_bytes=4096,
        active=True,
        created_ms=T0,
        suffix=".cleaned",
    )
    for base_offset, data in survivors:
        cleaned.append([data], [(base_offset, BatchHeader.parse(data))])
    cleaned.on_roll()
    cleaned.flush()
    # ...then Log.replace_segments' renames, interrupted: .cleaned -> .swap, some old -> .deleted.
    cleaned.rename_with_suffix(".swap")
    cleaned.close()
    for base in (0, 6)[:old_renamed]:
        for suffix in (".log", ".index", ".timeindex"):
            path = log.directory / f"{base:020d}{suffix}"
            path.rename(path.with_name(path.name + ".deleted"))

    again = reopen(log, recovery_point=0)
    assert [s.base_offset for s in again.segments()] == [0, 12]
    assert list(again.batches()) == survivors + batches[6:]
    assert sorted(p.name for p in _segment_files(log.directory)) == sorted(
        f"{base:020d}{suffix}" for base in (0, 12) for suffix in (".log", ".index", ".timeindex")
    )
    assert again.log_end_offset == 14
    assert _headers(again.read(2, 1000).records.read_bytes())[0].base_offset == 4  # a gap


def test_cleaned_deleted_and_orphan_files_are_removed_at_open(make_log, kafka_batch, reopen):
    log = make_log()
    _append_n(log, kafka_batch, 3)
    log.roll()
    _append_n(log, kafka_batch, 2)
    batches = list(log.batches())
    log.close()
    leftovers = [
        "00000000000000000000.log.cleaned",
        "00000000000000000000.index.cleaned",
        "00000000000000000000.timeindex.cleaned",
        "00000000000000000002.log.deleted",
        "00000000000000000002.index.deleted",
        "00000000000000000099.index",
        "00000000000000000099.timeindex",
    ]
    for name in leftovers:
        (log.directory / name).write_bytes(os.urandom(64))

    again = reopen(log, clean_shutdown=True)
    assert not any((log.directory / name).exists() for name in leftovers)
    assert list(again.batches()) == batches
    assert again.log_end_offset == 10


# -- disk failure ------------------------------------------------------------------------


def test_an_io_error_during_write_takes_the_log_offline(tmp_path, kafka_batch, disk):
    reported = []
    log = Log(
        tmp_path / "topic-0",
        TopicConfig(),
        on_io_error=lambda failed, error: reported.append((failed, error)),
        file_ops=disk,
    )
    log.append(kafka_batch([(b"k", b"v")] * 3))
    active = log.segments()[0]
    size = active.log_path.stat().st_size
    disk.fail("pwritev", errno.EIO, torn=True)  # part of the batch reaches the file
    with pytest.raises(KafkaStorageError) as raised:
        log.append(kafka_batch([(b"k", b"lost")]))
    assert raised.value.error_code is ErrorCode.kafka_storage_error
    assert isinstance(raised.value.__cause__, OSError)
    assert raised.value.__cause__.errno == errno.EIO
    assert log.offline
    assert reported == [(log, raised.value.__cause__)]
    assert active.log_path.stat().st_size == size == active.size
    assert log.log_end_offset == 3

    disk.heal()
    with pytest.raises(KafkaStorageError):
        log.read(0, 1000)
    with pytest.raises(KafkaStorageError):
        log.append(kafka_batch([(b"k", b"again")]))
    assert active.log_path.stat().st_size == size
    log.close()


def test_a_record_set_that_fills_the_index_midway_is_written_whole(tmp_path, kafka_batch):
    """One append of many batches may fill a tiny index: no entry is lost or duplicated."""
    config = TopicConfig(segment_index_bytes=16, index_interval_bytes=0)
    log = Log(tmp_path / "t-0", config)
    record_set = b"".join(kafka_batch([(b"k", b"v%d" % i)]) for i in range(6))
    info = log.append(record_set)
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert log.segments()[-1].indexes_full
    log.append(kafka_batch([(b"k", b"after")]))  # rolls: the full segment takes no more
    assert len(log.segments()) == 2
    log.close()
    reopened = Log(tmp_path / "t-0", config, clean_shutdown=False)
    assert [base for base, _ in reopened.batches()] == list(range(7))
    reopened.close()
