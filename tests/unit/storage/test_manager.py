"""The JBOD log manager places, reloads, checkpoints and cleans up logs, and isolates a bad disk."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.common.clock import ManualClock
from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode, KafkaStorageError, UnknownTopicOrPartitionError
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.files import (
    CLEAN_SHUTDOWN_MARKER,
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)
from odradek.storage.log import Log
from odradek.storage.manager import LogManager, ManagerIntervals
from odradek.storage.segment import LogSegment
from support.waiting import wait_until

T0_MS = 1_700_000_000_000
CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)


@pytest.fixture
def log_dirs(tmp_path: Path) -> list[Path]:
    """Three log directories, as if on three disks."""
    return [tmp_path / f"disk{n}" / "kafka-logs" for n in range(3)]


@pytest.fixture
def open_manager(log_dirs: list[Path]) -> Callable[..., LogManager]:
    """``open_manager(**kwargs)``: a loaded LogManager over ``log_dirs``; stopped at the end."""
    opened: list[LogManager] = []

    def open_(**kwargs: object) -> LogManager:
        manager = LogManager(log_dirs, **kwargs)
        manager.load()
        opened.append(manager)
        return manager

    yield open_
    for manager in opened:
        with contextlib.suppress(Exception):  # already shut down, or its disk was broken
            manager.shutdown()


def produce(log: Log, kafka_batch: Callable[..., bytes], count: int, **kwargs: object) -> None:
    """``count`` batches of two records, committed (the high watermark follows)."""
    for n in range(count):
        log.append(kafka_batch([(b"key-%d" % n, b"value-%d" % n), (None, b"x" * 40)], **kwargs))
    log.update_high_watermark(log.log_end_offset)


def checkpoint_lines(path: Path) -> tuple[list[str], set[str]]:
    """The header lines and the set of entry lines of a checkpoint file."""
    lines = path.read_text().split("\n")
    assert lines[-1] == "", "the file ends with a newline"
    return lines[:2], set(lines[2:-1])


# -- placement -------------------------------------------------------------------------------


def test_new_partitions_go_to_the_directory_holding_the_fewest(open_manager, log_dirs):
    manager = open_manager()
    for partition in range(7):
        log = manager.get_or_create_log("orders", partition)
        assert log.directory == manager.log_dir_of("orders", partition) / f"orders-{partition}"
        assert log.directory.is_dir()

    placed = [manager.log_dir_of("orders", p) for p in range(7)]
    assert placed == [log_dirs[p % 3] for p in range(7)]  # ties go to the first listed
    assert sorted(Counter(placed).values()) == [2, 2, 3]


def test_a_loaded_directory_gets_no_new_partitions_until_the_others_catch_up(
    open_manager, log_dirs
):
    first_disk_only = LogManager(log_dirs[:1])
    first_disk_only.load()
    for partition in range(3):
        first_disk_only.get_or_create_log("existing", partition)
    first_disk_only.shutdown()

    manager = open_manager()
    assert all(manager.log_dir_of("existing", p) == log_dirs[0] for p in range(3))
    for partition in range(6):
        manager.get_or_create_log("new", partition)

    placed = Counter(manager.log_dir_of("new", p) for p in range(6))
    assert placed == {log_dirs[1]: 3, log_dirs[2]: 3}
    manager.get_or_create_log("new", 6)  # three each now: the first listed
    assert manager.log_dir_of("new", 6) == log_dirs[0]


# -- shutdown, checkpoints and loading ---------------------------------------------------------


def test_load_after_shutdown_reopens_every_log_as_it_was(
    open_manager, log_dirs, kafka_batch, monkeypatch
):
    def topic_config(topic: str) -> TopicConfig:
        policy = "compact" if topic == "users" else "delete"
        return TopicConfig(cleanup_policy=policy, segment_bytes=1024, file_delete_delay_ms=0)

    manager = open_manager(topic_config=topic_config)
    for partition in range(4):
        produce(manager.get_or_create_log("orders", partition), kafka_batch, 10 + partition)
    orders_0 = manager.get_log("orders", 0)
    orders_0.advance_log_start_offset(orders_0.segments()[1].base_offset + 1)  # DeleteRecords
    assert manager.enforce_retention() == 1
    users = manager.get_or_create_log("users", 0)
    for n in range(20):
        users.append(kafka_batch([(b"user-%d" % (n % 4), b"%d" % n)]))
    users.roll()
    users.update_high_watermark(users.log_end_offset)
    assert manager.cleaner.clean(users) is not None
    # Its first group lost every record: an empty segment must keep the log start at 0.
    assert users.segments()[0].size == 0
    tps = [("orders", p) for p in range(4)] + [("users", 0)]
    before = {
        tp: (log.log_end_offset, log.log_start_offset, log.cleaner_checkpoint, list(log.batches()))
        for tp in tps
        for log in [manager.get_log(*tp)]
    }
    assert before[("orders", 0)][1] > 0 and before[("users", 0)][2] == 20

    manager.shutdown()

    for log_dir in log_dirs:
        assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
        on_this_dir = [tp for tp in tps if manager.log_dir_of(*tp) == log_dir]
        header, entries = checkpoint_lines(log_dir / RECOVERY_POINT_CHECKPOINT)
        assert header == ["0", str(len(on_this_dir))]
        assert entries == {f"{t} {p} {before[(t, p)][0]}" for t, p in on_this_dir}
        header, entries = checkpoint_lines(log_dir / LOG_START_OFFSET_CHECKPOINT)
        assert header == ["0", str(len(on_this_dir))]
        assert entries == {f"{t} {p} {before[(t, p)][1]}" for t, p in on_this_dir}
        header, entries = checkpoint_lines(log_dir / CLEANER_OFFSET_CHECKPOINT)
        assert header == ["0", str(len(entries))]
        assert entries == {f"{t} {p} 20" for t, p in on_this_dir if t == "users"}

    recovered: list[int] = []
    recover = LogSegment.recover
    monkeypatch.setattr(
        LogSegment,
        "recover",
        lambda self, *a: recovered.append(self.base_offset) or recover(self, *a),
    )
    reopened = open_manager(topic_config=topic_config)

    assert recovered == []  # a clean shutdown: nothing to re-validate
    for log_dir in log_dirs:
        assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    for tp in tps:
        log = reopened.get_log(*tp)
        after = (
            log.log_end_offset,
            log.log_start_offset,
            log.cleaner_checkpoint,
            list(log.batches()),
        )
        assert after == before[tp]
        assert reopened.log_dir_of(*tp) == manager.log_dir_of(*tp)


def test_recovery_after_a_crash_starts_at_the_checkpointed_recovery_point(
    open_manager, log_dirs, kafka_batch, monkeypatch
):
    config = TopicConfig(segment_bytes=1024)
    crashed = LogManager(log_dirs, topic_config=lambda topic: config)  # never shut down
    crashed.load()
    log = crashed.get_or_create_log("orders", 0)
    produce(log, kafka_batch, 40)
    bases = [segment.base_offset for segment in log.segments()]
    assert len(bases) >= 5
    log.flush(bases[2] + 1)  # on disk for sure: everything below an offset in the third segment
    crashed.write_checkpoints()
    expected = (log.log_end_offset, list(log.batches()))
    del crashed, log  # the process dies here: no shutdown, no clean shutdown marker

    recovered: list[int] = []
    recover = LogSegment.recover
    monkeypatch.setattr(
        LogSegment,
        "recover",
        lambda self, *a: recovered.append(self.base_offset) or recover(self, *a),
    )
    restarted = open_manager(topic_config=lambda topic: config)

    assert recovered == bases[2:]
    log = restarted.get_log("orders", 0)
    assert (log.log_end_offset, list(log.batches())) == expected
    assert log.recovery_point == log.log_end_offset


# -- failures ----------------------------------------------------------------------------------


def test_an_io_error_takes_its_directory_offline_and_only_that_one(
    open_manager, log_dirs, kafka_batch, disk, monkeypatch
):
    reports: list[tuple[Path, list[tuple[str, int]]]] = []
    manager = open_manager(on_dir_offline=lambda d, tps: reports.append((d, tps)), file_ops=disk)
    for partition in range(6):
        produce(manager.get_or_create_log("orders", partition), kafka_batch, 3)
    bad = log_dirs[1]
    doomed = [("orders", p) for p in range(6) if manager.log_dir_of("orders", p) == bad]
    healthy = [("orders", p) for p in range(6) if ("orders", p) not in doomed]
    doomed_logs = [manager.get_log(*tp) for tp in doomed]

    # The disk under ``bad`` fails: every write to a file on it gets EIO.
    disk.fail("pwritev", errno.EIO, path=lambda path: path.startswith(f"{bad.resolve()}{os.sep}"))
    active = doomed_logs[0].segments()[-1]
    size_before = os.path.getsize(active.log_path)

    with pytest.raises(KafkaStorageError) as raised:
        doomed_logs[0].append(kafka_batch([(b"k", b"v")]))

    assert raised.value.error_code is ErrorCode.kafka_storage_error
    assert os.path.getsize(active.log_path) == size_before, "half a batch was left behind"
    assert bad in manager.offline_dirs
    assert reports == [(bad, doomed)]
    assert manager.offline_partitions() == doomed
    for tp, log in zip(doomed, doomed_logs, strict=True):
        with pytest.raises(KafkaStorageError):
            manager.get_log(*tp)
        with pytest.raises(KafkaStorageError):
            log.read(0, 1 << 20)
        with pytest.raises(KafkaStorageError) as raised:
            log.append(kafka_batch([(b"k", b"v")]))
        assert raised.value.error_code is ErrorCode.kafka_storage_error
    assert len(reports) == 1, "the directory was reported offline more than once"

    for tp in healthy:
        log = manager.get_log(*tp)
        info = log.append(kafka_batch([(b"still", b"working")]))
        log.update_high_watermark(log.log_end_offset)
        assert log.read(info.first_offset, 1 << 20).records is not None
    for partition in range(6, 10):
        manager.get_or_create_log("orders", partition)
        assert manager.log_dir_of("orders", partition) != bad

    written: list[Path] = []
    write = OffsetCheckpointFile.write
    monkeypatch.setattr(
        OffsetCheckpointFile, "write", lambda self, e: written.append(self.path) or write(self, e)
    )
    manager.write_checkpoints()
    assert {path.parent for path in written} == {log_dirs[0], log_dirs[2]}
    manager.shutdown()
    assert [(d / CLEAN_SHUTDOWN_MARKER).exists() for d in log_dirs] == [True, False, True]


def test_a_directory_that_cannot_be_used_at_start_up_is_skipped(
    open_manager, log_dirs, kafka_batch, caplog
):
    manager = open_manager()
    for partition in range(3):
        produce(manager.get_or_create_log("orders", partition), kafka_batch, 5)
    offsets = {p: manager.get_log("orders", p).log_end_offset for p in range(3)}
    manager.shutdown()
    broken = log_dirs[2]
    shutil.rmtree(broken)
    broken.write_text("a file where a log directory used to be\n")
    caplog.set_level(logging.WARNING, logger="odradek.storage.manager")

    restarted = open_manager()

    assert list(restarted.offline_dirs) == [broken]
    assert any(
        record.levelno >= logging.WARNING and str(broken) in record.getMessage()
        for record in caplog.records
    )
    for partition in (0, 1):
        assert restarted.get_log("orders", partition).log_end_offset == offsets[partition]
    for partition in range(3, 7):
        restarted.get_or_create_log("orders", partition)
        assert restarted.log_dir_of("orders", partition) != broken


def test_delete_log_removes_the_partition_and_load_finishes_an_interrupted_one(
    open_manager, log_dirs, kafka_batch
):
    manager = open_manager()
    log = manager.get_or_create_log("orders", 0)
    produce(log, kafka_batch, 3)
    directory = log.directory

    manager.delete_log("orders", 0).result(timeout=10)

    assert not directory.exists()
    assert not [p for p in directory.parent.iterdir() if p.name.endswith("-delete")]
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.get_log("orders", 0)
    manager.shutdown()

    # A crash between the rename and the removal leaves this behind.
    leftover = log_dirs[1] / "orders-1.6d2f0c3b8e7a4d1f9c5b2a0e8d7c6b5a-delete"
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"\0" * 100)
    restarted = open_manager()

    assert not leftover.exists()
    assert restarted.logs() == []


def test_enforce_retention_deletes_expired_segments_of_every_log(
    open_manager, log_dirs, kafka_batch
):
    clock = ManualClock(now_ms=T0_MS)
    config = TopicConfig(retention_ms=60_000, segment_bytes=1024, file_delete_delay_ms=0)
    manager = open_manager(clock=clock, topic_config=lambda topic: config)
    expiring = manager.get_or_create_log("orders", 0)
    produce(expiring, kafka_batch, 30, timestamp_ms=T0_MS - 120_000)
    expiring.roll()
    produce(expiring, kafka_batch, 1, timestamp_ms=T0_MS)
    old = expiring.segments()[:-1]
    fresh = manager.get_or_create_log("orders", 1)
    produce(fresh, kafka_batch, 30, timestamp_ms=T0_MS - 1_000)
    fresh_segments = fresh.segments()
    assert len(old) >= 3 and len(fresh_segments) >= 3

    assert manager.enforce_retention() == len(old)

    assert expiring.log_start_offset == expiring.segments()[0].base_offset == old[-1].next_offset
    assert not any(segment.log_path.exists() for segment in old)
    assert fresh.segments() == fresh_segments


# -- the upkeep thread -------------------------------------------------------------------------


def test_the_upkeep_thread_flushes_deletes_and_checkpoints_then_stops_promptly(
    open_manager, kafka_batch
):
    config = TopicConfig(
        flush_ms=0, retention_ms=60_000, segment_bytes=1024, file_delete_delay_ms=0
    )
    intervals = ManagerIntervals(flush_check_ms=10, retention_check_ms=10, checkpoint_ms=10)
    manager = open_manager(topic_config=lambda topic: config, intervals=intervals)
    log = manager.get_or_create_log("orders", 0)
    an_hour_ago_ms = time.time_ns() // 1_000_000 - 3_600_000
    produce(log, kafka_batch, 30, timestamp_ms=an_hour_ago_ms)
    log.roll()
    produce(log, kafka_batch, 1)
    active_base = log.segments()[-1].base_offset
    checkpoint = manager.log_dir_of("orders", 0) / RECOVERY_POINT_CHECKPOINT
    assert log.recovery_point == 0

    manager.start()

    def upkept() -> bool:
        return (
            log.recovery_point == log.log_end_offset
            and log.log_start_offset == active_base
            and checkpoint.exists()
            and OffsetCheckpointFile(checkpoint).read() == {("orders", 0): log.log_end_offset}
        )

    wait_until(upkept, "the upkeep's flush and checkpoint", 10, poll_s=0.01)
    threads = {t.name: t for t in threading.enumerate()}
    assert {"log-upkeep", "log-cleaner"} <= set(threads)

    started = time.monotonic()
    manager.shutdown()

    assert time.monotonic() - started < 5
    assert not threads["log-upkeep"].is_alive() and not threads["log-cleaner"].is_alive()
    for name in CHECKPOINTS:
        assert (manager.log_dir_of("orders", 0) / name).exists()


def test_an_existing_replica_is_not_recreated_while_a_dir_is_offline(tmp_path):
    """A replica known to exist may sit on the offline disk: refuse, don't recreate it empty."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    dirs[1].parent.mkdir(parents=True, exist_ok=True)
    dirs[1].write_text("not a directory: the disk is gone")
    manager = LogManager(dirs)
    manager.load()
    assert dirs[1].absolute() in manager.offline_dirs
    with pytest.raises(KafkaStorageError):
        manager.get_or_create_log("orders", 0, is_new=False)
    assert manager.get_or_create_log("orders", 1).directory.parent == dirs[0].absolute()
    manager.shutdown()


def test_log_cleaner_enable_false_starts_no_cleaner(tmp_path):
    manager = LogManager([tmp_path / "disk-0"])
    manager.load()
    manager.start(cleaner=False)
    try:
        assert manager.cleaner._thread is None  # nothing compacts
    finally:
        manager.shutdown()
    enabled = LogManager([tmp_path / "disk-1"])
    enabled.load()
    enabled.start()
    try:
        assert enabled.cleaner._thread is not None and enabled.cleaner._thread.is_alive()
    finally:
        enabled.shutdown()


def test_shutdown_closes_logs_on_several_threads_and_reports_each_failure(
    open_manager, monkeypatch, caplog
):
    # Issue 26: 3,000 logs closed one after another were seconds of a controlled shutdown.
    manager = open_manager()
    for partition in range(12):
        manager.get_or_create_log("t", partition)
    threads: set[str] = set()
    both_closing = threading.Barrier(2, timeout=5)
    original = Log.close

    def close(self) -> None:
        threads.add(threading.current_thread().name)
        if self.directory.name in ("t-0", "t-1"):
            both_closing.wait()  # only returns if two closes run at once
        if self.directory.name == "t-5":
            raise OSError(errno.EIO, "injected")
        original(self)

    monkeypatch.setattr(Log, "close", close)
    with caplog.at_level(logging.ERROR, logger="odradek.storage.manager"):
        manager.shutdown()
    assert len(threads) > 1 and all(t.startswith("log-close") for t in threads)
    assert any("t-5" in r.getMessage() and "injected" in r.getMessage() for r in caplog.records)
    assert all((d / CLEAN_SHUTDOWN_MARKER).exists() for d in manager.log_dirs)
