"""Compaction keeps each key's latest record at its offset, never blocks appends, swaps safely."""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from odradek.common.clock import ManualClock
from odradek.config.topic import TopicConfig
from odradek.storage.batch import DELETE_HORIZON_MASK, BatchHeader, with_delete_horizon
from odradek.storage.cleaner import LogCleaner, dirty_ratio
from odradek.storage.compression import Compression
from odradek.storage.files import SWAP_SUFFIX
from odradek.storage.log import Log
from odradek.storage.records import Record, decode_records, encode_batch
from odradek.storage.segment import LogSegment
from odradek.storage.validator import AppendOrigin
from support.waiting import wait_until

T0_MS = 1_700_000_000_000  # the fake clock's start; records carry timestamps near it
CODECS = list(Compression)

KeyValue = tuple[bytes, bytes | None]


class Crash(BaseException):
    """The process dying at this instant: nothing after it runs, not even ``except Exception``."""


def compacted(**overrides: object) -> dict[str, object]:
    """A compacted topic whose replaced segments leave the disk at once."""
    return {"cleanup_policy": "compact", "file_delete_delay_ms": 0, **overrides}


def records_of(log: Log) -> list[Record]:
    return [record for _, data in log.batches() for record in decode_records(data)]


def latest_values(log: Log) -> dict[bytes | None, bytes | None]:
    return {record.key: record.value for record in records_of(log)}


def replay(written: dict[int, KeyValue]) -> dict[bytes, bytes | None]:
    return {key: value for _, (key, value) in sorted(written.items())}


def append(
    log: Log, kafka_batch: Callable[..., bytes], records: list[KeyValue], **kwargs: object
) -> dict[int, KeyValue]:
    """Append one batch; the records by the offsets they got."""
    info = log.append(kafka_batch(records, **kwargs))
    return {info.first_offset + n: kv for n, kv in enumerate(records)}


def seal(log: Log) -> int:
    """Roll and commit everything written: all of it becomes cleanable. Returns the LEO."""
    log.roll()
    return log.update_high_watermark(log.log_end_offset)


def write_history(
    log: Log,
    kafka_batch: Callable[..., bytes],
    rng: random.Random,
    *,
    batches: int,
    keys: int,
    codec: int = 0,
    timestamp_ms: int = T0_MS - 60_000,
) -> dict[int, KeyValue]:
    """Batches of 1-12 records over a small key space: every key is overwritten many times."""
    written: dict[int, KeyValue] = {}
    for n in range(batches):
        records = [
            (b"key-%02d" % rng.randrange(keys), b"value-%d-%d|" % (n, i) * rng.randint(1, 4))
            for i in range(rng.randint(1, 12))
        ]
        written |= append(log, kafka_batch, records, codec=codec, timestamp_ms=timestamp_ms + n)
    return written


def compact_a_history(
    make_log: Callable[..., Log], kafka_batch: Callable[..., bytes], codec: int
) -> tuple[Log, dict[int, KeyValue], dict[int, bytes], int]:
    """A multi-segment compacted log with a non-empty active segment, cleaned once.

    Returns the log, every record written by offset, the batches before cleaning by base
    offset, and where the cleanable range ended (the active segment's base offset).
    """
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted(segment_bytes=1024))
    rng = random.Random(7)  # the same records for every codec
    written = write_history(log, kafka_batch, rng, batches=80, keys=25, codec=codec)
    cleanable_end = seal(log)
    written |= write_history(log, kafka_batch, rng, batches=3, keys=25, codec=codec)
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments()) >= 5, "the history must span several segments"
    before = dict(log.batches())
    active = log.segments()[-1]
    active_bytes = active.log_path.read_bytes()

    stats = LogCleaner(clock=clock).clean(log)

    assert stats is not None and stats.records_removed > 0
    assert stats.end_offset == log.cleaner_checkpoint == cleanable_end
    assert log.segments()[-1] is active
    assert active.log_path.read_bytes() == active_bytes, "the active segment was touched"
    return log, written, before, cleanable_end


# -- what a pass keeps -------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_compaction_keeps_exactly_the_latest_record_of_each_key_at_its_offset(
    make_log, kafka_batch, codec
):
    log, written, before, cleanable_end = compact_a_history(make_log, kafka_batch, codec)

    latest_offset = {
        key: offset for offset, (key, _) in sorted(written.items()) if offset < cleanable_end
    }
    kept = [record for record in records_of(log) if record.offset < cleanable_end]
    assert [record.offset for record in kept] == sorted(latest_offset.values())
    for record in kept:
        assert (record.key, record.value) == written[record.offset]
    assert latest_values(log) == replay(written)

    after = dict(log.batches())
    copied = rewritten = 0
    for base_offset, data in after.items():
        header, original = BatchHeader.parse(data), BatchHeader.parse(before[base_offset])
        assert header.last_offset == original.last_offset
        assert header.last_offset_delta == original.last_offset_delta
        assert header.compression == original.compression == codec
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
            original.producer_id,
            original.producer_epoch,
            original.base_sequence,
        )
        if header.records_count == original.records_count:
            assert data == before[base_offset], "a batch nothing was removed from changed"
            copied += 1
        else:
            rewritten += 1
    assert copied and rewritten and len(after) < len(before), "all three cases must occur"
    active_batches = {b: d for b, d in before.items() if b >= cleanable_end}
    assert {b: d for b, d in after.items() if b >= cleanable_end} == active_batches


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_readers_step_over_the_gaps_compaction_leaves(make_log, kafka_batch, codec):
    log, _, _, _ = compact_a_history(make_log, kafka_batch, codec)
    headers = [BatchHeader.parse(data) for _, data in log.batches()]

    for offset in range(log.log_start_offset, log.log_end_offset):
        fetched = log.read(offset, 1 << 20).records
        assert fetched is not None
        first = BatchHeader.parse(fetched.read_bytes())
        expected = next(h for h in headers if h.last_offset >= offset)
        assert first.base_offset == expected.base_offset, f"read from {offset}"

    # A consumer's fetch loop, decoded by kafka-python: its position moves to a batch's
    # next offset, which the kept last_offset_delta makes land past the compacted records.
    position, consumed = 0, []
    while position < log.log_end_offset:
        records = MemoryRecords(log.read(position, 512).records.read_bytes())
        while (batch := records.next_batch()) is not None:
            assert batch.validate_crc()
            consumed += [(record.offset, record.key, record.value) for record in batch]
            position = batch.next_offset
    offsets = [offset for offset, _, _ in consumed]
    assert offsets == sorted(set(offsets))
    assert consumed == [(r.offset, r.key, r.value) for r in records_of(log)]


# -- tombstones: the delete horizon (KIP-534) ----------------------------------------------


RETENTION_MS = 60_000


def horizons(log: Log) -> dict[int, int]:
    """Base offset -> delete horizon of every batch that carries one."""
    return {
        base_offset: header.base_timestamp
        for base_offset, data in log.batches()
        for header in [BatchHeader.parse(data)]
        if header.attributes & DELETE_HORIZON_MASK
    }


def kafka_python_records(log: Log) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record, as kafka-python decodes them."""
    out = []
    for _, data in log.batches():
        batch = DefaultRecordBatch(data)
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    return out


def test_a_tombstone_is_kept_delete_retention_ms_from_when_the_cleaner_first_kept_it(
    make_log, kafka_batch
):
    """Not from its CreateTime: a tombstone produced with an old timestamp is not dropped at once,
    so a consumer that read the value it deletes still gets to see it."""
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted(delete_retention_ms=RETENTION_MS))
    old_ms = T0_MS - 10 * RETENTION_MS  # a producer replaying old data
    append(log, kafka_batch, [(b"gone", b"v1"), (b"kept", b"v1")], timestamp_ms=old_ms)
    records = [(b"other", b"x"), (b"gone", None), (b"more", b"y")]
    append(log, kafka_batch, records, timestamp_ms=[old_ms + 1, old_ms + 2, old_ms + 3])
    seal(log)
    cleaner = LogCleaner(lambda: [log], clock=clock)

    assert cleaner.clean_dirtiest() is not None  # the first pass keeps it, with a horizon
    assert kafka_python_records(log) == [
        (1, old_ms, b"kept", b"v1"),
        (2, old_ms + 1, b"other", b"x"),
        (3, old_ms + 2, b"gone", None),
        (4, old_ms + 3, b"more", b"y"),
    ]
    assert horizons(log) == {2: T0_MS + RETENTION_MS}

    clock.now_ms = T0_MS + RETENTION_MS - 1
    assert cleaner.clean_dirtiest() is None  # no dirty data and no horizon reached: no pass
    assert len(records_of(log)) == 4

    clock.now_ms = T0_MS + RETENTION_MS  # no new data, but the horizon makes the log cleanable
    stats = cleaner.clean_dirtiest()
    assert stats is not None and stats.records_removed == 1
    assert kafka_python_records(log) == [
        (1, old_ms, b"kept", b"v1"),
        (2, old_ms + 1, b"other", b"x"),
        (4, old_ms + 3, b"more", b"y"),
    ]
    assert horizons(log) == {}  # no tombstone waits any more...
    assert cleaner.clean_dirtiest() is None  # ...so no further pass


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_a_batch_with_a_delete_horizon_keeps_its_record_timestamps(
    make_log, kafka_batch, codec, timestamp_type
):
    clock = ManualClock(now_ms=T0_MS)
    config = compacted(delete_retention_ms=RETENTION_MS, message_timestamp_type=timestamp_type)
    log = make_log(clock=clock, **config)
    timestamps = [T0_MS - 5_000, T0_MS - 7_000, T0_MS - 1_000, T0_MS - 3_000]
    records = [(b"a", b"1"), (b"b", None), (b"c", b"3" * 200), (b"d", None)]
    append(log, kafka_batch, records, codec=codec, timestamp_ms=timestamps)
    seal(log)
    before = kafka_python_records(log)
    [(_, original)] = list(log.batches())

    assert LogCleaner(clock=clock).clean(log) is not None

    [(_, data)] = list(log.batches())
    header, original_header = BatchHeader.parse(data), BatchHeader.parse(original)
    assert header.attributes == original_header.attributes | DELETE_HORIZON_MASK
    assert header.base_timestamp == T0_MS + RETENTION_MS
    assert header.max_timestamp == original_header.max_timestamp
    assert header.last_offset_delta == original_header.last_offset_delta
    assert header.compression == codec
    assert kafka_python_records(log) == before
    assert [(r.offset, r.timestamp) for r in records_of(log)] == [(o, t) for o, t, _, _ in before]
    if timestamp_type == "CreateTime":
        assert [t for _, t, _, _ in before] == timestamps
    # ListOffsets by time still finds each record by its own timestamp.
    found = log.offset_for_timestamp(T0_MS - 2_000)
    assert found is not None and found.offset == (2 if timestamp_type == "CreateTime" else 0)


def test_a_later_pass_keeps_the_horizon_the_first_one_set(make_log, kafka_batch):
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted(delete_retention_ms=RETENTION_MS))
    append(log, kafka_batch, [(b"a", b"1"), (b"gone", None)], timestamp_ms=T0_MS - 100)
    seal(log)
    cleaner = LogCleaner(clock=clock)
    assert cleaner.clean(log) is not None
    assert horizons(log) == {0: T0_MS + RETENTION_MS}

    clock.now_ms = T0_MS + RETENTION_MS // 2  # "a" is overwritten: its old record goes...
    append(log, kafka_batch, [(b"a", b"2")], timestamp_ms=clock.now_ms)
    seal(log)
    stats = cleaner.clean(log)
    assert stats is not None and stats.records_removed == 1
    assert horizons(log) == {0: T0_MS + RETENTION_MS}  # ...the tombstone's horizon stays

    clock.now_ms = T0_MS + RETENTION_MS
    assert cleaner.clean(log) is not None
    assert [(r.key, r.value) for r in records_of(log)] == [(b"a", b"2")]


def test_after_a_restart_pending_horizons_are_read_from_the_batch_headers(make_log, kafka_batch):
    clock = ManualClock(now_ms=T0_MS)
    config = compacted(delete_retention_ms=RETENTION_MS)
    log = make_log(clock=clock, **config)
    append(log, kafka_batch, [(b"gone", b"v"), (b"kept", b"v")], timestamp_ms=T0_MS)
    append(log, kafka_batch, [(b"gone", None)], timestamp_ms=T0_MS)
    seal(log)
    assert LogCleaner(clock=clock).clean(log) is not None
    log.close()

    reopened = Log(log.directory, TopicConfig(**config), clock=clock, cleaner_checkpoint=3)
    try:
        reopened.update_high_watermark(reopened.log_end_offset)
        cleaner = LogCleaner(lambda: [reopened], clock=clock)  # a new process: knows nothing
        clock.now_ms = T0_MS + RETENTION_MS - 1
        assert cleaner.clean_dirtiest() is None
        clock.now_ms = T0_MS + RETENTION_MS
        assert cleaner.clean_dirtiest() is not None
        assert [(r.key, r.value) for r in records_of(reopened)] == [(b"kept", b"v")]
    finally:
        reopened.close()


def test_min_compaction_lag_holds_back_recent_segments(make_log, kafka_batch):
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted(min_compaction_lag_ms=10_000))
    append(
        log, kafka_batch, [(b"a", b"1"), (b"a", b"2"), (b"b", b"1")], timestamp_ms=T0_MS - 20_000
    )
    log.roll()
    append(log, kafka_batch, [(b"a", b"3"), (b"a", b"4")], timestamp_ms=T0_MS - 5_000)
    seal(log)
    recent = log.segments()[1]
    recent_bytes = recent.log_path.read_bytes()
    cleaner = LogCleaner(clock=clock)

    assert cleaner.clean(log) is not None
    # The recent segment is neither rewritten nor in the offset map: a@1 survives for now.
    assert [r.offset for r in records_of(log)] == [1, 2, 3, 4]
    assert recent.log_path.read_bytes() == recent_bytes
    assert log.cleaner_checkpoint == recent.base_offset

    clock.now_ms = T0_MS + 5_000  # now the second segment is 10 s old
    assert cleaner.clean(log) is not None
    assert [(r.offset, r.key, r.value) for r in records_of(log)] == [
        (2, b"b", b"1"),
        (4, b"a", b"4"),
    ]


def test_data_above_the_high_watermark_is_not_cleaned(make_log, kafka_batch):
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted())
    for n in range(3):
        append(log, kafka_batch, [(b"k", b"%d-0" % n), (b"k", b"%d-1" % n)], timestamp_ms=T0_MS)
        log.roll()
    uncommitted = log.segments()[1]
    log.update_high_watermark(uncommitted.base_offset + 1)  # inside the second segment
    untouched = {s.base_offset: s.log_path.read_bytes() for s in log.segments()[1:]}

    assert LogCleaner(clock=clock).clean(log) is not None

    assert {s.base_offset: s.log_path.read_bytes() for s in log.segments()[1:]} == untouched
    assert log.cleaner_checkpoint == uncommitted.base_offset
    assert [(r.offset, r.value) for r in records_of(log)] == [
        (1, b"0-1"),
        (2, b"1-0"),
        (3, b"1-1"),
        (4, b"2-0"),
        (5, b"2-1"),
    ]


def test_a_full_offset_map_leaves_later_tombstones_for_the_next_pass(make_log, kafka_batch):
    """Past what the map covers a tombstone must not go: the value it deletes would return."""
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted(delete_retention_ms=1_000))
    append(log, kafka_batch, [(b"k", b"v1"), (b"a", b"1")], timestamp_ms=T0_MS - 10_000)
    log.roll()
    append(log, kafka_batch, [(b"b", b"1"), (b"c", b"1")], timestamp_ms=T0_MS - 10_000)
    log.roll()
    append(log, kafka_batch, [(b"k", None)], timestamp_ms=T0_MS - 10_000)
    seal(log)
    cleaner = LogCleaner(clock=clock, max_map_entries=2)

    while log.cleaner_checkpoint < log.log_end_offset:
        assert cleaner.clean(log) is not None
        assert latest_values(log).get(b"k") is None, "a deleted key came back"

    clock.now_ms += 1_000  # the tombstone's delete horizon
    assert cleaner.clean(log) is not None
    assert latest_values(log) == {b"a": b"1", b"b": b"1", b"c": b"1"}


def test_cleaned_segments_fit_their_indexes(make_log, kafka_batch):
    """Many small segments (rolled because their indexes filled) are not merged past them."""
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted(segment_index_bytes=120, index_interval_bytes=0))
    written: dict[int, KeyValue] = {}
    for n in range(400):
        record = (b"k%d" % (n % 50), b"v%d" % n)
        written |= append(log, kafka_batch, [record], timestamp_ms=T0_MS - 10_000 + n)
    seal(log)
    assert len(log.segments()) > 10

    assert LogCleaner(clock=clock).clean(log) is not None

    assert latest_values(log) == replay(written)
    assert len(records_of(log)) == 50
    for segment in log.segments():  # index.interval.bytes=0: every batch but the first
        batches = len(list(segment.batches_from(0)))
        assert segment.offset_index.entries == max(batches - 1, 0), segment
    log.close()
    reopened = Log(log.directory, log.config, clock=clock)
    try:
        assert latest_values(reopened) == replay(written)
    finally:
        reopened.close()


def test_a_checkpoint_beyond_the_log_end_is_reset_to_the_log_start(make_log, kafka_batch):
    """As Kafka: after a truncation below it, the data written again is dirty, not clean."""
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted())
    for n in range(10):
        append(log, kafka_batch, [(b"k%d" % n, b"old")], timestamp_ms=T0_MS)
    seal(log)
    cleaner = LogCleaner(clock=clock)
    assert cleaner.clean(log) is not None
    assert log.cleaner_checkpoint == 10

    log.truncate_to(2)  # a follower diverging from its new leader
    written = {0: (b"k0", b"old"), 1: (b"k1", b"old")}
    for n in range(4):
        written |= append(log, kafka_batch, [(b"again", b"%d" % n)], timestamp_ms=T0_MS)
    seal(log)
    assert log.log_end_offset < log.cleaner_checkpoint

    assert cleaner.clean(log) is not None
    assert [(r.offset, r.key, r.value) for r in records_of(log)] == [
        (0, b"k0", b"old"),
        (1, b"k1", b"old"),
        (5, b"again", b"3"),
    ]


def test_the_swap_renames_are_fsynced_in_the_directory_without_the_lock(
    make_log, kafka_batch, disk
):
    """Before a pass counts as done (its checkpoint moves), its renames survive a power cut."""
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, file_ops=disk, **compacted())
    for n in range(6):
        append(log, kafka_batch, [(b"k", b"%d" % n)], timestamp_ms=T0_MS)
    seal(log)
    events: list[str] = []

    def recording_fsync(call):
        events.append(f"fsync {call.path}{' under the lock' if log._lock._is_owned() else ''}")

    disk.before("fsync", recording_fsync)
    disk.before("replace", lambda call: events.append("rename"))
    assert LogCleaner(clock=clock).clean(log) is not None

    last_rename = max(n for n, event in enumerate(events) if event == "rename")
    assert events[last_rename + 1 :] == [f"fsync {log.directory}"]
    assert not [event for event in events if "under the lock" in event]


# -- cleaning alongside the broker ---------------------------------------------------------


def test_cleaning_does_not_block_appends(make_log, kafka_batch, monkeypatch):
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted(segment_bytes=64 * 1024))
    written: dict[int, KeyValue] = {}
    for n in range(1000):
        records = [(b"key-%03d" % ((n * 20 + i) % 500), b"old-%d" % n) for i in range(20)]
        written |= append(log, kafka_batch, records, timestamp_ms=T0_MS)
    cleanable_end = seal(log)
    segments_before = len(log.segments())

    # Hold the cleaner inside its pass until the broker thread has appended and rolled: a
    # cleaner holding the log's lock across its work would make this wait time out.
    in_pass, resume = threading.Event(), threading.Event()
    clean_group = LogCleaner._clean_group

    def held_clean_group(self, *args):
        in_pass.set()
        assert resume.wait(10)
        return clean_group(self, *args)

    monkeypatch.setattr(LogCleaner, "_clean_group", held_clean_group)
    outcome: dict[str, object] = {}
    thread = threading.Thread(
        target=lambda: outcome.update(stats=LogCleaner(clock=clock).clean(log))
    )
    thread.start()
    assert in_pass.wait(10)

    def produce(n: int) -> None:
        records = [(b"key-%03d" % (n % 500), b"new-%d" % n), (b"live-%d" % n, b"x")]
        written.update(append(log, kafka_batch, records, timestamp_ms=T0_MS))

    end_before = log.log_end_offset
    for n in range(50):
        produce(n)
    log.roll()
    assert log.log_end_offset == end_before + 100  # all while the cleaner was mid-pass
    resume.set()
    n = 50
    started = time.monotonic()
    while thread.is_alive() and time.monotonic() - started < 30:
        produce(n)
        n += 1
    thread.join(30)

    assert not thread.is_alive()
    assert n > 50 and len(log.segments()) > segments_before
    stats = outcome["stats"]
    assert stats is not None and stats.end_offset == cleanable_end
    latest = latest_values(log)
    assert latest == replay(written)
    assert all(b"live-%d" % i in latest for i in range(n))
    cleaned_keys = [r.key for r in records_of(log) if r.offset < cleanable_end]
    assert len(cleaned_keys) == len(set(cleaned_keys)) == 500


def test_a_concurrent_retention_makes_the_cleaner_abandon_its_work(
    make_log, kafka_batch, monkeypatch
):
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted())
    for n in range(4):
        append(log, kafka_batch, [(b"k", b"%d" % n), (b"j", b"%d" % n)], timestamp_ms=T0_MS)
        log.roll()
    seal(log)
    before = dict(log.batches())
    clean_group = LogCleaner._clean_group

    def clean_group_then_retention(self, target, group, *args):
        cleaned = clean_group(self, target, group, *args)
        # Meanwhile, on the broker's thread: DeleteRecords and retention remove a segment.
        target.advance_log_start_offset(target.segments()[1].base_offset)
        assert target.delete_old_segments() == 1
        return cleaned

    monkeypatch.setattr(LogCleaner, "_clean_group", clean_group_then_retention)
    assert LogCleaner(clock=clock).clean(log) is None

    assert log.cleaner_checkpoint == 0
    assert not [p.name for p in log.directory.iterdir() if p.suffix in (".cleaned", ".swap")]
    assert dict(log.batches()) == {b: d for b, d in before.items() if b >= 2}
    monkeypatch.undo()
    log.close()
    # The high watermark as the log manager restores it from replication-offset-checkpoint.
    reopened = Log(log.directory, log.config, clock=clock, log_start_offset=2, high_watermark=8)
    try:
        assert dict(reopened.batches()) == {b: d for b, d in before.items() if b >= 2}
        assert LogCleaner(clock=clock).clean(reopened) is not None  # the next pass does it
        assert [(r.key, r.value) for r in records_of(reopened)] == [(b"k", b"3"), (b"j", b"3")]
    finally:
        reopened.close()


# -- crash safety of the swap ----------------------------------------------------------------


def write_anchored_history(log: Log, kafka_batch: Callable[..., bytes]) -> None:
    """Four segments, each keeping a record of its own (so the cleaned one spans them all)."""
    for n in range(4):
        records = [(b"anchor-%d" % n, b"a"), (b"k", b"%d" % n), (b"j", b"%d" % n), (b"k", b"x")]
        append(log, kafka_batch, records, timestamp_ms=T0_MS)
        log.roll()
    append(log, kafka_batch, [(b"k", b"active")], timestamp_ms=T0_MS)
    log.update_high_watermark(log.log_end_offset)


def crash_during_cleaning(
    log: Log, crash_point: str, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    if crash_point == "writing_cleaned":  # before the .cleaned files become .swap
        crash_on_rename_to = SWAP_SUFFIX
    elif crash_point == "after_swap_rename":  # old segments not yet renamed .deleted
        crash_on_rename_to = ".deleted"
    else:  # "before_swap_completed": old segments are .deleted, the .swap not yet renamed
        crash_on_rename_to = ""
    rename = LogSegment.rename_with_suffix

    def rename_or_crash(self, suffix):
        if suffix == crash_on_rename_to:
            raise Crash
        rename(self, suffix)

    monkeypatch.setattr(LogSegment, "rename_with_suffix", rename_or_crash)
    with pytest.raises(Crash):
        LogCleaner(clock=clock).clean(log)
    monkeypatch.undo()


@pytest.mark.parametrize(
    "crash_point", ["writing_cleaned", "after_swap_rename", "before_swap_completed"]
)
def test_a_crash_during_the_swap_leaves_the_log_before_or_after_it(
    tmp_path, make_log, kafka_batch, monkeypatch, crash_point
):
    clock = ManualClock(now_ms=T0_MS)
    config = compacted(file_delete_delay_ms=60_000)  # replaced files linger as .deleted
    reference = make_log("reference-0", clock=clock, **config)
    crashed = make_log("crashed-0", clock=clock, **config)
    write_anchored_history(reference, kafka_batch)
    write_anchored_history(crashed, kafka_batch)
    uncleaned = list(reference.batches())
    assert LogCleaner(clock=clock).clean(reference) is not None
    compacted_batches = list(reference.batches())

    crash_during_cleaning(crashed, crash_point, monkeypatch, clock)
    # What the disk held at the crash, opened by a new broker (no clean shutdown).
    disk = tmp_path / "restarted-0"
    shutil.copytree(crashed.directory, disk)
    names = {p.name for p in disk.iterdir()}
    first = "00000000000000000000"
    if crash_point == "writing_cleaned":
        assert f"{first}.log.cleaned" in names and f"{first}.log" in names
    elif crash_point == "after_swap_rename":
        assert f"{first}.log.swap" in names and f"{first}.log" in names
        assert not any(name.endswith(".deleted") for name in names)
    else:
        assert f"{first}.log.swap" in names and f"{first}.log.deleted" in names

    restarted = Log(disk, TopicConfig(**config), clock=clock)
    try:
        expected = uncleaned if crash_point == "writing_cleaned" else compacted_batches
        assert list(restarted.batches()) == expected
        assert restarted.log_end_offset == reference.log_end_offset
        leftovers = [
            p.name for p in disk.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")
        ]
        assert not leftovers
        info = restarted.append(kafka_batch([(b"k", b"after")], timestamp_ms=T0_MS))
        assert info.first_offset == reference.log_end_offset
    finally:
        restarted.close()


def test_a_crash_after_the_swap_rename_may_keep_a_wholly_compacted_tail_segment(
    tmp_path, make_log, kafka_batch, monkeypatch
):
    """Kafka's limit too: a .swap only tells which old segments it covers by its own offsets.

    When the last old segment of a group lost every record, the .swap ends before it, so a
    crash right after the .swap rename leaves that segment in place. Nothing is lost and no
    offset is doubled; the latest value of every key is right and the next pass removes it.
    """
    clock = ManualClock(now_ms=T0_MS)
    config = compacted(file_delete_delay_ms=60_000, delete_retention_ms=1_000)
    reference = make_log("reference-0", clock=clock, **config)
    crashed = make_log("crashed-0", clock=clock, **config)
    # A tombstone an earlier pass kept, whose delete horizon has passed (copied from a leader).
    expired = with_delete_horizon(
        encode_batch([Record(2, T0_MS - 10_000, b"k", None)], base_offset=2, base_timestamp=T0_MS)
    )
    for each in (reference, crashed):
        append(each, kafka_batch, [(b"k", b"v"), (b"j", b"v")], timestamp_ms=T0_MS - 10_000)
        each.roll()
        each.append(expired, origin=AppendOrigin.REPLICATION)
        seal(each)
    assert LogCleaner(clock=clock).clean(reference) is not None
    assert [(r.key, r.value) for r in records_of(reference)] == [(b"j", b"v")]

    crash_during_cleaning(crashed, "after_swap_rename", monkeypatch, clock)
    disk = tmp_path / "restarted-0"
    shutil.copytree(crashed.directory, disk)
    restarted = Log(disk, TopicConfig(**config), clock=clock)
    try:
        offsets = [r.offset for r in records_of(restarted)]
        assert offsets == sorted(set(offsets))
        live = {k: v for k, v in latest_values(restarted).items() if v is not None}
        assert live == latest_values(reference)
        restarted.update_high_watermark(restarted.log_end_offset)
        assert LogCleaner(clock=clock).clean(restarted) is not None
        assert list(restarted.batches()) == list(reference.batches())
    finally:
        restarted.close()


# -- choosing logs, and the cleaner thread --------------------------------------------------


def test_clean_dirtiest_picks_by_min_cleanable_dirty_ratio(make_log, kafka_batch):
    clock = ManualClock(now_ms=T0_MS)
    mostly_clean = make_log("mostly-clean-0", clock=clock, **compacted())
    for n in range(10):
        append(mostly_clean, kafka_batch, [(b"k%d" % n, b"v")], timestamp_ms=T0_MS)
    seal(mostly_clean)
    assert LogCleaner(clock=clock).clean(mostly_clean) is not None
    append(mostly_clean, kafka_batch, [(b"k0", b"w")], timestamp_ms=T0_MS)
    seal(mostly_clean)
    dirty = make_log("dirty-0", clock=clock, **compacted())
    for n in range(4):
        append(dirty, kafka_batch, [(b"k", b"%d" % n)], timestamp_ms=T0_MS)
    seal(dirty)
    not_compacted = make_log("deleted-0", clock=clock, file_delete_delay_ms=0)
    append(not_compacted, kafka_batch, [(b"k", b"1"), (b"k", b"2")], timestamp_ms=T0_MS)
    seal(not_compacted)
    logs = [mostly_clean, dirty, not_compacted]
    cleaner = LogCleaner(lambda: logs, clock=clock)
    low_ratio = dirty_ratio(mostly_clean)
    assert 0 < low_ratio < 0.5 and dirty_ratio(dirty) == 1.0

    assert cleaner.clean_dirtiest() is not None
    assert dirty.cleaner_checkpoint == dirty.log_end_offset
    assert cleaner.clean_dirtiest() is None  # the rest is below min.cleanable.dirty.ratio 0.5
    assert mostly_clean.cleaner_checkpoint == 10
    assert len(records_of(not_compacted)) == 2

    mostly_clean.update_config(TopicConfig(**compacted(min_cleanable_dirty_ratio=low_ratio)))
    assert cleaner.clean_dirtiest() is not None
    assert latest_values(mostly_clean)[b"k0"] == b"w" and len(records_of(mostly_clean)) == 10


def test_a_dirty_log_it_may_not_clean_yet_does_not_starve_the_others(make_log, kafka_batch):
    # Records written just now, in a log that compacts them only an hour later.
    lagging = make_log("lagging-0", **compacted(min_compaction_lag_ms=3_600_000))
    ready = make_log("ready-0", **compacted())
    for each in (lagging, ready):
        for n in range(4):
            append(each, kafka_batch, [(b"k", b"%d" % n)])
            each.roll()
        seal(each)
    assert dirty_ratio(lagging) == dirty_ratio(ready) == 1.0  # a tie: the first listed wins
    cleaner = LogCleaner(lambda: [lagging, ready])

    assert cleaner.clean_dirtiest() is not None
    assert ready.cleaner_checkpoint == ready.log_end_offset
    assert lagging.cleaner_checkpoint == 0


def test_the_cleaner_thread_compacts_and_stops_promptly(make_log, kafka_batch):
    clock = ManualClock(now_ms=T0_MS)
    log = make_log(clock=clock, **compacted())
    for n in range(5):
        append(log, kafka_batch, [(b"k", b"%d" % n)], timestamp_ms=T0_MS)
    seal(log)
    cleaner = LogCleaner(lambda: [log], clock=clock, backoff_s=0.05)

    cleaner.start()
    wait_until(
        lambda: log.cleaner_checkpoint >= log.log_end_offset, "the log cleaned", 10, poll_s=0.01
    )
    started = time.monotonic()
    cleaner.stop(timeout_s=5)

    assert time.monotonic() - started < 2
    assert cleaner._thread is not None and not cleaner._thread.is_alive()
    assert [(r.offset, r.value) for r in records_of(log)] == [(4, b"4")]


# -- against a model ----------------------------------------------------------------------

WRITES = st.lists(
    st.tuples(
        st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]), st.none() | st.binary(max_size=16)
    ),
    min_size=1,
    max_size=80,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    writes=WRITES,
    batch_sizes=st.lists(st.integers(1, 6), min_size=1, max_size=20),
    first_pass_at=st.floats(0, 1),
    codec=st.sampled_from(CODECS),
)
def test_compaction_agrees_with_replaying_the_writes(
    kafka_batch, writes, batch_sizes, first_pass_at, codec
):
    clock = ManualClock(now_ms=T0_MS)
    config = TopicConfig(**compacted(segment_bytes=512, delete_retention_ms=10**15))
    cleaner = LogCleaner(clock=clock)
    with tempfile.TemporaryDirectory() as directory:
        log = Log(Path(directory) / "t-0", config, clock=clock)
        try:
            written: dict[int, KeyValue] = {}
            first_pass_done = False
            position = n = 0
            while position < len(writes):
                size = batch_sizes[n % len(batch_sizes)]
                n += 1
                written |= append(log, kafka_batch, writes[position : position + size], codec=codec)
                position += size
                if not first_pass_done and position >= first_pass_at * len(writes):
                    seal(log)
                    cleaner.clean(log)
                    first_pass_done = True
            seal(log)
            cleaner.clean(log)

            assert latest_values(log) == replay(written)
            keys = [record.key for record in records_of(log)]
            assert len(keys) == len(set(keys))
        finally:
            log.close()
