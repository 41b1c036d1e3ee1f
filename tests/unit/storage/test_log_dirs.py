"""The log manager describes its log dirs (sizes, lags, offline dirs) and moves a replica's log
between them through a future log (KIP-113), also across a restart in the middle."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.errors import KafkaStorageError, LogDirNotFoundError, UnknownTopicOrPartitionError
from odradek.storage import files, log_dir_move
from odradek.storage.log import Log
from odradek.storage.manager import LogManager, ManagerIntervals


@pytest.fixture
def log_dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / f"disk-{n}" for n in range(2)]


@pytest.fixture
def open_manager(log_dirs: list[Path]) -> Callable[..., LogManager]:
    opened: list[LogManager] = []

    def open_(**kwargs: object) -> LogManager:
        manager = LogManager(log_dirs, **kwargs)
        manager.load()
        opened.append(manager)
        return manager

    yield open_
    for manager in opened:
        with contextlib.suppress(Exception):
            manager.shutdown()


def produce(log: Log, kafka_batch: Callable[..., bytes], count: int) -> None:
    for n in range(count):
        log.append(kafka_batch([(b"key-%d" % n, b"value-%d" % n), (None, b"x" * 40)]))
    log.update_high_watermark(log.log_end_offset)


def test_describe_lists_every_dir_with_its_logs_sizes_and_no_lag(
    open_manager, log_dirs, kafka_batch
):
    manager = open_manager()
    for partition in range(3):
        produce(manager.get_or_create_log("orders", partition), kafka_batch, partition + 1)

    described = manager.describe_log_dirs()

    assert [d.path for d in described] == [d.absolute() for d in log_dirs]
    assert all(d.offline_reason is None for d in described)
    found = {
        (r.topic, r.partition): (d.path, r.size_bytes, r.offset_lag, r.is_future)
        for d in described
        for r in d.replicas
    }
    assert set(found) == {("orders", p) for p in range(3)}
    for partition in range(3):
        log = manager.get_log("orders", partition)
        path, size, lag, is_future = found[("orders", partition)]
        assert path == manager.log_dir_of("orders", partition)
        assert size == log.size_in_bytes > 0
        assert sum(f.stat().st_size for f in log.directory.glob("*.log")) == size
        assert (lag, is_future) == (0, False)


def test_describe_keeps_only_the_wanted_partitions(open_manager, kafka_batch):
    manager = open_manager()
    for partition in range(4):
        manager.get_or_create_log("orders", partition)
    manager.get_or_create_log("other", 0)

    described = manager.describe_log_dirs(lambda tp: tp in {("orders", 1), ("other", 0)})

    assert sorted((r.topic, r.partition) for d in described for r in d.replicas) == [
        ("orders", 1),
        ("other", 0),
    ]


def test_an_offline_dir_is_described_with_its_reason_and_no_logs(open_manager, log_dirs):
    manager = open_manager()
    for partition in range(4):
        manager.get_or_create_log("orders", partition)
    manager._mark_offline(manager.log_dirs[1], "injected: the disk is gone")

    healthy, offline = manager.describe_log_dirs()

    assert offline.offline_reason == "injected: the disk is gone" and offline.replicas == ()
    assert healthy.offline_reason is None and len(healthy.replicas) == 2


# -- moves between log dirs ------------------------------------------------------------------


def copy_all(current: Log, future: Log) -> None:
    """What the broker's mover does, on one thread: align, then copy until equal."""
    for _ in range(1000):
        log_dir_move.align(current, future)
        info = current.read(future.log_end_offset, 4096)
        if info.records is None:
            return
        log_dir_move.copy_slice(future, info.records)
    raise AssertionError("the copy did not end")


def batches(log: Log) -> list[tuple[int, bytes]]:
    return list(log.batches(log.log_start_offset))


def other_dir(manager: LogManager, topic: str, partition: int) -> Path:
    return next(d for d in manager.log_dirs if d != manager.log_dir_of(topic, partition))


def test_a_move_copies_the_log_then_the_future_log_replaces_it(open_manager, kafka_batch):
    manager = open_manager(intervals=ManagerIntervals(flush_check_ms=10))
    current = manager.get_or_create_log("orders", 0)
    produce(current, kafka_batch, 20)
    current.assign_epoch_start_offset(3, current.log_end_offset)
    source_dir, target_dir = manager.log_dir_of("orders", 0), other_dir(manager, "orders", 0)

    future = manager.create_future_log("orders", 0, target_dir)
    assert future is not None and future.directory.parent == target_dir
    assert files.parse_future_directory_name(future.directory.name) == ("orders", 0)
    assert manager.create_future_log("orders", 0, target_dir) is future
    copy_all(current, future)
    [lagging] = [r for d in manager.describe_log_dirs() for r in d.replicas if r.is_future]
    assert lagging.offset_lag == 0 and lagging.size_bytes == current.size_in_bytes
    log_dir_move.adopt_offsets(current, future)
    expected = batches(current)

    replaced = manager.replace_current_with_future("orders", 0)

    assert replaced is future and manager.get_log("orders", 0) is future
    assert manager.log_dir_of("orders", 0) == target_dir
    assert future.directory == target_dir / "orders-0"
    assert batches(future) == expected
    assert future.high_watermark == current.high_watermark
    assert future.latest_epoch == 3
    assert [p.name for p in source_dir.iterdir() if p.name.startswith("orders-0")] == [
        current.directory.name
    ] and current.directory.name.endswith("-delete")
    # The moved log keeps working where it now is: appends, rolls, reads.
    produce(future, kafka_batch, 3)
    future.roll()
    assert future.read(0, 1 << 20).records is not None
    manager.remove_replaced_logs(force=True)
    assert not any(p.name.startswith("orders-0") for p in source_dir.iterdir())


def test_the_future_log_drops_what_the_current_log_truncated(open_manager, kafka_batch):
    manager = open_manager()
    current = manager.get_or_create_log("orders", 0)
    produce(current, kafka_batch, 10)
    future = manager.create_future_log("orders", 0, other_dir(manager, "orders", 0))
    copy_all(current, future)
    current.truncate_to(6)
    produce(current, kafka_batch, 2)  # new batches where the old ones were

    copy_all(current, future)

    assert batches(future) == batches(current)
    current.truncate_fully_and_start_at(40)
    produce(current, kafka_batch, 2)
    copy_all(current, future)
    assert future.log_start_offset == 40 and batches(future) == batches(current)


def test_a_restart_resumes_a_future_log_and_completes_an_interrupted_swap(
    open_manager, log_dirs, kafka_batch
):
    manager = open_manager()
    for partition in range(2):
        produce(manager.get_or_create_log("orders", partition), kafka_batch, 5)
    half = manager.create_future_log("orders", 0, other_dir(manager, "orders", 0))
    info = manager.get_log("orders", 0).read(0, 1)  # one batch of five
    log_dir_move.copy_slice(half, info.records)
    whole = manager.create_future_log("orders", 1, other_dir(manager, "orders", 1))
    copy_all(manager.get_log("orders", 1), whole)
    expected = batches(manager.get_log("orders", 1))
    manager.shutdown()
    # A stop between the swap's two renames: the current log went -delete, the future stayed.
    current_1 = log_dirs[0].absolute() / "orders-1"
    if not current_1.exists():
        current_1 = log_dirs[1].absolute() / "orders-1"
    current_1.rename(current_1.with_name("orders-1.0123-delete"))

    restarted = open_manager()

    resumed = restarted.future_log("orders", 0)
    assert resumed is not None and resumed.log_end_offset == 2
    assert restarted.future_log("orders", 1) is None
    promoted = restarted.get_log("orders", 1)
    assert promoted.directory.name == "orders-1" and batches(promoted) == expected
    assert not any(p.name.endswith("-delete") for d in log_dirs for p in d.iterdir())


def test_a_lone_future_log_is_kept_as_it_is_while_a_dir_is_offline(
    open_manager, log_dirs, kafka_batch
):
    manager = open_manager()
    produce(manager.get_or_create_log("orders", 0), kafka_batch, 3)
    source = manager.log_dir_of("orders", 0)
    future = manager.create_future_log("orders", 0, other_dir(manager, "orders", 0))
    copy_all(manager.get_log("orders", 0), future)
    manager.shutdown()
    shutil.rmtree(source)
    source.write_text("the disk under the current log is gone\n")

    restarted = open_manager()

    assert restarted.future_log("orders", 0) is not None
    with pytest.raises(UnknownTopicOrPartitionError):
        restarted.get_log("orders", 0)


def test_moves_are_refused_to_unknown_or_offline_dirs_and_while_a_dir_is_offline(
    open_manager, tmp_path
):
    manager = open_manager()
    manager.get_or_create_log("orders", 0)
    with pytest.raises(LogDirNotFoundError):
        manager.check_log_dir(tmp_path / "elsewhere")
    assert manager.check_log_dir(str(manager.log_dirs[1])) == manager.log_dirs[1]
    assert manager.create_future_log("orders", 0, manager.log_dir_of("orders", 0)) is None
    manager._mark_offline(manager.log_dirs[1], "injected")
    with pytest.raises(KafkaStorageError):
        manager.check_log_dir(manager.log_dirs[1])
    with pytest.raises(KafkaStorageError):
        manager.create_future_log("orders", 0, manager.log_dirs[1])


def test_a_preferred_dir_receives_the_partition_created_later(open_manager):
    manager = open_manager()
    manager.prefer_log_dir("orders", 0, manager.log_dirs[1])
    manager.get_or_create_log("orders", 0)
    assert manager.log_dir_of("orders", 0) == manager.log_dirs[1]
