"""Idempotent producers: retries are dropped, gaps and zombies rejected, state survives restarts."""

from __future__ import annotations

import shutil

import pytest

from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode, InvalidRecordError
from odradek.storage.log import Log
from odradek.storage.producer_state import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)

PID = 4000


@pytest.fixture
def idempotent(kafka_batch):
    """``idempotent(sequence, count, epoch=0, pid=PID)``: a batch as an idempotent producer's."""

    def build(sequence: int, count: int = 3, epoch: int = 0, pid: int = PID) -> bytes:
        records = [(b"k", b"seq %d" % (sequence + i)) for i in range(count)]
        return kafka_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)

    return build


def _file_sizes(log: Log) -> list[int]:
    return [s.size for s in log.segments()]


def test_a_retried_batch_is_not_written_twice_and_gets_its_offsets_back(make_log, idempotent):
    log = make_log()
    first = log.append(idempotent(0))
    second = log.append(idempotent(3))
    sizes = _file_sizes(log)
    retry = log.append(idempotent(0))
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.append(idempotent(3)).first_offset == second.first_offset
    assert log.log_end_offset == 6
    assert _file_sizes(log) == sizes


def test_a_gap_in_sequences_is_rejected_and_nothing_is_written(make_log, idempotent):
    log = make_log()
    log.append(idempotent(0))
    sizes = _file_sizes(log)
    with pytest.raises(OutOfOrderSequenceError) as raised:
        log.append(idempotent(5))
    assert raised.value.error_code == ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == 3
    assert _file_sizes(log) == sizes
    log.append(idempotent(3))  # the expected sequence still goes in
    assert log.log_end_offset == 6


def test_an_older_epoch_is_fenced(make_log, idempotent):
    log = make_log()
    log.append(idempotent(0, epoch=2))
    with pytest.raises(InvalidProducerEpochError) as raised:
        log.append(idempotent(3, epoch=1))
    assert raised.value.error_code == ErrorCode.invalid_producer_epoch


def test_a_new_epoch_starts_at_sequence_zero(make_log, idempotent):
    log = make_log()
    log.append(idempotent(0, epoch=0))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent(3, epoch=1))
    log.append(idempotent(0, epoch=1))
    assert log.log_end_offset == 6


def test_an_unknown_producer_may_start_anywhere_and_producers_are_independent(make_log, idempotent):
    log = make_log()
    log.append(idempotent(1000, pid=1))
    log.append(idempotent(0, pid=2))
    log.append(idempotent(1003, pid=1))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent(7, pid=2))


def test_sequences_wrap_after_int32_max(make_log, idempotent):
    log = make_log()
    log.append(idempotent((1 << 31) - 2, count=2))  # sequences 2**31-2 and 2**31-1
    log.append(idempotent(0, count=2))
    assert log.log_end_offset == 4


def test_only_the_last_five_batches_are_remembered(make_log, idempotent):
    log = make_log()
    for n in range(6):
        log.append(idempotent(3 * n))
    assert log.append(idempotent(3)).duplicate  # the 5th most recent is still known
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent(0))  # the 6th most recent is not: it looks like a gap


def test_an_idempotent_record_set_must_hold_one_batch(make_log, idempotent):
    log = make_log()
    with pytest.raises(InvalidRecordError):
        log.append(idempotent(0) + idempotent(3))
    assert log.log_end_offset == 0


def test_state_survives_a_clean_restart_through_its_snapshot(tmp_path, idempotent):
    config = TopicConfig()
    log = Log(tmp_path / "t-0", config)
    log.append(idempotent(0))
    log.close()
    assert [p.name for p in (tmp_path / "t-0").glob("*.snapshot")] == [f"{3:020d}.snapshot"]
    reopened = Log(tmp_path / "t-0", config, clean_shutdown=True)
    assert reopened.append(idempotent(0)).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append(idempotent(9))
    reopened.close()


def test_state_is_rebuilt_from_the_log_when_no_snapshot_covers_it(tmp_path, idempotent):
    """A crash leaves no final snapshot: batches after the last one are replayed."""
    config = TopicConfig(segment_bytes=300)
    log = Log(tmp_path / "t-0", config)
    for n in range(8):
        log.append(idempotent(3 * n))  # rolls: snapshots at some segment bases
    assert list((tmp_path / "t-0").glob("*.snapshot"))
    crashed = tmp_path / "crashed-0"
    shutil.copytree(tmp_path / "t-0", crashed)  # as a kill -9 leaves it: open, no close
    log.close()

    reopened = Log(crashed, config, recovery_point=0)
    assert reopened.append(idempotent(21)).duplicate  # the last batch, after every snapshot
    reopened.append(idempotent(24))
    assert reopened.log_end_offset == 27
    reopened.close()


def test_a_damaged_snapshot_is_ignored(tmp_path, idempotent, caplog):
    config = TopicConfig()
    log = Log(tmp_path / "t-0", config)
    log.append(idempotent(0))
    log.close()
    (snapshot,) = (tmp_path / "t-0").glob("*.snapshot")
    original = snapshot.read_bytes()
    damaged = original.replace(b'"producer_epoch":0', b'"producer_epoch":9')
    assert damaged != original
    snapshot.write_bytes(damaged)  # had it been trusted, epoch 0 would now be fenced
    reopened = Log(tmp_path / "t-0", config, clean_shutdown=True)
    assert reopened.append(idempotent(0)).duplicate  # rebuilt from the log instead
    assert "ignoring producer state snapshot" in caplog.text
    reopened.close()


def test_truncation_forgets_the_truncated_batches(make_log, idempotent):
    log = make_log(segment_bytes=300)
    for n in range(4):
        log.append(idempotent(3 * n))
    log.truncate_to(6)
    assert log.append(idempotent(6)).first_offset == 6  # not a duplicate any more
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent(12))
