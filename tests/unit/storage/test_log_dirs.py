"""The log manager describes its log dirs (sizes, lags, offline dirs) and moves a replica's log
between them through a future log (KIP-113), also across a restart in the middle."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.storage.log import Log
from odradek.storage.manager import LogManager


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
