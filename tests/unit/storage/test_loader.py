"""load_log reads a partition directory into a value (LoadedLogOffsets) with no Log built:
offsets clamped to what the disk holds, torn tails cut, leftovers settled, epochs found."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from odradek.config.topic import TopicConfig
from odradek.errors import KafkaStorageError
from odradek.storage.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    offset_file_name,
)
from odradek.storage.loader import LoadedLogOffsets, load_log

T0 = 1_700_000_000_000
# A batch's base_offset (int64) and partition_leader_epoch (int32, at byte 12) lie outside its
# CRC, so a test may set them as a log would when it appends.
_BASE_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")


def _batches(kafka_batch, epochs: list[int], records: int = 2) -> bytes:
    """One batch of ``records`` records per entry of ``epochs``, at consecutive offsets."""
    out = bytearray()
    for n, epoch in enumerate(epochs):
        batch = bytearray(
            kafka_batch([(b"k", b"v%d" % i) for i in range(records)], timestamp_ms=T0)
        )
        _BASE_OFFSET.pack_into(batch, 0, n * records)
        _EPOCH.pack_into(batch, 12, epoch)
        out += batch
    return bytes(out)


def _load(directory: Path, **kwargs) -> tuple[LoadedLogOffsets, list[OSError]]:
    reported: list[OSError] = []
    directory.mkdir(parents=True, exist_ok=True)
    loaded = load_log(
        directory, TopicConfig(), clock=lambda: T0, report_io_error=reported.append, **kwargs
    )
    return loaded, reported


def _close(loaded: LoadedLogOffsets) -> None:
    loaded.leader_epoch_cache.close()
    for segment in loaded.segments.segments:
        segment.close()


def test_an_empty_directory_is_an_empty_log_at_offset_zero(tmp_path):
    loaded, reported = _load(tmp_path / "orders-0", recovery_point=7, high_watermark=7)
    try:
        assert [s.base_offset for s in loaded.segments.segments] == [0]
        assert (loaded.log_start_offset, loaded.log_end_offset) == (0, 0)
        assert (loaded.recovery_point, loaded.high_watermark) == (0, 0)  # clamped to the LEO
        assert not loaded.recovered and loaded.leader_epoch_cache.entries() == ()
        assert not (tmp_path / "orders-0" / LEADER_EPOCH_CHECKPOINT).exists()
        assert reported == []
    finally:
        _close(loaded)


def test_batches_on_disk_give_the_offsets_and_the_epochs(tmp_path, kafka_batch):
    directory = tmp_path / "orders-0"
    directory.mkdir()
    (directory / offset_file_name(0, LOG_SUFFIX)).write_bytes(_batches(kafka_batch, [0, 0, 2]))
    loaded, reported = _load(directory, log_start_offset=3, high_watermark=100)
    try:
        assert loaded.log_end_offset == 6
        # Unclean (the default): everything from the recovery point was re-validated, and is
        # now durable, so the recovery point is the LEO.
        assert loaded.recovered and loaded.recovery_point == 6
        assert loaded.log_start_offset == 3
        assert loaded.high_watermark == 6  # clamped to the LEO
        # Rebuilt from the batch holding the log start offset on, and written at once.
        assert [(e.epoch, e.start_offset) for e in loaded.leader_epoch_cache.entries()] == [
            (0, 2),
            (2, 4),
        ]
        assert (directory / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 2\n2 4\n"
        assert reported == []
    finally:
        _close(loaded)


def test_without_a_checkpointed_high_watermark_it_starts_at_the_log_start(tmp_path, kafka_batch):
    directory = tmp_path / "orders-0"
    directory.mkdir()
    (directory / offset_file_name(0, LOG_SUFFIX)).write_bytes(_batches(kafka_batch, [0, 0]))
    loaded, _ = _load(directory, log_start_offset=2)
    try:
        assert (loaded.log_start_offset, loaded.high_watermark, loaded.log_end_offset) == (2, 2, 4)
    finally:
        _close(loaded)


def test_a_torn_tail_is_cut_at_the_last_whole_batch(tmp_path, kafka_batch):
    directory = tmp_path / "orders-0"
    directory.mkdir()
    whole = _batches(kafka_batch, [1, 1])
    (directory / offset_file_name(0, LOG_SUFFIX)).write_bytes(whole + whole[: len(whole) // 3])
    loaded, _ = _load(directory)
    try:
        assert loaded.log_end_offset == 4 and loaded.segments.active.size == len(whole)
        assert (directory / offset_file_name(0, LOG_SUFFIX)).stat().st_size == len(whole)
    finally:
        _close(loaded)


def test_leftovers_of_interrupted_work_are_removed(tmp_path, kafka_batch):
    directory = tmp_path / "orders-0"
    directory.mkdir()
    (directory / offset_file_name(0, LOG_SUFFIX)).write_bytes(_batches(kafka_batch, [0]))
    leftovers = [
        offset_file_name(0, LOG_SUFFIX) + DELETED_SUFFIX,
        offset_file_name(0, INDEX_SUFFIX) + CLEANED_SUFFIX,
        offset_file_name(40, TIME_INDEX_SUFFIX),  # an index without its .log
    ]
    for name in leftovers:
        (directory / name).write_bytes(b"")
    loaded, _ = _load(directory)
    try:
        assert not [name for name in leftovers if (directory / name).exists()]
        assert [s.base_offset for s in loaded.segments.segments] == [0]
    finally:
        _close(loaded)


def test_an_io_error_while_making_the_recovery_durable_is_reported_and_raised(
    tmp_path, kafka_batch, disk
):
    directory = tmp_path / "orders-0"
    directory.mkdir()
    (directory / offset_file_name(0, LOG_SUFFIX)).write_bytes(_batches(kafka_batch, [0]))
    disk.fail("fsync", errno.EIO)
    with pytest.raises(KafkaStorageError, match=f"I/O error in {directory}") as raised:
        _load(directory, file_ops=disk)
    assert isinstance(raised.value.__cause__, OSError)
