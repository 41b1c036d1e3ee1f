"""A log keeps its leader-epoch cache and high watermark right through appends, truncation,
retention and restarts, whatever state its leader-epoch-checkpoint was left in."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from odradek.config.topic import TopicConfig
from odradek.storage.cleaner import LogCleaner
from odradek.storage.files import LEADER_EPOCH_CHECKPOINT
from odradek.storage.leader_epoch import UNDEFINED_EPOCH
from odradek.storage.log import Log
from odradek.storage.validator import AppendOrigin

T0 = 1_700_000_000_000


@pytest.fixture
def open_log(tmp_path):
    opened: list[Log] = []

    def open_(directory: Path | None = None, **kwargs) -> Log:
        config = kwargs.pop("config", TopicConfig())
        log = Log(directory or tmp_path / "orders-0", config, **kwargs)
        opened.append(log)
        return log

    yield open_
    for log in opened:
        with contextlib.suppress(Exception):
            log.close()


def lead(log: Log, kafka_batch, epochs: list[int], records: int = 2) -> None:
    """Append one batch per entry of ``epochs``, as the leader of that epoch."""
    for n, epoch in enumerate(epochs):
        batch = kafka_batch([(b"k%d" % n, b"v%d" % i) for i in range(records)], timestamp_ms=T0)
        log.append(batch, leader_epoch=epoch)


def entries(log: Log) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries()]


def checkpoint_text(log: Log) -> str:
    return (log.directory / LEADER_EPOCH_CHECKPOINT).read_text()


def test_the_leader_records_where_each_epoch_starts(open_log, kafka_batch):
    log = open_log()
    assert log.latest_epoch is None and entries(log) == []
    assert not (log.directory / LEADER_EPOCH_CHECKPOINT).exists()  # a new log writes nothing
    lead(log, kafka_batch, [0, 0, 2, 2, 5])
    assert entries(log) == [(0, 0), (2, 4), (5, 8)]
    assert log.latest_epoch == 5
    # Written at each change (here by inline executors; in a broker by the housekeeping thread).
    assert checkpoint_text(log) == "0\n3\n0 0\n2 4\n5 8\n"
    assert log.end_offset_for_epoch(0) == (0, 4)
    assert log.end_offset_for_epoch(3) == (2, 8)
    assert log.end_offset_for_epoch(5) == (5, 10)
    assert log.end_offset_for_epoch(UNDEFINED_EPOCH) == (-1, -1)


def test_batches_without_an_epoch_start_none(open_log, kafka_batch):
    log = open_log()
    lead(log, kafka_batch, [-1, -1])
    assert entries(log) == []


def test_a_follower_learns_the_epochs_from_the_batches_it_copies(open_log, kafka_batch, tmp_path):
    leader = open_log(tmp_path / "leader" / "orders-0")
    lead(leader, kafka_batch, [1, 1, 3, 4, 4])
    follower = open_log(tmp_path / "follower" / "orders-0")
    copied = list(leader.batches())
    # Two fetches: the second holds batches of two epochs in one record set.
    follower.append(b"".join(d for _, d in copied[:3]), origin=AppendOrigin.REPLICATION)
    assert entries(follower) == [(1, 0), (3, 4)]
    follower.append(b"".join(d for _, d in copied[3:]), origin=AppendOrigin.REPLICATION)
    assert entries(follower) == entries(leader) == [(1, 0), (3, 4), (4, 6)]
    assert follower.end_offset_for_epoch(3) == leader.end_offset_for_epoch(3) == (3, 6)


def test_a_new_leader_assigns_its_epoch_at_its_log_end_offset(open_log, kafka_batch):
    log = open_log()
    lead(log, kafka_batch, [1, 1])
    log.assign_epoch_start_offset(4, log.log_end_offset)
    assert entries(log) == [(1, 0), (4, 4)]
    assert log.end_offset_for_epoch(1) == (1, 4)  # a follower of epoch 1 keeps all it has
    assert log.end_offset_for_epoch(4) == (4, 4)
    log.assign_epoch_start_offset(3, 4)  # a stale leader's epoch changes nothing
    lead(log, kafka_batch, [4])  # the first batch of the new epoch adds no entry
    assert entries(log) == [(1, 0), (4, 4)]
    assert checkpoint_text(log) == "0\n2\n1 0\n4 4\n"


def test_truncation_removes_the_epochs_above_it(open_log, kafka_batch):
    log = open_log()
    lead(log, kafka_batch, [1, 2, 3])  # two records a batch
    log.truncate_to(4)
    assert entries(log) == [(1, 0), (2, 2)]
    log.truncate_to(2)
    assert entries(log) == [(1, 0)]
    assert checkpoint_text(log) == "0\n1\n1 0\n"
    lead(log, kafka_batch, [5])
    assert entries(log) == [(1, 0), (5, 2)]


def test_truncating_at_the_end_drops_an_epoch_that_never_got_a_batch(open_log, kafka_batch):
    """A broker led epoch 6 from offset 4 and was replaced before it appended: its new leader
    never saw epoch 6. Truncating to the end removes no record, but epoch 6 goes (as Kafka's
    truncateTo does), so the follower's last fetched epoch is one its leader knows."""
    log = open_log()
    lead(log, kafka_batch, [1, 1])
    log.assign_epoch_start_offset(6, log.log_end_offset)
    assert log.latest_epoch == 6
    log.truncate_to(log.log_end_offset)
    assert entries(log) == [(1, 0)]
    assert log.log_end_offset == 4 and log.latest_epoch == 1
    assert checkpoint_text(log) == "0\n1\n1 0\n"
    log.truncate_to(10)  # past the end: nothing more to drop
    assert entries(log) == [(1, 0)] and log.log_end_offset == 4


def test_delete_records_and_retention_move_the_first_epoch_up(open_log, kafka_batch):
    config = TopicConfig(segment_bytes=200, file_delete_delay_ms=0, retention_bytes=250)
    log = open_log(config=config)
    lead(log, kafka_batch, [1, 1, 2, 2, 2, 3])  # segments at 0, 4, 8
    log.update_high_watermark(log.log_end_offset)
    log.advance_log_start_offset(3)  # DeleteRecords
    assert entries(log) == [(1, 3), (2, 4), (3, 10)]
    assert log.delete_old_segments() == 2  # retention.bytes: segments 0 and 4 go
    assert log.log_start_offset == 8
    assert entries(log) == [(2, 8), (3, 10)]
    assert checkpoint_text(log) == "0\n2\n2 8\n3 10\n"


def test_compaction_does_not_change_the_epochs(open_log, kafka_batch):
    log = open_log(
        config=TopicConfig(
            cleanup_policy=("compact",), segment_bytes=200, min_cleanable_dirty_ratio=0
        )
    )
    for epoch in (1, 1, 2, 2, 3, 3):
        log.append(kafka_batch([(b"same-key", b"v")], timestamp_ms=T0), leader_epoch=epoch)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    before = entries(log)
    LogCleaner(clock=lambda: T0).clean(log)
    assert len(list(log.batches())) < 6  # something was compacted away
    assert entries(log) == before


# -- loading ---------------------------------------------------------------------------------------


def test_reload_reads_the_checkpoint(open_log, kafka_batch):
    log = open_log()
    lead(log, kafka_batch, [0, 2, 2, 7])
    log.close()
    again = open_log(log.directory, clean_shutdown=True)
    assert entries(again) == [(0, 0), (2, 2), (7, 6)]


@pytest.mark.parametrize("damage", ["missing", "corrupt", "torn"])
def test_reload_without_a_usable_checkpoint_rebuilds_from_the_batches(
    open_log, kafka_batch, damage, caplog
):
    log = open_log()
    lead(log, kafka_batch, [0, 2, 2, 7])
    log.close()
    path = log.directory / LEADER_EPOCH_CHECKPOINT
    if damage == "missing":
        path.unlink()
    elif damage == "corrupt":
        path.write_text("0\n2\n7 6\n2 2\n")
    else:
        path.write_bytes(path.read_bytes()[:-3])
    again = open_log(log.directory)
    assert entries(again) == [(0, 0), (2, 2), (7, 6)]
    assert checkpoint_text(again) == "0\n3\n0 0\n2 2\n7 6\n"  # written again, whole


@pytest.mark.parametrize("truncated_to", [4, 6])
def test_a_checkpoint_left_behind_by_a_crash_is_corrected(
    open_log, kafka_batch, tmp_path, truncated_to
):
    """The file is written off the appending thread: a kill can leave it from before a
    truncation and the epochs appended after it. At 4 its entry (2, 4) no longer matches the
    batches (rebuilt); at 6 its entries still hold and the newer epochs are found after them."""
    log = open_log()
    lead(log, kafka_batch, [1, 1, 2, 2, 2])  # [(1, 0), (2, 4)], LEO 10
    stale = (log.directory / LEADER_EPOCH_CHECKPOINT).read_bytes()
    log.truncate_to(truncated_to)  # a new leader had other data from there
    lead(log, kafka_batch, [3, 3, 4])
    expected = [(1, 0), (2, 4), (3, 6), (4, 10)] if truncated_to == 6 else [(1, 0), (3, 4), (4, 8)]
    assert entries(log) == expected
    crashed = tmp_path / "crashed" / log.directory.name
    shutil.copytree(log.directory, crashed)
    (crashed / LEADER_EPOCH_CHECKPOINT).write_bytes(stale)
    again = open_log(crashed, recovery_point=10)
    assert entries(again) == expected


def test_epochs_appended_after_the_last_write_are_found(open_log, kafka_batch, tmp_path):
    log = open_log()
    lead(log, kafka_batch, [1] * 20)
    stale = (log.directory / LEADER_EPOCH_CHECKPOINT).read_bytes()
    lead(log, kafka_batch, [1] * 7 + [4] * 9 + [6] + [9] * 30)
    expected = [(1, 0), (4, 54), (6, 72), (9, 74)]
    assert entries(log) == expected
    crashed = tmp_path / "crashed" / log.directory.name
    shutil.copytree(log.directory, crashed)
    (crashed / LEADER_EPOCH_CHECKPOINT).write_bytes(stale)
    again = open_log(crashed, recovery_point=log.log_end_offset)
    assert entries(again) == expected


def test_recovery_that_cuts_the_tail_cuts_the_epochs(open_log, kafka_batch, tmp_path):
    log = open_log()
    lead(log, kafka_batch, [1, 1, 2, 3])
    crashed = tmp_path / "crashed" / log.directory.name
    shutil.copytree(log.directory, crashed)
    segment = crashed / f"{0:020d}.log"
    size = segment.stat().st_size
    last = list(log.batches())[-1][1]
    with open(segment, "r+b") as f:
        f.truncate(size - len(last) + 10)  # the last batch (epoch 3) is torn
    again = open_log(crashed)
    assert again.log_end_offset == 6
    assert entries(again) == [(1, 0), (2, 4)]
    assert checkpoint_text(again) == "0\n2\n1 0\n2 4\n"


# -- the high watermark --------------------------------------------------------------------------


def test_the_checkpoint_follows_the_logs_directory_through_its_renames(
    open_log, kafka_batch, tmp_path
):
    """Deletion (``detach``) and a future log made current (``rename_dir``) rename the
    directory; the checkpoint, which opens it by path at each write, goes where the log went."""
    future = open_log(tmp_path / "orders-0.abc-future")
    lead(future, kafka_batch, [3])
    future.rename_dir(tmp_path / "orders-0")
    future.assign_epoch_start_offset(5, future.log_end_offset)
    future.write_leader_epoch_checkpoint()
    written = (tmp_path / "orders-0" / LEADER_EPOCH_CHECKPOINT).read_bytes()
    assert written == b"0\n2\n3 0\n5 2\n"
    future.assign_epoch_start_offset(6, future.log_end_offset)
    renamed = tmp_path / "orders-0.abc-delete"
    future.detach(renamed)
    (tmp_path / "orders-0").mkdir()  # the partition created again at the old name
    future.leader_epoch_cache.flush()  # a write that began before the deletion
    assert (renamed / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n2\n3 0\n6 2\n"
    assert list((tmp_path / "orders-0").iterdir()) == []
    future.delete_files()


def test_the_high_watermark_starts_at_the_log_start_unless_restored(open_log, kafka_batch):
    log = open_log()
    lead(log, kafka_batch, [0, 0, 0])
    log.advance_log_start_offset(0)
    log.close()
    assert open_log(log.directory, log_start_offset=2).high_watermark == 2
    assert open_log(log.directory).high_watermark == 0  # not the LEO: nothing known committed
    assert open_log(log.directory, high_watermark=4).high_watermark == 4
    assert open_log(log.directory, high_watermark=99).high_watermark == 6  # clamped to the LEO
