"""Storage's threads keep its lock discipline: no race with appends, no fsync under their lock."""

from __future__ import annotations

import contextlib
import errno
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from odradek.config.topic import TopicConfig
from odradek.errors import OdradekError, OffsetOutOfRangeError
from odradek.storage.batch import BatchHeader
from odradek.storage.cleaner import LogCleaner
from odradek.storage.files import CLEAN_SHUTDOWN_MARKER, SNAPSHOT_SUFFIX
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from support.faulty_disk import FaultyFileOps, FileCall
from support.waiting import wait_equal

STRESS_S = 3.0  # how long the appending thread races the upkeep thread
WAIT_S = 10.0  # the longest any step waits for another thread
TOPIC = "orders"
PARTITIONS = 3
NEW_LOG_FILES = sorted(f"{0:020d}{suffix}" for suffix in (".log", ".index", ".timeindex"))


class Recorder:
    """Every fsync through ``disk``: on which thread, and whether that thread held a log's lock."""

    def __init__(self, disk: FaultyFileOps) -> None:
        self.logs: list[Log] = []
        self.calls: list[tuple[str, str]] = []  # (thread name, path fsynced)
        self.under_lock: list[str] = []
        disk.before("fsync", self.fsync)

    def fsync(self, call: FileCall) -> None:
        self.calls.append((call.thread, call.path))
        held = [log.directory.name for log in list(self.logs) if log._lock._is_owned()]
        if held:
            self.under_lock.append(f"{call.thread} fsynced {call.path} holding the lock of {held}")


@pytest.fixture
def recorder(disk) -> Recorder:
    return Recorder(disk)


@pytest.fixture
def manager(tmp_path, disk) -> Iterator[Callable[..., LogManager]]:
    """``manager(config)``: a loaded LogManager whose files are on ``disk``."""
    opened: list[LogManager] = []

    def open_(config: TopicConfig) -> LogManager:
        manager = LogManager(
            [tmp_path / "disk-0"], topic_config=lambda topic: config, file_ops=disk
        )
        manager.load()
        opened.append(manager)
        return manager

    yield open_
    for each in opened:
        with contextlib.suppress(Exception):  # already shut down by the test
            each.shutdown()


def append(log: Log, kafka_batch, n: int, size: int = 60) -> int:
    """Append a batch of 1-3 records, committed; returns its base offset."""
    info = log.append(kafka_batch([(b"key-%d" % (n % 7), b"v" * size)] * (1 + n % 3)))
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def contiguous(log: Log) -> bool:
    """The log's batches run without a gap from its first segment to the log end offset."""
    batches = list(log.batches(log.segments()[0].base_offset))
    ends = [BatchHeader.parse(data).next_offset for _, data in batches]
    starts = [base for base, _ in batches]
    return starts[1:] == ends[:-1] and (not ends or ends[-1] == log.log_end_offset)


# -- the upkeep thread against the appending thread ---------------------------------------------


def test_upkeep_flushes_race_nothing_on_rolling_deleting_logs(manager, kafka_batch, recorder):
    """An upkeep thread flushing and enforcing retention as fast as it can, while the appending
    thread rolls tiny segments, truncates, deletes records and deletes whole partitions with
    file.delete.delay.ms=0: no exception anywhere, no log dir offline, every log whole."""
    config = TopicConfig(
        segment_bytes=700,  # a roll every few appends
        index_interval_bytes=0,  # an index entry for every batch
        segment_index_bytes=4096,
        flush_ms=0,  # every upkeep tick flushes everything
        retention_bytes=3000,
        file_delete_delay_ms=0,  # replaced files are closed at once
    )
    storage = manager(config)
    logs = [storage.get_or_create_log(TOPIC, p) for p in range(PARTITIONS)]
    recorder.logs += logs
    upkeep_errors: list[BaseException] = []
    ticks = 0
    stop = threading.Event()

    def upkeep() -> None:
        nonlocal ticks
        while not stop.is_set():
            try:
                storage.flush_due()
                storage.enforce_retention()
            except BaseException as e:  # anything at all is a failure of the discipline
                upkeep_errors.append(e)
                return
            ticks += 1

    thread = threading.Thread(target=upkeep, name="log-upkeep")
    thread.start()
    rng = random.Random(6)
    bases: list[list[int]] = [[] for _ in range(PARTITIONS)]  # batch boundaries, by partition
    n = 0
    deadline = time.monotonic() + STRESS_S
    try:
        while time.monotonic() < deadline and not upkeep_errors:
            n += 1
            p = rng.randrange(PARTITIONS)
            log = logs[p]
            bases[p].append(append(log, kafka_batch, n))
            roll = rng.random()
            # Below: what the broker's thread does besides appending. (It never reads segments
            # retention may have closed: a fetch relies on file.delete.delay.ms for that.)
            if roll < 0.05:  # a follower truncating, to a batch boundary above the log start
                boundaries = [b for b in bases[p] if b >= log.log_start_offset]
                target = rng.choice(boundaries)
                with contextlib.suppress(OffsetOutOfRangeError):  # retention moved the start
                    log.truncate_to(target)
                bases[p] = [b for b in bases[p] if b < target]
            elif roll < 0.08:  # DeleteRecords
                log.advance_log_start_offset(log.high_watermark)
                log.delete_old_segments()
            elif roll < 0.10:  # the partition is deleted and created again
                storage.delete_log(TOPIC, p)
                logs[p] = storage.get_or_create_log(TOPIC, p)
                recorder.logs.append(logs[p])
                bases[p] = []
    finally:
        stop.set()
        thread.join(WAIT_S)

    assert not thread.is_alive()
    assert upkeep_errors == []
    assert storage.offline_dirs == {}
    assert ticks > 100 and n > 300, f"too little happened: {ticks} ticks, {n} appends"
    for log in logs:
        assert not log.offline and contiguous(log)
    assert recorder.under_lock == []


# -- flushes ------------------------------------------------------------------------------------


class HeldFsync:
    """fsyncs on threads other than the test's wait until ``release`` (a slow disk)."""

    def __init__(self, disk: FaultyFileOps):
        self.waiting = threading.Event()
        self.release = threading.Event()
        self.main = threading.current_thread()
        disk.before("fsync", self.fsync)

    def fsync(self, call: FileCall) -> None:
        if threading.current_thread() is not self.main:
            self.waiting.set()
            assert self.release.wait(WAIT_S)


def test_a_truncation_during_a_flush_keeps_the_recovery_point_below_it(
    make_log, kafka_batch, disk, recorder
):
    log = make_log(file_ops=disk)
    recorder.logs.append(log)
    for _ in range(10):
        log.append(kafka_batch([(b"k", b"v")]))
    held = HeldFsync(disk)
    flusher = threading.Thread(target=log.flush, name="flusher")
    flusher.start()
    try:
        assert held.waiting.wait(WAIT_S)  # the flush took its target (10) and waits on the disk
        log.truncate_to(5)  # meanwhile the follower truncates and appends again past 10
        for _ in range(6):
            log.append(kafka_batch([(b"k", b"new")]))
    finally:
        held.release.set()
        flusher.join(WAIT_S)

    assert not flusher.is_alive()
    assert log.recovery_point <= 5, "data written after the truncation counted as flushed"
    log.flush()
    assert log.recovery_point == log.log_end_offset
    assert recorder.under_lock == []


def test_flush_messages_leaves_the_fsync_to_a_flush_thread(tmp_path, kafka_batch, disk, recorder):
    """The appending thread never fsyncs: the append says the flush is due, a flush thread does
    it, and appends made while it waits join the queued one."""
    storage = LogManager(
        [tmp_path / "disk-0"], topic_config=lambda t: TopicConfig(flush_messages=1), file_ops=disk
    )
    storage.load()
    try:
        log = storage.get_or_create_log(TOPIC, 0)
        recorder.logs.append(log)
        infos = [log.append_validated(log.validate(kafka_batch([(b"k", b"v")]))) for _ in range(3)]
        this_thread = threading.current_thread().name
        assert not [path for t, path in recorder.calls if t == this_thread or ".log" in path]
        assert log.recovery_point == 0
        assert all(info.flush_before_ack for info in infos)

        done = [log.flush_in_background() for _ in infos]
        for future in done:
            future.result(WAIT_S)
        assert log.recovery_point == log.log_end_offset == 3
        # The segments on a flush thread; the leader-epoch checkpoint (epoch 0 came with the
        # first batch) on the housekeeping thread; nothing on this one.
        segments = {thread for thread, path in recorder.calls if path.endswith(".log")}
        assert segments and all(t.startswith("odradek-flush") for t in segments)
        others = {t for t, _ in recorder.calls if not t.startswith("odradek-flush")}
        assert others <= {"odradek-housekeeping_0"}
        epoch_checkpoint = {str(log.directory), str(log.directory / "leader-epoch-checkpoint.tmp")}
        assert all(path in epoch_checkpoint for t, path in recorder.calls if t in others)
        assert recorder.under_lock == []
    finally:
        storage.shutdown()


# -- snapshots and deletions on the housekeeping thread -----------------------------------------


def hold(storage: LogManager) -> threading.Event:
    """Keep the housekeeping thread busy until the returned event is set."""
    release = threading.Event()
    storage.executors.housekeeping.submit(release.wait, WAIT_S)
    return release


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob(f"*{SNAPSHOT_SUFFIX}"))


def test_producer_snapshots_at_a_roll_are_written_off_the_appending_thread(
    manager, kafka_batch, disk
):
    storage = manager(TopicConfig(segment_bytes=500))
    log = storage.get_or_create_log(TOPIC, 0)
    writers: list[str] = []

    def recording_replace(call: FileCall) -> None:
        if call.target is not None and call.target.endswith(SNAPSHOT_SUFFIX):
            writers.append(call.thread)

    disk.before("replace", recording_replace)
    for n in range(20):
        append(log, kafka_batch, n)
    rolls = len(log.segments()) - 1
    assert rolls > 3
    wait_equal(lambda: len(writers), rolls, "the snapshot writers seen", WAIT_S, poll_s=0.01)

    assert threading.current_thread().name not in writers
    assert set(writers) <= {t.name for t in threading.enumerate()}


def test_a_late_snapshot_never_lands_above_a_truncation(manager, kafka_batch):
    storage = manager(TopicConfig(segment_bytes=10_000))
    log = storage.get_or_create_log(TOPIC, 0)

    def produce(sequence: int) -> None:
        log.append(
            kafka_batch([(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=sequence)
        )

    for sequence in range(3):
        produce(sequence)
    log.update_high_watermark(log.log_end_offset)
    release = hold(storage)
    log.roll()  # its snapshot, at offset 3, waits behind the held job
    for sequence in range(3, 6):
        produce(sequence)
    log.truncate_to(2)  # the follower truncates below the snapshot's offset
    release.set()
    storage.executors.housekeeping.submit(lambda: None).result(WAIT_S)

    assert [o for o in snapshot_offsets(log.directory) if o > 2] == []
    produce(2)  # the producer's state is that at offset 2: sequence 2 comes next
    assert log.log_end_offset == 3


def test_delete_log_returns_at_once_and_never_flushes(manager, kafka_batch, disk, recorder):
    """Closing the files and removing the directory run on the housekeeping thread; the
    partition's directory is gone from the listing at once, and it can be created again."""
    storage = manager(TopicConfig(segment_bytes=500, file_delete_delay_ms=0))
    log = storage.get_or_create_log(TOPIC, 0)
    recorder.logs.append(log)
    for n in range(30):
        append(log, kafka_batch, n)
    old_directory = log.directory
    removing, release = threading.Event(), threading.Event()
    removed_by: list[str] = []

    def slow_rmtree(call: FileCall) -> None:
        removed_by.append(call.thread)
        removing.set()
        assert release.wait(WAIT_S)  # a big partition on a slow disk

    disk.before("rmtree", slow_rmtree)
    # Writes the rolls queued (producer-state snapshots, which fsync their directory) finish
    # first: the housekeeping thread runs its tasks in order. Only what deleting does counts.
    log.executors.housekeeping.submit(lambda: None).result(WAIT_S)
    recorder.calls.clear()

    started = time.monotonic()
    done = storage.delete_log(TOPIC, 0)
    assert time.monotonic() - started < 1.0
    assert not old_directory.exists()
    again = storage.get_or_create_log(TOPIC, 0)
    assert again.directory == old_directory and again.log_end_offset == 0
    append(again, kafka_batch, 0)
    assert removing.wait(WAIT_S) and not done.done()
    release.set()
    done.result(WAIT_S)

    assert removed_by == ["odradek-housekeeping_0"]
    assert not [p for p in old_directory.parent.iterdir() if p.name.endswith("-delete")]
    # The only fsyncs: the new log's leader-epoch checkpoint, written at its first batch.
    epoch_checkpoint = {str(again.directory), str(again.directory / "leader-epoch-checkpoint.tmp")}
    assert {path for _, path in recorder.calls} <= epoch_checkpoint, "deleting it flushed it"
    assert storage.offline_dirs == {}


def test_a_snapshot_queued_for_a_deleted_partition_is_dropped(manager, kafka_batch):
    storage = manager(TopicConfig(segment_bytes=500))
    log = storage.get_or_create_log(TOPIC, 0)
    for n in range(30):
        append(log, kafka_batch, n)
    release = hold(storage)
    log.roll()  # its snapshot waits behind the held job
    done = storage.delete_log(TOPIC, 0)
    again = storage.get_or_create_log(TOPIC, 0)
    release.set()
    done.result(WAIT_S)

    assert snapshot_offsets(again.directory) == []
    assert sorted(p.name for p in again.directory.iterdir()) == NEW_LOG_FILES


def test_shutdown_finishes_queued_work_before_the_clean_shutdown_marker(manager, kafka_batch):
    storage = manager(TopicConfig(segment_bytes=500))
    log = storage.get_or_create_log(TOPIC, 0)
    doomed = storage.get_or_create_log(TOPIC, 1)
    for n in range(10):
        append(log, kafka_batch, n)
        append(doomed, kafka_batch, n)
    release = hold(storage)
    log.roll()
    snapshot_at = log.log_end_offset
    deleted: Future[None] = storage.delete_log(TOPIC, 1)
    stopping = threading.Thread(target=storage.shutdown)
    stopping.start()
    marker = storage.log_dirs[0] / CLEAN_SHUTDOWN_MARKER
    time.sleep(0.2)
    assert not marker.exists() and stopping.is_alive()

    release.set()
    stopping.join(WAIT_S)
    assert not stopping.is_alive()
    assert marker.exists()
    assert deleted.done() and deleted.exception() is None
    assert snapshot_at in snapshot_offsets(log.directory)
    assert not [p for p in storage.log_dirs[0].iterdir() if p.name.endswith("-delete")]


# -- the cleaner ---------------------------------------------------------------------------------


def compacted_log(storage: LogManager, kafka_batch, partition: int = 0) -> Log:
    log = storage.get_or_create_log(TOPIC, partition)
    for n in range(40):
        log.append(kafka_batch([(b"k%d" % (n % 5), b"%d" % n)]))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    return log


COMPACTED = TopicConfig(cleanup_policy="compact", segment_bytes=300, file_delete_delay_ms=0)


def test_an_io_error_while_cleaning_takes_the_directory_offline(manager, kafka_batch, disk):
    storage = manager(COMPACTED)
    log = compacted_log(storage, kafka_batch)
    disk.fail("pwritev", errno.EIO, path=lambda path: path.endswith(".cleaned"))
    assert storage.cleaner.clean(log) is None

    assert list(storage.offline_dirs) == [storage.log_dirs[0]]
    assert storage.offline_partitions() == [(TOPIC, 0)]
    assert not list(log.directory.glob("*.cleaned"))


def test_a_partition_deleted_under_the_cleaner_abandons_the_pass_quietly(
    manager, kafka_batch, monkeypatch
):
    storage = manager(COMPACTED)
    log = compacted_log(storage, kafka_batch)
    in_pass, resume = threading.Event(), threading.Event()
    clean_group = LogCleaner._clean_group

    def held_clean_group(self, *args):
        in_pass.set()
        assert resume.wait(WAIT_S)
        return clean_group(self, *args)

    monkeypatch.setattr(LogCleaner, "_clean_group", held_clean_group)
    outcome: dict[str, object] = {}

    def clean() -> None:
        try:
            outcome["stats"] = storage.cleaner.clean(log)
        except (OdradekError, OSError) as e:
            outcome["error"] = e

    thread = threading.Thread(target=clean, name="log-cleaner")
    thread.start()
    assert in_pass.wait(WAIT_S)
    storage.delete_log(TOPIC, 0)
    again = storage.get_or_create_log(TOPIC, 0)
    resume.set()
    thread.join(WAIT_S)

    assert not thread.is_alive()
    assert outcome == {"stats": None}
    assert storage.offline_dirs == {}
    assert sorted(p.name for p in again.directory.iterdir()) == NEW_LOG_FILES
