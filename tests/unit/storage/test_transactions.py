"""Transactions in a log: open transactions, markers, the last stable offset, across restarts."""

from __future__ import annotations

import json
import struct

import pytest

from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode, InvalidRecordError
from odradek.storage.control import ControlType, encode_marker
from odradek.storage.log import Log
from odradek.storage.producer_state import InvalidProducerEpochError
from odradek.storage.records import Record, encode_batch
from odradek.storage.validator import AppendOrigin

NOW = 1_700_000_000_000


def txn_batch(pid: int, sequence: int, count: int = 2, epoch: int = 0) -> bytes:
    records = [Record(i, NOW, b"k", b"v%d" % (sequence + i)) for i in range(count)]
    return encode_batch(
        records,
        base_offset=0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )


def plain_batch(count: int = 1) -> bytes:
    return encode_batch([Record(i, NOW, b"k", b"p") for i in range(count)], base_offset=0)


def marker(pid: int, control: ControlType, epoch: int = 0) -> bytes:
    return encode_marker(
        control, producer_id=pid, producer_epoch=epoch, coordinator_epoch=3, timestamp_ms=NOW
    )


def append_txn(log: Log, records: bytes) -> None:
    """A verified transactional append (what the coordinator-checked produce path will do)."""
    log.append_validated(log.validate(records, origin=AppendOrigin.COORDINATOR))


def test_a_clients_transactional_batch_begins_a_transaction_but_a_marker_is_refused(make_log):
    log = make_log()
    log.append(txn_batch(7, 0))  # 0..1, as the produce path appends it
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0  # the transaction is open
    with pytest.raises(InvalidRecordError):
        log.append(marker(7, ControlType.COMMIT))
    assert log.log_end_offset == 2
    log.append_as_coordinator(marker(7, ControlType.COMMIT), leader_epoch=0)  # 2
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3


def test_an_open_transaction_holds_the_last_stable_offset(make_log):
    log = make_log()
    log.append(plain_batch(3))  # 0..2
    append_txn(log, txn_batch(7, 0))  # 3..4
    log.append(plain_batch())  # 5
    append_txn(log, txn_batch(8, 0))  # 6..7
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset() == 3
    assert log.last_stable_offset == 3
    info = log.append_as_coordinator(marker(7, ControlType.COMMIT), leader_epoch=0)  # 8
    assert info.first_offset == 8
    assert log.last_stable_offset == 3  # until the marker is below the high watermark
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 6
    log.append_as_coordinator(marker(8, ControlType.ABORT), leader_epoch=0)  # 9
    assert log.producer_state.first_unstable_offset() is None
    assert log.first_unstable_offset() == 6  # its marker is not replicated yet
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset() is None
    assert log.last_stable_offset == log.high_watermark == 10


def test_a_second_transactional_batch_keeps_the_first_offset(make_log):
    log = make_log()
    append_txn(log, txn_batch(7, 0))
    append_txn(log, txn_batch(7, 2))
    assert log.producer_state.producers[7].current_txn_first_offset == 0
    assert log.first_unstable_offset() == 0


def test_a_marker_without_an_open_transaction_ends_nothing(make_log):
    log = make_log()
    log.append_as_coordinator(marker(7, ControlType.ABORT), leader_epoch=0)
    assert log.first_unstable_offset() is None
    assert log.log_end_offset == 1


def test_a_marker_of_a_fenced_epoch_is_refused(make_log):
    log = make_log()
    append_txn(log, txn_batch(7, 0, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_coordinator(marker(7, ControlType.COMMIT, epoch=1), leader_epoch=0)
    assert log.first_unstable_offset() == 0


@pytest.mark.parametrize("clean", [True, False])
def test_open_transactions_survive_a_restart(tmp_path, clean):
    config = TopicConfig(segment_bytes=400)
    log = Log(tmp_path / "t-0", config)
    append_txn(log, txn_batch(7, 0))  # 0..1
    for _ in range(5):
        log.append(plain_batch(2))  # rolls: snapshots taken with the transaction open
    append_txn(log, txn_batch(8, 0))
    log.append_as_coordinator(marker(8, ControlType.ABORT), leader_epoch=0)
    end = log.log_end_offset
    assert len(log.segments()) > 1
    if clean:
        log.close()
    else:
        log.executors.housekeeping.submit(lambda: None)  # roll snapshots only, no close
    reopened = Log(tmp_path / "t-0", config, clean_shutdown=clean)
    try:
        assert reopened.log_end_offset == end
        assert reopened.first_unstable_offset() == 0
        assert 8 not in reopened.producer_state.ongoing
        reopened.append_as_coordinator(marker(7, ControlType.COMMIT), leader_epoch=0)
        assert reopened.producer_state.first_unstable_offset() is None
    finally:
        reopened.close()


def test_a_version_1_snapshot_loads_without_transactions(tmp_path):
    config = TopicConfig()
    log = Log(tmp_path / "t-0", config)
    log.append(plain_batch())
    log.close()
    (path,) = (tmp_path / "t-0").glob("*.snapshot")
    data = json.loads(path.read_bytes().split(b"\n", 1)[1])
    assert data["version"] == 2
    data["version"] = 1
    for producer in data["producers"]:
        producer.pop("current_txn_first_offset")
    from crc32c import crc32c

    payload = json.dumps(data).encode()
    path.write_bytes(f"{crc32c(payload):08x}\n".encode() + payload)
    reopened = Log(tmp_path / "t-0", config, clean_shutdown=True)
    assert reopened.first_unstable_offset() is None
    reopened.close()


def test_truncation_reopens_a_transaction_whose_marker_it_removed(make_log):
    log = make_log()
    append_txn(log, txn_batch(7, 0))  # 0..1
    log.append_as_coordinator(marker(7, ControlType.COMMIT), leader_epoch=0)  # 2
    log.update_high_watermark(3)
    assert log.first_unstable_offset() is None
    log.truncate_to(2)
    assert log.first_unstable_offset() == 0


def test_followers_copy_markers_and_follow_the_transaction(make_log):
    leader, follower = make_log("l-0"), make_log("f-0")
    append_txn(leader, txn_batch(7, 0))
    leader.append_as_coordinator(marker(7, ControlType.ABORT), leader_epoch=0)
    for _, data in leader.batches():
        follower.append(data, origin=AppendOrigin.REPLICATION)
    assert [d for _, d in follower.batches()] == [d for _, d in leader.batches()]
    assert follower.log_end_offset == 3
    assert follower.first_unstable_offset() == 0  # until the leader's HW passes the marker
    follower.update_high_watermark(3)
    assert follower.first_unstable_offset() is None
    assert [t.producer_id for t in follower.collect_aborted_transactions(0, 3)] == [7]


# -- the aborted-transaction index -------------------------------------------------------------


def _txnindex_files(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.directory.glob("*.txnindex"))}


def test_an_abort_writes_an_entry_in_kafka_format_beside_its_marker_segment(make_log):
    log = make_log()
    append_txn(log, txn_batch(7, 0))  # 0..1
    append_txn(log, txn_batch(8, 0))  # 2..3
    log.append_as_coordinator(marker(7, ControlType.ABORT), leader_epoch=0)  # 4
    log.append_as_coordinator(marker(8, ControlType.COMMIT), leader_epoch=0)  # 5: no entry
    files = _txnindex_files(log)
    assert list(files) == ["00000000000000000000.txnindex"]
    # version, producer id, first offset, last offset (the marker), last stable offset (8's)
    assert files["00000000000000000000.txnindex"] == struct.pack(">hqqqq", 0, 7, 0, 4, 2)
    (entry,) = log.collect_aborted_transactions(0, 6)
    assert (entry.producer_id, entry.first_offset, entry.last_offset) == (7, 0, 4)
    assert log.collect_aborted_transactions(5, 6) == []


def test_the_lookup_spans_segments_until_an_entry_is_stable_beyond_the_range(make_log):
    log = make_log(segment_bytes=300)
    append_txn(log, txn_batch(7, 0))  # 0..1
    for _ in range(4):
        log.append(plain_batch(2))
    append_txn(log, txn_batch(8, 0))
    log.append_as_coordinator(marker(7, ControlType.ABORT), leader_epoch=0)
    log.append_as_coordinator(marker(8, ControlType.ABORT), leader_epoch=0)
    assert len(log.segments()) > 2
    found = log.collect_aborted_transactions(1, log.log_end_offset)
    assert [t.producer_id for t in found] == [7, 8]
    assert [t.producer_id for t in log.collect_aborted_transactions(0, 2)] == [7]


def test_truncation_and_recovery_rebuild_the_index(tmp_path):
    config = TopicConfig(segment_bytes=300)
    log = Log(tmp_path / "t-0", config)
    append_txn(log, txn_batch(7, 0))  # 0..1
    log.append_as_coordinator(marker(7, ControlType.ABORT), leader_epoch=0)  # 2
    for _ in range(4):
        log.append(plain_batch(2))
    append_txn(log, txn_batch(8, 0))
    log.append_as_coordinator(marker(8, ControlType.ABORT), leader_epoch=0)
    before = _txnindex_files(log)
    assert len(before) == 2
    end = log.log_end_offset
    log.truncate_to(end - 1)  # the second marker goes, its entry with it
    assert [t.producer_id for t in log.collect_aborted_transactions(0, end)] == [7]
    assert log.first_unstable_offset() == end - 3
    log.append_as_coordinator(marker(8, ControlType.ABORT), leader_epoch=0)
    assert _txnindex_files(log) == before
    # A crash: the index files are lost, recovery rebuilds them from the markers.
    for path in (tmp_path / "t-0").glob("*.txnindex"):
        path.unlink()
    for path in (tmp_path / "t-0").glob("*.snapshot"):
        path.unlink()
    reopened = Log(tmp_path / "t-0", config, recovery_point=0)
    try:
        assert _txnindex_files(reopened) == before
    finally:
        reopened.close()


def test_deleting_a_segment_deletes_its_index(make_log):
    log = make_log(segment_bytes=300, retention_bytes=1, file_delete_delay_ms=0)
    append_txn(log, txn_batch(7, 0))
    log.append_as_coordinator(marker(7, ControlType.ABORT), leader_epoch=0)
    for _ in range(6):
        log.append(plain_batch(2))
    log.update_high_watermark(log.log_end_offset)
    assert _txnindex_files(log)
    assert log.delete_old_segments() > 0
    log.delete_expired_files(force=True)
    assert _txnindex_files(log) == {}


# -- compaction ---------------------------------------------------------------------------------


def _keyed_txn(pid: int, key: bytes, value: bytes) -> bytes:
    return encode_batch(
        [Record(0, NOW, key, value)],
        base_offset=0,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def _keyed(key: bytes, value: bytes) -> bytes:
    return encode_batch([Record(0, NOW, key, value)], base_offset=0)


def _values(log: Log) -> list[tuple[int, bytes | None]]:
    from odradek.storage.records import decode_records

    return [(r.offset, r.value) for _, data in log.batches() for r in decode_records(data) if r.key]


def test_an_aborted_record_supersedes_nothing_and_its_entry_survives_cleaning(make_log):
    from odradek.storage.cleaner import LogCleaner

    log = make_log(cleanup_policy="compact", file_delete_delay_ms=0, segment_bytes=200)
    log.append(_keyed(b"k", b"committed"))  # 0
    append_txn(log, _keyed_txn(7, b"k", b"aborted"))  # 1
    log.append_as_coordinator(marker(7, ControlType.ABORT), leader_epoch=0)  # 2
    for n in range(4):
        log.append(_keyed(b"other", b"%d" % n))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert LogCleaner().clean(log) is not None
    assert (0, b"committed") in _values(log)  # read_committed consumers still see it
    assert [t.producer_id for t in log.collect_aborted_transactions(0, log.log_end_offset)] == [7]


def test_cleaning_stops_at_the_last_stable_offset(make_log):
    from odradek.storage.cleaner import LogCleaner

    log = make_log(cleanup_policy="compact", file_delete_delay_ms=0, segment_bytes=200)
    log.append(_keyed(b"k", b"old"))  # 0
    append_txn(log, _keyed_txn(7, b"x", b"open"))  # 1: its transaction stays open
    for n in range(4):
        log.append(_keyed(b"k", b"%d" % n))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 1
    LogCleaner().clean(log)
    assert (0, b"old") in _values(log)  # above the LSO nothing is judged yet


def test_a_marker_of_an_older_coordinator_is_fenced_even_after_a_restart(tmp_path):
    from odradek.storage.producer_state import TransactionCoordinatorFencedError

    def marker_from(coordinator_epoch: int) -> bytes:
        return encode_marker(
            ControlType.COMMIT,
            producer_id=7,
            producer_epoch=0,
            coordinator_epoch=coordinator_epoch,
            timestamp_ms=NOW,
        )

    config = TopicConfig()
    log = Log(tmp_path / "t-0", config)
    append_txn(log, txn_batch(7, 0))
    log.append_as_coordinator(marker_from(5), leader_epoch=0)
    log.close()
    log = Log(tmp_path / "t-0", config, clean_shutdown=True)  # from the snapshot
    try:
        with pytest.raises(TransactionCoordinatorFencedError) as raised:
            log.append_as_coordinator(marker_from(4), leader_epoch=0)
        assert raised.value.error_code == ErrorCode.transaction_coordinator_fenced
        log.append_as_coordinator(marker_from(5), leader_epoch=0)  # the same epoch may retry
    finally:
        log.close()


def test_the_lso_never_falls_below_the_log_start(make_log):
    log = make_log()
    append_txn(log, txn_batch(7, 0))  # 0..1, left open
    log.append(plain_batch(3))  # 2..4
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0
    log.advance_log_start_offset(3)
    assert log.last_stable_offset == 3
