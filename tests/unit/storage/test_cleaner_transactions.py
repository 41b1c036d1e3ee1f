"""Compaction of transactional data: aborted data goes, markers go two passes and a horizon later,
committed data is compacted like any data, and read_committed over the cleaned log is unchanged."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from odradek.common.clock import ManualClock
from odradek.config.topic import TopicConfig
from odradek.storage.batch import DELETE_HORIZON_MASK, BatchHeader
from odradek.storage.cleaner import LogCleaner
from odradek.storage.control import ControlType, encode_marker, marker_or_none
from odradek.storage.log import Log
from odradek.storage.records import Record, decode_records, encode_batch
from odradek.storage.validator import AppendOrigin

T0_MS = 1_700_000_000_000
DELETE_RETENTION_MS = 60_000


class Writer:
    """Writes plain, transactional and marker batches to a log, as producers and a coordinator
    would, keeping each transactional producer's sequence."""

    def __init__(self, log: Log):
        self.log = log
        self.sequences: dict[int, int] = {}
        self.open: dict[int, list[int]] = {}  # producer id -> its open transaction's offsets
        self.aborted: set[int] = set()  # offsets of every aborted transactional record

    def plain(self, key: bytes, value: bytes | None) -> int:
        batch = encode_batch([Record(0, T0_MS, key, value)], base_offset=0)
        return self.log.append(batch).first_offset

    def txn(self, pid: int, *pairs: tuple[bytes, bytes | None]) -> int:
        sequence = self.sequences.get(pid, 0)
        records = [Record(i, T0_MS, k, v) for i, (k, v) in enumerate(pairs)]
        batch = encode_batch(
            records,
            base_offset=0,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=sequence,
            is_transactional=True,
        )
        self.sequences[pid] = sequence + len(pairs)
        # The coordinator-checked produce path (the validator refuses clients' for now).
        log = self.log
        info = log.append_validated(log.validate(batch, origin=AppendOrigin.COORDINATOR))
        self.open.setdefault(pid, []).extend(range(info.first_offset, info.last_offset + 1))
        return info.first_offset

    def end(self, pid: int, control: ControlType, epoch: int = 0) -> int:
        batch = encode_marker(
            control, producer_id=pid, producer_epoch=epoch, coordinator_epoch=1, timestamp_ms=T0_MS
        )
        offsets = self.open.pop(pid, [])
        if control is ControlType.ABORT:
            self.aborted.update(offsets)
        return self.log.append_as_coordinator(batch, leader_epoch=0).first_offset


def seal(log: Log) -> None:
    log.roll()
    log.update_high_watermark(log.log_end_offset)


def batches(log: Log) -> list[tuple[BatchHeader, bytes]]:
    return [(BatchHeader.parse(data), data) for _, data in log.batches()]


def read_committed(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a read_committed consumer gets from the log start to the LSO, filtering as Kafka's
    consumer does: the fetch's aborted transactions by first offset, a producer's data skipped
    from its aborted transaction's first offset until that producer's ABORT marker."""
    end = log.last_stable_offset
    pending = sorted(
        log.collect_aborted_transactions(log.log_start_offset, end), key=lambda t: t.first_offset
    )
    aborting: set[int] = set()
    seen: list[tuple[int, bytes | None, bytes | None]] = []
    for header, data in batches(log):
        if header.base_offset >= end:
            break
        while pending and pending[0].first_offset <= header.last_offset:
            aborting.add(pending.pop(0).producer_id)
        if header.is_control:
            found = marker_or_none(header, data)
            if found is not None and found.control is ControlType.ABORT:
                aborting.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborting:
            continue
        seen += [(r.offset, r.key, r.value) for r in decode_records(data)]
    return seen


def latest(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes]:
    """The latest value of each key, tombstoned keys left out (what compaction must keep)."""
    values: dict[bytes | None, bytes | None] = {}
    for _, key, value in records:
        values[key] = value
    return {k: v for k, v in values.items() if v is not None}


def markers(log: Log) -> list[tuple[int, ControlType, bool]]:
    """Each marker's offset, type and whether it carries a delete horizon."""
    return [
        (header.base_offset, found.control, bool(header.attributes & DELETE_HORIZON_MASK))
        for header, data in batches(log)
        if header.is_control and (found := marker_or_none(header, data)) is not None
    ]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(now_ms=T0_MS)


@pytest.fixture
def txn_log(make_log, clock):
    return make_log(
        clock=clock,
        cleanup_policy="compact",
        file_delete_delay_ms=0,
        segment_bytes=300,
        delete_retention_ms=DELETE_RETENTION_MS,
    )


def test_aborted_data_is_removed_and_committed_data_kept(txn_log):
    w = Writer(txn_log)
    w.plain(b"a", b"plain-a")  # 0
    w.txn(7, (b"a", b"aborted-a"), (b"b", b"aborted-b"))  # 1..2
    w.txn(8, (b"c", b"committed-c"))  # 3
    w.end(7, ControlType.ABORT)  # 4
    w.end(8, ControlType.COMMIT)  # 5
    seal(txn_log)
    committed_view = latest(read_committed(txn_log))

    stats = LogCleaner(clock=txn_log.clock).clean(txn_log)

    assert stats is not None and stats.records_removed >= 2
    values = [(r.offset, r.value) for _, d in txn_log.batches() for r in decode_records(d)]
    assert (1, b"aborted-a") not in values and (2, b"aborted-b") not in values
    assert (0, b"plain-a") in values  # the aborted write superseded nothing
    assert (3, b"committed-c") in values
    assert (
        latest(read_committed(txn_log))
        == committed_view
        == {b"a": b"plain-a", b"c": b"committed-c"}
    )
    # The ABORT marker stays while this pass removed its data, and its entry with it.
    assert [t.producer_id for t in txn_log.collect_aborted_transactions(0, 6)] == [7]
    assert [(o, c) for o, c, _ in markers(txn_log)] == [
        (4, ControlType.ABORT),
        (5, ControlType.COMMIT),
    ]


def test_committed_transactional_data_is_compacted_like_any_data(txn_log):
    w = Writer(txn_log)
    w.txn(8, (b"k", b"v1"))  # 0
    w.end(8, ControlType.COMMIT)  # 1
    w.plain(b"k", b"v2")  # 2: supersedes the committed value
    w.txn(9, (b"k", b"v3"), (b"j", b"j1"))  # 3..4: a later transaction keeps j
    w.end(9, ControlType.COMMIT)  # 5
    w.plain(b"k", b"v4")  # 6
    seal(txn_log)
    cleaner = LogCleaner(clock=txn_log.clock)
    cleaner.clean(txn_log)
    kept = [(r.offset, r.value) for _, d in txn_log.batches() for r in decode_records(d)]
    assert (0, b"v1") not in kept and (3, b"v3") not in kept and (2, b"v2") not in kept
    assert (4, b"j1") in kept and (6, b"v4") in kept
    assert latest(read_committed(txn_log)) == {b"k": b"v4", b"j": b"j1"}
    # This pass removed 8's data: its marker stays, then gets a horizon on the next pass,
    # which comes by itself; 9's transaction keeps j, and its marker stays as it is.
    assert [(o, h) for o, _, h in markers(txn_log)] == [(1, False), (5, False)]
    assert cleaner.tombstones_due(txn_log, txn_log.clock())
    cleaner.clean(txn_log)
    assert [(o, h) for o, _, h in markers(txn_log)] == [(1, True), (5, False)]


def test_markers_go_only_after_their_data_and_the_delete_horizon(txn_log, clock):
    w = Writer(txn_log)
    w.txn(7, (b"a", b"aborted"))  # 0
    w.end(7, ControlType.ABORT)  # 1
    w.plain(b"x", b"1")  # 2
    w.txn(8, (b"x", b"2"))  # 3: superseded by 6 below
    w.end(8, ControlType.COMMIT)  # 4
    w.plain(b"y", b"1")  # 5
    w.plain(b"x", b"3")  # 6
    # One more transaction each, so that those markers are not their producer's last batch.
    w.txn(7, (b"p7", b"x"))
    w.end(7, ControlType.COMMIT)
    w.txn(8, (b"p8", b"x"))
    w.end(8, ControlType.COMMIT)
    seal(txn_log)
    cleaner = LogCleaner(clock=clock)

    # Pass 1: the aborted data and the superseded committed record go; both markers stay
    # (a pass saw their transactions' data), the ABORT's entry with them.
    cleaner.clean(txn_log)
    assert (1, ControlType.ABORT, False) in markers(txn_log)
    assert (4, ControlType.COMMIT, False) in markers(txn_log)
    assert [t.first_offset for t in txn_log.collect_aborted_transactions(0, 2)] == [0]
    assert cleaner.tombstones_due(txn_log, clock.now_ms), "the next pass must come by itself"

    # Pass 2: no data of either transaction is left: the markers get their horizon, and the
    # entry goes (nothing is left for read_committed to filter).
    cleaner.clean(txn_log)
    assert (1, ControlType.ABORT, True) in markers(txn_log)
    assert (4, ControlType.COMMIT, True) in markers(txn_log)
    assert txn_log.collect_aborted_transactions(0, txn_log.log_end_offset) == []
    assert not list(txn_log.directory.glob("*.txnindex")) or all(
        p.stat().st_size == 0 for p in txn_log.directory.glob("*.txnindex")
    )

    # Before the horizon nothing changes; after it the markers are gone.
    clock.now_ms += DELETE_RETENTION_MS - 1
    assert not cleaner.tombstones_due(txn_log, clock.now_ms)
    w.plain(b"z", b"1")  # new dirty data: a pass happens, before the horizon
    seal(txn_log)
    assert cleaner.clean(txn_log) is not None
    assert {o for o, _, _ in markers(txn_log)} >= {1, 4}
    clock.now_ms += 1
    assert cleaner.tombstones_due(txn_log, clock.now_ms)
    cleaner.clean(txn_log)
    assert {o for o, _, _ in markers(txn_log)}.isdisjoint({1, 4})
    assert latest(read_committed(txn_log)) == {
        b"x": b"3",
        b"y": b"1",
        b"z": b"1",
        b"p7": b"x",
        b"p8": b"x",
    }


def test_a_commit_marker_stays_while_its_transaction_keeps_data(txn_log, clock):
    w = Writer(txn_log)
    w.txn(8, (b"k", b"kept"))  # 0: never superseded
    w.end(8, ControlType.COMMIT)  # 1
    w.txn(8, (b"q", b"q"))  # 8 writes again, so marker 1 is not 8's last batch
    w.end(8, ControlType.COMMIT)
    seal(txn_log)
    cleaner = LogCleaner(clock=clock)
    for _ in range(3):
        cleaner.clean(txn_log)
        clock.now_ms += DELETE_RETENTION_MS * 2
    assert (1, ControlType.COMMIT, False) in markers(txn_log)
    assert latest(read_committed(txn_log))[b"k"] == b"kept"


def test_the_marker_that_holds_an_active_producers_epoch_stays(txn_log, clock):
    w = Writer(txn_log)
    w.txn(7, (b"a", b"aborted"))  # 0
    # The coordinator aborts a timed-out transaction with the epoch bumped: the producer's
    # new epoch is written in this marker alone (its data is of the old epoch, and goes).
    w.end(7, ControlType.ABORT, epoch=1)  # 1
    w.txn(8, (b"b", b"aborted too"))  # 2
    w.end(8, ControlType.ABORT)  # 3: 8's last data batch is offset 2, not this marker
    w.plain(b"x", b"1")
    seal(txn_log)
    cleaner = LogCleaner(clock=clock)
    for _ in range(4):
        cleaner.clean(txn_log)
        clock.now_ms += DELETE_RETENTION_MS * 2
    values = [r.value for _, d in txn_log.batches() for r in decode_records(d)]
    assert b"aborted" not in values and b"aborted too" not in values
    assert [(o, c) for o, c, _ in markers(txn_log)] == [(1, ControlType.ABORT)]


def test_cleaning_never_passes_an_open_transaction(txn_log, clock):
    w = Writer(txn_log)
    w.txn(7, (b"a", b"aborted"))  # 0
    w.end(7, ControlType.ABORT)  # 1
    seal(txn_log)
    w.txn(8, (b"b", b"open"))  # 2: stays open
    w.txn(9, (b"c", b"aborted-later"))  # 3
    w.end(9, ControlType.ABORT)  # 4: above the LSO
    seal(txn_log)
    assert txn_log.last_stable_offset == 2
    LogCleaner(clock=clock).clean(txn_log)
    values = [r.value for _, d in txn_log.batches() for r in decode_records(d)]
    assert b"aborted" not in values
    assert b"open" in values and b"aborted-later" in values
    assert [t.producer_id for t in txn_log.collect_aborted_transactions(0, 5)] == [7, 9]


def _random_history(w: Writer, rng: random.Random, steps: int) -> None:
    open_txns: set[int] = set()
    for _ in range(steps):
        roll = rng.random()
        key = b"k%d" % rng.randrange(6)
        value = None if rng.random() < 0.1 else b"v%d" % rng.randrange(1000)
        pid = rng.choice([7, 8, 9])
        if roll < 0.3:
            w.plain(key, value)
        elif roll < 0.75:
            w.txn(pid, (key, value))
            open_txns.add(pid)
        elif open_txns:
            pid = rng.choice(sorted(open_txns))
            w.end(pid, rng.choice([ControlType.ABORT, ControlType.COMMIT]))
            open_txns.discard(pid)
    for pid in sorted(open_txns):
        w.end(pid, rng.choice([ControlType.ABORT, ControlType.COMMIT]))


@pytest.mark.parametrize("seed", range(12))
def test_read_committed_over_a_cleaned_log_is_unchanged(tmp_path: Path, seed):
    rng = random.Random(seed)
    clock = ManualClock(now_ms=T0_MS)
    config = TopicConfig(
        cleanup_policy="compact",
        file_delete_delay_ms=0,
        segment_bytes=rng.choice([250, 400, 1000]),
        delete_retention_ms=DELETE_RETENTION_MS,
    )
    log = Log(tmp_path / "t-0", config, clock=clock)
    try:
        w = Writer(log)
        _random_history(w, rng, steps=120)
        seal(log)
        expected = latest(read_committed(log))
        cleaner = LogCleaner(clock=clock)
        for _ in range(5):
            cleaner.clean(log)
            assert latest(read_committed(log)) == expected
            clock.now_ms += DELETE_RETENTION_MS
        offsets = {r.offset for _, d in log.batches() for r in decode_records(d)}
        assert not offsets & w.aborted, "aborted records survived cleaning"
        end = log.log_end_offset
        log.close()
        # A restart that replays the cleaned log from its start (no snapshot) finds no
        # transaction open, and the same committed view.
        for path in (tmp_path / "t-0").glob("*.snapshot"):
            path.unlink()
        log = Log(tmp_path / "t-0", config, clock=clock, recovery_point=0, high_watermark=end)
        assert log.first_unstable_offset() is None
        assert latest(read_committed(log)) == expected
    finally:
        log.close()


# -- retention --------------------------------------------------------------------------------


def test_retention_under_an_open_transaction_keeps_the_lso_and_the_index_consistent(make_log):
    """As Kafka: retention is bounded by the high watermark, not held back by an open
    transaction; the LSO then never falls below the log start, and the entries of the
    aborted transactions whose markers remain are still found."""
    log = make_log(clock=ManualClock(now_ms=T0_MS), segment_bytes=300, file_delete_delay_ms=0)
    w = Writer(log)
    w.txn(7, (b"a", b"aborted"))  # 0: its marker lands in a later segment
    w.txn(8, (b"b", b"open"))  # 1: stays open
    for n in range(6):
        w.plain(b"p", b"%d" % n)
    abort_at = w.end(7, ControlType.ABORT)
    for n in range(4):
        w.plain(b"q", b"%d" % n)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 1
    # Everything below the segment holding 7's marker goes (DeleteRecords, or time retention).
    marker_segment = [s for s in log.segments() if s.base_offset <= abort_at][-1]
    assert marker_segment.base_offset > 1
    log.advance_log_start_offset(marker_segment.base_offset)
    assert log.delete_old_segments() > 0
    log.delete_expired_files(force=True)
    assert log.segments()[0] is marker_segment
    assert log.last_stable_offset == log.log_start_offset  # never below the log start
    kept_entries = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    assert [(t.producer_id, t.last_offset) for t in kept_entries] == [(7, abort_at)]
    for path in log.directory.glob("*.txnindex"):
        base = int(path.name.split(".")[0])
        assert base >= log.segments()[0].base_offset, "an index outlived its segment"
    w.end(8, ControlType.COMMIT)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.log_end_offset
