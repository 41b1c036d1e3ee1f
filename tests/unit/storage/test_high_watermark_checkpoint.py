"""The log manager saves each high watermark in replication-offset-checkpoint and restores it."""

from __future__ import annotations

from odradek.config.topic import TopicConfig
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.files import REPLICATION_OFFSET_CHECKPOINT
from odradek.storage.manager import LogManager, ManagerIntervals
from support.waiting import wait_equal, wait_until

T0 = 1_700_000_000_000
WAIT_S = 10.0


def fill(manager: LogManager, kafka_batch, partition: int, batches: int) -> None:
    log = manager.get_or_create_log("orders", partition)
    for n in range(batches):
        log.append(kafka_batch([(b"k", b"v%d" % n)], timestamp_ms=T0), leader_epoch=0)


def test_a_clean_restart_restores_every_high_watermark(tmp_path, kafka_batch):
    manager = LogManager([tmp_path / "disk-0"])
    manager.load()
    fill(manager, kafka_batch, 0, 5)
    fill(manager, kafka_batch, 1, 5)
    manager.get_log("orders", 0).update_high_watermark(3)
    manager.get_log("orders", 1).update_high_watermark(5)
    manager.shutdown()
    assert OffsetCheckpointFile(tmp_path / "disk-0" / REPLICATION_OFFSET_CHECKPOINT).read() == {
        ("orders", 0): 3,
        ("orders", 1): 5,
    }

    again = LogManager([tmp_path / "disk-0"])
    again.load()
    try:
        assert again.get_log("orders", 0).high_watermark == 3
        assert again.get_log("orders", 1).high_watermark == 5
    finally:
        again.shutdown()


def test_an_unclean_restart_restores_the_last_checkpoint_and_no_more(tmp_path, kafka_batch):
    crashed = LogManager([tmp_path / "disk-0"])
    crashed.load()
    fill(crashed, kafka_batch, 0, 5)
    crashed.get_log("orders", 0).update_high_watermark(4)
    crashed.write_high_watermark_checkpoints()
    crashed.get_log("orders", 0).update_high_watermark(5)  # after the last checkpoint
    fill(crashed, kafka_batch, 1, 3)  # a partition the checkpoint never saw
    crashed.executors.shutdown()
    del crashed  # killed: no shutdown, no clean-shutdown marker

    again = LogManager([tmp_path / "disk-0"])
    again.load()
    try:
        assert again.get_log("orders", 0).high_watermark == 4
        # No entry: its log start offset, not its log end offset (3). A follower restarting must
        # not claim its whole log committed.
        assert again.get_log("orders", 1).high_watermark == 0
    finally:
        again.shutdown()


def test_a_checkpointed_high_watermark_past_a_torn_tail_is_clamped(tmp_path, kafka_batch):
    crashed = LogManager([tmp_path / "disk-0"])
    crashed.load()
    fill(crashed, kafka_batch, 0, 5)
    log = crashed.get_log("orders", 0)
    log.update_high_watermark(5)
    crashed.write_high_watermark_checkpoints()
    segment = log.segments()[-1].log_path
    crashed.executors.shutdown()
    del crashed, log
    with open(segment, "r+b") as f:  # the last batch torn by the crash
        f.truncate(segment.stat().st_size - 5)

    again = LogManager([tmp_path / "disk-0"])
    again.load()
    try:
        restored = again.get_log("orders", 0)
        assert restored.log_end_offset == 4
        assert restored.high_watermark == 4
    finally:
        again.shutdown()


def test_the_upkeep_thread_writes_it_every_interval(tmp_path, kafka_batch):
    intervals = ManagerIntervals(checkpoint_ms=3_600_000, high_watermark_checkpoint_ms=20)
    manager = LogManager(
        [tmp_path / "disk-0"], intervals=intervals, topic_config=lambda topic: TopicConfig()
    )
    manager.load()
    checkpoint = OffsetCheckpointFile(tmp_path / "disk-0" / REPLICATION_OFFSET_CHECKPOINT)
    manager.start(cleaner=False)
    try:
        wait_until(  # the first tick writes every checkpoint, with no log yet
            checkpoint.path.exists, "the first checkpoint", WAIT_S, poll_s=0.01
        )
        fill(manager, kafka_batch, 0, 3)
        manager.get_log("orders", 0).update_high_watermark(2)
        wait_equal(
            lambda: checkpoint.read().get(("orders", 0)),
            2,
            "the checkpointed HW",
            WAIT_S,
            poll_s=0.01,
        )
        assert checkpoint.read() == {("orders", 0): 2}
    finally:
        manager.shutdown()
