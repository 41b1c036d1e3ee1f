"""A segment stores client batches byte for byte, reads whole batches, indexes, recovers."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

import odradek.storage.segment as segment_module
from odradek.errors import InvalidRecordError
from odradek.storage.batch import BatchHeader, iter_batches, set_base_offset
from odradek.storage.segment import FileSlice, LogSegment

T0 = 1_700_000_000_000


def _segment(directory: Path, base_offset: int = 0, **kwargs) -> LogSegment:
    options = {"index_interval_bytes": 4096, "max_index_bytes": 1024, "active": True}
    options.update(kwargs)
    return LogSegment(directory, base_offset, created_ms=T0, **options)


def _append(segment: LogSegment, produced: bytes) -> tuple[int, bytes]:
    """Assign the next offsets to a produced batch as the log does; returns (position, bytes)."""
    stored = bytearray(produced)
    base_offset = segment.next_offset
    set_base_offset(stored, 0, base_offset)
    position = segment.size
    segment.append([bytes(stored)], [(base_offset, BatchHeader.parse(stored))])
    return position, bytes(stored)


def _fill(segment: LogSegment, kafka_batch, sizes) -> list[tuple[int, BatchHeader, bytes]]:
    """One batch per size: ``size`` records of growing values; returns (position, header, bytes)."""
    written = []
    for n, size in enumerate(sizes):
        records = [(b"key-%d" % i, b"v" * (n * 7 % 50 + i)) for i in range(size)]
        position, data = _append(segment, kafka_batch(records, timestamp_ms=T0 + n))
        written.append((position, BatchHeader.parse(data), data))
    return written


def _index_entries(segment: LogSegment) -> tuple[list, list]:
    def entries(index):
        data = index.path.read_bytes()[: index.size_in_bytes]
        return list(struct.iter_unpack(index.entry.format, data))

    return entries(segment.offset_index), entries(segment.time_index)


def _whole_batches(data: bytes) -> list[BatchHeader]:
    """Every batch of ``data``; iter_batches raises unless it is whole, valid batches only."""
    return [header for _, header in iter_batches(data)]


def _state(segment: LogSegment) -> tuple:
    return (
        segment.size,
        segment.next_offset,
        segment.max_timestamp,
        segment.offset_of_max_timestamp,
        segment.first_batch_timestamp,
    )


@pytest.fixture
def segment(tmp_path):
    opened = _segment(tmp_path, base_offset=100, index_interval_bytes=200)
    yield opened
    if not opened.file.closed:
        opened.close()


# -- append, read, translate -------------------------------------------------------------


def test_append_and_read_back(segment, kafka_batch):
    written = _fill(segment, kafka_batch, [1, 3, 2, 5])
    assert segment.next_offset == 111
    assert segment.size == sum(len(data) for _, _, data in written)
    assert segment.log_path.read_bytes() == b"".join(data for _, _, data in written)
    assert [h.base_offset for _, h, _ in written] == [100, 101, 104, 106]

    records = segment.read(100, 1 << 20, segment.size, min_one_batch=False)
    assert records.position == 0
    assert records.read_bytes() == segment.log_path.read_bytes()
    assert [(r.offset, r.key) for r in DefaultRecordBatch(written[1][2])] == [
        (101, b"key-0"),
        (102, b"key-1"),
        (103, b"key-2"),
    ]


def test_translate_offset(segment, kafka_batch):
    written = _fill(segment, kafka_batch, [1, 3, 2, 5, 1, 4] * 3)
    for position, header, _ in written:
        for offset in range(header.base_offset, header.next_offset):
            found_position, found = segment.translate_offset(offset)
            assert (found_position, found.base_offset) == (position, header.base_offset)
    assert segment.translate_offset(0)[0] == 0  # below the base: the first batch
    assert segment.translate_offset(segment.next_offset) is None
    # A starting position past the index hint is honoured.
    last_position, last, _ = written[-1]
    assert segment.translate_offset(100, start_position=last_position) == (last_position, last)


def test_read_from_the_middle_of_a_batch_starts_at_that_batch(segment, kafka_batch):
    written = _fill(segment, kafka_batch, [3, 3, 3])
    records = segment.read(105, 1 << 20, segment.size, min_one_batch=False)
    assert records.position == written[1][0]
    assert [h.base_offset for h in _whole_batches(records.read_bytes())] == [103, 106]
    assert segment.read(109, 1 << 20, segment.size, min_one_batch=True) is None


@pytest.mark.parametrize("index_interval_bytes", [0, 150, 4096])
def test_read_with_max_bytes_returns_as_many_whole_batches_as_fit(
    tmp_path, kafka_batch, index_interval_bytes
):
    segment = _segment(tmp_path, 0, index_interval_bytes=index_interval_bytes)
    written = _fill(segment, kafka_batch, [1, 4, 2, 7, 1, 1, 3, 9, 2, 1, 5, 2])
    sizes = [len(data) for _, _, data in written]
    for first, (_, header, _) in enumerate(written):
        for max_bytes in range(0, sum(sizes[first:]) + 20, 37):
            records = segment.read(header.base_offset, max_bytes, segment.size, False)
            fitting, total = 0, 0
            while first + fitting < len(sizes) and total + sizes[first + fitting] <= max_bytes:
                total += sizes[first + fitting]
                fitting += 1
            if fitting == 0:
                assert records is None
                continue
            assert records.position == written[first][0]
            assert records.size == total <= max_bytes
            headers = _whole_batches(records.read_bytes())
            assert [h.base_offset for h in headers] == [
                h.base_offset for _, h, _ in written[first : first + fitting]
            ]
    segment.close()


def test_min_one_batch_returns_an_oversized_first_batch_whole(segment, kafka_batch):
    written = _fill(segment, kafka_batch, [1, 40, 1])
    big_position, big, big_bytes = written[1]
    assert segment.read(big.base_offset, 100, segment.size, min_one_batch=False) is None
    records = segment.read(big.base_offset + 3, 100, segment.size, min_one_batch=True)
    assert (records.position, records.size) == (big_position, len(big_bytes))
    assert records.read_bytes() == big_bytes
    # Not when the batch ends past max_position (above the high watermark).
    assert segment.read(big.base_offset, 100, big_position + 10, min_one_batch=True) is None


def test_max_position_bounds_a_read(segment, kafka_batch):
    written = _fill(segment, kafka_batch, [2, 3, 1, 4, 2])
    for cut, (stop, _, _) in enumerate(written):
        records = segment.read(100, 1 << 20, stop, min_one_batch=True)
        if cut == 0:
            assert records is None
            continue
        assert (records.position, records.size) == (0, stop)
        assert len(_whole_batches(records.read_bytes())) == cut
    third = written[2][0]
    assert segment.read(written[2][1].base_offset, 1 << 20, third, True) is None


def test_file_slice_reads_exactly_the_stored_bytes(segment, kafka_batch):
    written = _fill(segment, kafka_batch, [2, 2, 2])
    position, _, data = written[1]
    records = segment.read(written[1][1].base_offset, len(data), segment.size, False)
    header = written[1][1]
    assert records == FileSlice(segment.file, position, len(data), header.next_offset)
    assert records.read_bytes() == data
    assert os.pread(segment.fd, records.size, records.position) == data


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_stored_bytes_are_the_produced_bytes_still_compressed(segment, kafka_batch, codec):
    values = [(b"key-%d" % i, b"odradek " * 40 + b"%d" % i) for i in range(30)]
    headers = [("trace", b"abc")]
    produced = kafka_batch(values, codec=codec, timestamp_ms=T0, headers=headers)
    _append(segment, kafka_batch([(b"k", b"first")]))  # so the batch gets a non-zero offset
    position, _ = _append(segment, produced)
    stored = segment.read(101, 1 << 20, segment.size, False).read_bytes()

    assert len(stored) == len(produced)
    changed = [i for i in range(len(stored)) if stored[i] != produced[i]]
    assert changed and all(i < 8 for i in changed)  # only the base offset
    assert stored[12:16] == produced[12:16]  # the partition leader epoch as produced
    assert struct.unpack_from(">q", stored)[0] == 101

    batch = DefaultRecordBatch(stored)
    assert batch.validate_crc()
    assert batch.compression_type == codec
    if codec:
        uncompressed = kafka_batch(values, timestamp_ms=T0, headers=headers)
        assert len(stored) < len(uncompressed) // 3
        assert b"odradek odradek" not in stored
    assert [(r.offset, r.key, r.value, r.headers) for r in batch] == [
        (101 + i, key, value, headers) for i, (key, value) in enumerate(values)
    ]


# -- indexes -----------------------------------------------------------------------------


@pytest.mark.parametrize("index_interval_bytes", [0, 100, 300, 1000])
def test_index_entries_every_index_interval_bytes(tmp_path, kafka_batch, index_interval_bytes):
    segment = _segment(tmp_path, 50, index_interval_bytes=index_interval_bytes)
    written = _fill(segment, kafka_batch, [1, 2, 5, 1, 1, 3, 8, 1, 2, 2, 6, 1, 1, 4])
    expected, since = [], 0
    for position, header, data in written:
        if since > index_interval_bytes:
            expected.append((header.last_offset - 50, position))
            since = 0
        since += len(data)
    offset_entries, time_entries = _index_entries(segment)
    assert offset_entries == expected
    assert all(position > 0 for _, position in offset_entries)
    # Timestamps grow by one a batch here, so every offset entry has its time entry.
    assert len(time_entries) == len(offset_entries)
    for position, header, _ in written:
        # A lookup never starts more than index.interval.bytes before the batch.
        assert position - segment.offset_index.lookup(header.last_offset)[1] <= (
            index_interval_bytes
        )
    segment.close()


def test_time_index_entries_and_max_timestamp(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 0, index_interval_bytes=0)
    timestamps = [T0 + 5, T0 + 1, T0 + 9, T0 + 9, T0 + 3, T0 + 12, T0 + 2]
    for timestamp in timestamps:
        _append(segment, kafka_batch([(b"k", b"v"), (b"k", b"w")], timestamp_ms=timestamp))
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (T0 + 12, 11)
    assert segment.first_batch_timestamp == T0 + 5
    # At each offset entry, the max timestamp so far and the batch that first reached it,
    # recorded only when it grew.
    assert _index_entries(segment)[1] == [(T0 + 5, 1), (T0 + 9, 5), (T0 + 12, 11)]
    segment.close()


def test_on_roll_trims_the_indexes_and_records_the_max_timestamp(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 0, index_interval_bytes=500, max_index_bytes=1200)
    _fill(segment, kafka_batch, [3] * 20)
    assert segment.offset_index.path.stat().st_size == 1200
    assert segment.time_index.path.stat().st_size == 1200
    offsets_before, times_before = _index_entries(segment)
    segment.on_roll()
    assert segment.offset_index.path.stat().st_size == 8 * len(offsets_before)
    offsets_after, times_after = _index_entries(segment)
    assert offsets_after == offsets_before
    assert times_after == times_before + [(segment.max_timestamp, 59)]
    assert segment.time_index.path.stat().st_size == 12 * len(times_after)
    segment.close()


# -- recovery ----------------------------------------------------------------------------


def test_recover_of_a_valid_file_rebuilds_identical_indexes(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 10, index_interval_bytes=250)
    written = _fill(segment, kafka_batch, [1, 3, 2, 9, 1, 1, 4, 2, 2, 7, 1, 5])
    state = _state(segment)
    segment.close()  # a clean close trims the indexes and adds the final time entry
    entries = _index_entries(segment)
    assert len(entries[0]) >= 3

    # Reopened as after a crash: preallocated indexes, everything rebuilt from the log.
    reopened = _segment(tmp_path, 10, index_interval_bytes=250)
    assert reopened.recover() == 0
    assert _state(reopened) == state
    assert _index_entries(reopened) == entries
    assert reopened.offset_index.path.stat().st_size == 8 * len(entries[0])
    assert reopened.time_index.path.stat().st_size == 12 * len(entries[1])
    for position, header, _ in written:
        assert reopened.translate_offset(header.last_offset)[0] == position
    reopened.close()


def _flip_crc_covered_byte(batch: bytes) -> bytes:
    damaged = bytearray(batch)
    damaged[-1] ^= 0x40
    return bytes(damaged)


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(lambda batch: batch[: len(batch) // 2], id="partial-batch"),
        pytest.param(lambda batch: batch[:20], id="partial-header"),
        pytest.param(lambda batch: os.urandom(300), id="garbage"),
        pytest.param(lambda batch: bytes(400), id="zeros"),
        pytest.param(_flip_crc_covered_byte, id="flipped-crc-byte"),
        pytest.param(lambda batch: batch[:8] + b"\x00\x10\x00\x00" + batch[12:], id="huge-length"),
        pytest.param(
            lambda batch: batch[:8] + b"\x7f\xff\xff\xff" + batch[12:], id="int32-max-length"
        ),
    ],
)
def test_recover_truncates_a_torn_tail(tmp_path, kafka_batch, tail):
    segment = _segment(tmp_path, 0, index_interval_bytes=100)
    written = _fill(segment, kafka_batch, [2, 5, 1, 3, 2])
    good = segment.log_path.read_bytes()
    state = _state(segment)
    entries = _index_entries(segment)[0]
    # The next batch, with its proper offsets, torn on its way to disk.
    torn = bytearray(kafka_batch([(b"k", b"x" * 60)] * 4, timestamp_ms=T0 + 99))
    set_base_offset(torn, 0, segment.next_offset)
    damaged = tail(bytes(torn))
    with segment.log_path.open("ab") as f:
        f.write(damaged)

    assert segment.recover() == len(damaged)
    assert segment.log_path.read_bytes() == good
    assert _state(segment) == state
    assert _index_entries(segment)[0] == entries
    assert [h for _, h in segment.batches_from(0)] == [h for _, h, _ in written]
    position, _ = _append(segment, kafka_batch([(b"k", b"after")]))
    assert position == len(good)
    assert segment.translate_offset(state[1])[0] == len(good)
    segment.close()


def test_recover_drops_batches_whose_offsets_go_back(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 0)
    _fill(segment, kafka_batch, [3, 3])
    good_size = segment.size
    replayed = kafka_batch([(b"k", b"again")])  # base offset 0 again: out of order
    with segment.log_path.open("ab") as f:
        f.write(replayed)
    assert segment.recover() == len(replayed)
    assert segment.size == good_size
    assert segment.next_offset == 6
    segment.close()


def test_recover_cuts_at_the_first_bad_batch_even_if_later_ones_are_valid(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 0)
    written = _fill(segment, kafka_batch, [1, 1, 1, 1])
    data = bytearray(segment.log_path.read_bytes())
    second = written[1][0]
    data[second + 30] ^= 0xFF
    segment.log_path.write_bytes(data)
    assert segment.recover() == len(data) - second
    assert segment.size == second
    assert segment.next_offset == 1
    segment.close()


def test_recover_keeps_a_whole_batch_whatever_its_size(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 0)
    written = _fill(segment, kafka_batch, [1, 200, 1])
    assert written[1][1].size_in_bytes > 3 * written[0][1].size_in_bytes
    assert segment.recover() == 0
    assert segment.next_offset == 202
    segment.close()


def test_recover_checksums_in_bounded_reads(tmp_path, kafka_batch, monkeypatch):
    """A batch larger than the read size is checked piece by piece, never read whole."""
    segment = _segment(tmp_path, 0)
    big = kafka_batch([(b"k", os.urandom(3 * segment_module.RECOVERY_READ_BYTES))])
    _append(segment, big)
    _fill(segment, kafka_batch, [2])
    sizes: list[int] = []
    real_pread = os.pread

    def recording_pread(fd: int, size: int, position: int) -> bytes:
        sizes.append(size)
        return real_pread(fd, size, position)

    monkeypatch.setattr(segment_module.os, "pread", recording_pread)
    assert segment.recover() == 0
    assert segment.next_offset == 3
    assert max(sizes) == segment_module.RECOVERY_READ_BYTES
    segment.close()


# -- truncation --------------------------------------------------------------------------


def test_truncate_to_removes_batches_and_index_entries(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 0, index_interval_bytes=0)
    written = _fill(segment, kafka_batch, [2, 3, 1, 4, 2, 2])
    fourth_position, fourth, _ = written[3]
    assert segment.truncate_to(fourth.base_offset) == sum(len(d) for _, _, d in written[3:])
    assert segment.size == fourth_position
    assert segment.log_path.stat().st_size == fourth_position
    assert segment.next_offset == fourth.base_offset
    assert segment.max_timestamp == written[2][1].max_timestamp
    offsets, times = _index_entries(segment)
    assert all(relative < fourth.base_offset for relative, _ in offsets)
    assert all(relative < fourth.base_offset for _, relative in times)
    assert segment.translate_offset(fourth.base_offset) is None

    position, again = _append(segment, kafka_batch([(b"k", b"again")] * 2))
    assert position == fourth_position
    assert BatchHeader.parse(again).base_offset == fourth.base_offset
    assert segment.translate_offset(fourth.base_offset)[0] == fourth_position
    segment.close()


def test_truncate_to_reports_bytes_removed(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 0)
    written = _fill(segment, kafka_batch, [2, 3, 1])
    size = segment.size
    assert segment.truncate_to(100) == 0  # nothing at or above
    assert segment.truncate_to(written[1][1].base_offset) == size - written[1][0]
    assert segment.truncate_to(0) == written[1][0]
    assert (segment.size, segment.next_offset, segment.max_timestamp) == (0, 0, -1)
    segment.close()


def test_truncate_inside_a_batch_is_refused(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 0)
    _fill(segment, kafka_batch, [3, 3])
    size = segment.size
    with pytest.raises(InvalidRecordError):
        segment.truncate_to(4)
    assert (segment.size, segment.next_offset) == (size, 6)
    segment.close()


def test_close_then_load_from_indexes_restores_the_state(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 7, index_interval_bytes=120)
    _fill(segment, kafka_batch, [2, 1, 4, 1, 3, 2, 5])
    state = _state(segment)
    segment.close()
    reopened = _segment(tmp_path, 7, index_interval_bytes=120, active=False)
    reopened.load_from_indexes()
    assert _state(reopened) == state
    assert reopened.bytes_since_last_index_entry == segment.bytes_since_last_index_entry
    reopened.close()


def test_rename_keeps_handles_and_delete_removes_files(tmp_path, kafka_batch):
    segment = _segment(tmp_path, 0)
    _fill(segment, kafka_batch, [1, 2])
    records = segment.read(0, 1 << 20, segment.size, False)
    data = records.read_bytes()
    segment.rename_with_suffix(".deleted")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000000.index.deleted",
        "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted",
    ]
    assert records.read_bytes() == data
    segment.delete()
    assert list(tmp_path.iterdir()) == []


def test_a_slice_knows_the_offset_after_its_last_batch(segment, kafka_batch):
    """What a fetch counts as sent, and where the next read starts: whole batches only."""
    written = _fill(segment, kafka_batch, [3, 3, 3, 3])
    for count in range(1, 5):
        budget = sum(len(data) for _, _, data in written[:count])
        records = segment.read(written[0][1].base_offset, budget, segment.size, False)
        assert records.next_offset == written[count - 1][1].next_offset
    partial = segment.read(written[0][1].base_offset, len(written[0][2]) + 5, segment.size, False)
    assert partial.next_offset == written[1][1].base_offset
