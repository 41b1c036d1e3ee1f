"""Proves the history checker and the replica comparison flag every anomaly they name, on
synthetic histories and on segment files written by the real storage engine, and pass clean ones."""

from __future__ import annotations

import random

import pytest
from proof.checker import History, analyze, decode_value, encode_value
from proof.replicas import (
    REPLICATION_OFFSET_CHECKPOINT,
    compare_replicas,
    read_replica,
)

from odradek.storage.checkpoint import OffsetCheckpointFile


def v(producer: int, sequence: int) -> bytes:
    return encode_value(producer, sequence, 40)


def clean_history(records: int = 10, partitions: int = 2) -> History:
    """Producer 0 writes ``records`` to each partition; a reader reads all of it to the end."""
    history = History(seed=1)
    for partition in range(partitions):
        for offset in range(records):
            value = v(0, offset * partitions + partition)
            history.record_send(value)
            history.record_ack(partition, offset, value, ack_time_s=offset / 10)
            history.record_read(partition, offset, value)
        history.record_end(partition, records)
    return history


def test_values_say_which_write_they_are():
    assert decode_value(encode_value(3, 1234, 100)) == (3, 1234)
    assert len(encode_value(3, 1234, 100)) == 100
    assert decode_value(encode_value(3, 1234)) == (3, 1234)  # no filler
    assert decode_value(b"garbage") is None
    assert decode_value(None) is None


def test_a_clean_history_is_valid():
    analysis = analyze(clean_history())
    assert analysis.valid, analysis.report()
    assert [p.acknowledged for p in analysis.partitions] == [10, 10]
    assert "history of seed 1: valid" in analysis.report()


def test_an_acknowledged_record_missing_below_later_reads_is_lost():
    history = History(seed=2)
    for offset in range(10):
        history.record_send(v(0, offset))
        history.record_ack(0, offset, v(0, offset), ack_time_s=1.0)
        if offset != 4:
            history.record_read(0, offset, v(0, offset))
    # No end recorded: the read of offset 9 alone shows the reader went past offset 4.
    analysis = analyze(history)
    [partition] = analysis.partitions
    assert [a.offset for a in partition.lost] == [4]
    assert not partition.unread
    assert not analysis.valid
    assert analysis.lost == 1
    assert "lost: p0#4@0/4" in analysis.report()


def test_acknowledged_records_above_the_end_a_reader_reached_are_lost():
    """Today's replicated topic: acks=all answered, the high watermark stuck at 0, so a consumer
    reads the partition to its end at 0 and finds nothing: every acknowledged record is lost."""
    history = History(seed=3)
    for offset in range(5):
        history.record_send(v(0, offset))
        history.record_ack(0, offset, v(0, offset), ack_time_s=0.5)
    history.record_end(0, 0)
    [partition] = analyze(history).partitions
    assert [a.offset for a in partition.lost] == [0, 1, 2, 3, 4]
    assert partition.end == 0


def test_a_read_that_stopped_early_cannot_vouch_for_what_it_did_not_reach():
    history = clean_history(records=10, partitions=1)
    history.ends.clear()
    history.reads = [r for r in history.reads if r.offset < 6]
    [partition] = analyze(history).partitions
    assert not partition.lost
    assert [a.offset for a in partition.unread] == [6, 7, 8, 9]
    assert "NOT to its end" in "\n".join(partition.lines())
    assert not partition.valid


def test_a_value_at_two_offsets_is_duplicated():
    history = clean_history(records=5, partitions=1)
    history.record_read(0, 5, v(0, 4))  # a retry written again
    history.record_end(0, 6)
    [partition] = analyze(history).partitions
    assert partition.duplicated == ((v(0, 4), ((0, 4), (0, 5))),)
    assert not partition.valid


def test_a_value_acknowledged_at_one_offset_and_read_at_another_is_duplicated():
    history = History(seed=4)
    history.record_send(v(0, 0))
    history.record_ack(0, 0, v(0, 0), ack_time_s=0.1)
    history.record_read(0, 1, v(0, 0))
    history.record_end(0, 2)
    [partition] = analyze(history).partitions
    assert partition.duplicated == ((v(0, 0), ((0, 0), (0, 1))),)
    assert not partition.lost  # it was read, only somewhere else


def test_one_offset_with_two_values_is_inconsistent():
    history = History(seed=5)
    for value in (v(0, 0), v(1, 0)):
        history.record_send(value)
    history.record_ack(0, 0, v(0, 0), ack_time_s=0.1)  # acknowledged by the old leader
    history.record_ack(0, 1, v(1, 0), ack_time_s=0.2)
    history.record_read(0, 0, v(1, 0))  # a diverged replica served offset 0 with another value
    history.record_end(0, 1)
    [partition] = analyze(history).partitions
    assert partition.inconsistent_offsets == ((0, tuple(sorted((v(0, 0), v(1, 0))))),)
    assert [a.value for a in partition.lost] == [v(0, 0)]


def test_a_producers_records_out_of_order_are_reordered():
    history = History(seed=6)
    for offset, sequence in enumerate([0, 2, 1, 3]):
        history.record_send(v(7, sequence))
        history.record_read(0, offset, v(7, sequence))
        history.record_read(0, offset + 10, v(8, offset))  # another producer, in order
        history.record_send(v(8, offset))
    history.record_end(0, 14)
    [partition] = analyze(history).partitions
    assert partition.reordered == ((7, 1, 2, 2, 1),)
    assert "producer 7: sequence 2 at offset 1 before sequence 1 at offset 2" in "\n".join(
        partition.lines()
    )


def test_a_value_nobody_sent_is_unexpected():
    history = clean_history(records=3, partitions=1)
    history.record_read(0, 3, b"corrupted bytes")
    history.record_end(0, 4)
    [partition] = analyze(history).partitions
    assert [r.offset for r in partition.unexpected] == [3]


def test_failed_writes_may_appear_or_not():
    history = clean_history(records=3, partitions=1)
    for sequence in (100, 101):
        history.record_send(v(0, sequence))
        history.record_failure(v(0, sequence), "REQUEST_TIMED_OUT")
    history.record_read(0, 3, v(0, 100))  # written after all; 101 never was
    history.record_end(0, 4)
    analysis = analyze(history)
    assert analysis.valid, analysis.report()
    assert analysis.failed_writes == 2
    assert "2 writes failed (indeterminate, allowed): REQUEST_TIMED_OUT 2" in analysis.report()


def test_the_report_names_the_longest_wait_between_acknowledgements():
    history = History(seed=0)
    for offset, ack_time_s in enumerate((1.0, 1.5, 21.5, 22.0)):
        history.record_send(v(0, offset))
        history.record_ack(0, offset, v(0, offset), ack_time_s)
    [partition] = analyze(history).partitions
    assert partition.longest_ack_gap == (20.0, 21.5)
    assert "longest wait between acknowledgements: 20.0 s, to 21.5 s" in analyze(history).report()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_report_does_not_depend_on_the_order_events_arrived_in(seed):
    history = clean_history(records=20, partitions=3)
    history.record_read(1, 20, b"noise")
    history.record_end(1, 21)
    shuffled = History(seed=history.seed, replay="ODRADEK_FAULT_SEEDS=1")
    rng = random.Random(seed)
    for name in ("acks", "reads"):
        items = list(getattr(history, name))
        rng.shuffle(items)
        setattr(shuffled, name, items)
    shuffled.sent, shuffled.ends = history.sent, history.ends
    history.replay = shuffled.replay
    assert analyze(shuffled).report() == analyze(history).report()
    assert "replay: ODRADEK_FAULT_SEEDS=1" in analyze(history).report()


# --- replicas, from segment files the storage engine wrote ----------------------------------


BATCHES: dict[tuple[bytes, ...], bytes] = {}


def write_replica(make_log, kafka_batch, name: str, batches: list[list[bytes]], epoch: int = 0):
    """A partition directory holding ``batches`` appended with ``epoch``; the same values give
    the same batch bytes (timestamps included) in every replica of a test."""
    log = make_log(name)
    for values in batches:
        key = tuple(values)
        if key not in BATCHES:
            BATCHES[key] = kafka_batch([(None, value) for value in values], timestamp_ms=1_000)
        log.append_validated(log.validate(BATCHES[key]), leader_epoch=epoch)
    log.flush()
    return log


def log_dir_of(log) -> object:
    return log.directory.parent


def test_identical_replicas_compare_equal_up_to_the_lowest_checkpointed_high_watermark(
    make_log, kafka_batch
):
    batches = [[v(0, i), v(0, i + 1)] for i in range(0, 20, 2)]
    logs = [write_replica(make_log, kafka_batch, f"b{b}/t-0", batches) for b in (1, 2, 3)]
    for log, hw in zip(logs, (20, 16, 20), strict=True):
        OffsetCheckpointFile(log_dir_of(log) / REPLICATION_OFFSET_CHECKPOINT).write({("t", 0): hw})
    replicas = [read_replica(b, [log_dir_of(log)], "t", 0) for b, log in enumerate(logs, 1)]
    result = compare_replicas("t", 0, replicas)
    assert result.identical, result.report()
    assert result.bound == 16
    assert "lowest checkpointed high watermark" in result.report()


def test_a_replica_whose_bytes_differ_below_the_bound_is_reported(make_log, kafka_batch):
    good = write_replica(make_log, kafka_batch, "b1/t-0", [[v(0, 0)], [v(0, 1)]], epoch=3)
    other_epoch = write_replica(make_log, kafka_batch, "b2/t-0", [[v(0, 0)], [v(0, 1)]], epoch=4)
    other_value = write_replica(make_log, kafka_batch, "b3/t-0", [[v(0, 0)], [v(9, 9)]], epoch=3)
    replicas = [
        read_replica(b, [log_dir_of(log)], "t", 0)
        for b, log in ((1, good), (2, other_epoch), (3, other_value))
    ]
    result = compare_replicas("t", 0, replicas, high_watermark=2)
    assert not result.identical
    assert "broker 2 differs from broker 1: batch at offset 0 differs" in result.report()
    assert "broker 3 differs from broker 1: batch at offset 1 differs" in result.report()
    # Above the bound, a replica's uncommitted tail may differ: not compared.
    assert compare_replicas("t", 0, replicas[::2], high_watermark=1).identical


def test_a_replica_that_ends_below_the_bound_or_is_missing_is_reported(
    make_log, kafka_batch, tmp_path
):
    full = write_replica(make_log, kafka_batch, "b1/t-0", [[v(0, 0)], [v(0, 1)], [v(0, 2)]])
    short = write_replica(make_log, kafka_batch, "b2/t-0", [[v(0, 0)]])
    (tmp_path / "empty").mkdir()
    replicas = [
        read_replica(1, [log_dir_of(full)], "t", 0),
        read_replica(2, [log_dir_of(short)], "t", 0),
        read_replica(3, [tmp_path / "empty"], "t", 0),
    ]
    report = compare_replicas("t", 0, replicas, high_watermark=3).report()
    assert "broker 2 ends at offset 1, below 3" in report
    assert "broker 2 differs from broker 1: misses the batches from offset 1" in report
    assert "broker 3 has no directory for the partition" in report


def test_a_torn_tail_stops_the_walk_and_is_named(make_log, kafka_batch):
    log = write_replica(make_log, kafka_batch, "b1/t-0", [[v(0, 0)], [v(0, 1)]])
    log.close()
    [segment] = sorted(log.directory.glob("*.log"))
    with segment.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x01\x00garbage")
    replica = read_replica(1, [log_dir_of(log)], "t", 0)
    assert replica.log_end_offset == 2
    assert replica.torn is not None and "at byte" in replica.torn
    assert compare_replicas("t", 0, [replica], high_watermark=2).identical
    assert "torn" in compare_replicas("t", 0, [replica], high_watermark=3).report()
