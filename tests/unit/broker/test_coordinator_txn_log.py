"""A coordinator's transactional batch in a real log (TxnOffsetCommit's): the log takes it from the
coordinator without a sequence, refuses it from a client and from a fenced producer epoch, keeps
the transaction open (the LSO) until the marker; and ``ReplicaCoordinatorLog.read_all`` yields
its records with the producer id and the markers, in log order, for a loading shard."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from odradek.broker.group_coordinator import ReplicaCoordinatorLog
from odradek.coordinator.runtime import LoggedMarker, LoggedRecord
from odradek.errors import ErrorCode, InvalidRecordError
from odradek.storage.control import ControlType, encode_marker
from odradek.storage.log import Log
from odradek.storage.producer_state import InvalidProducerEpochError
from odradek.storage.records import Record, encode_batch
from odradek.storage.validator import AppendOrigin

NOW = 1_700_000_000_000


def offsets_batch(producer_id: int = -1, epoch: int = -1, count: int = 2) -> bytes:
    """What the coordinator runtime writes: keyed records, a producer's without a sequence."""
    records = [Record(i, NOW, b"key-%d" % i, b"value") for i in range(count)]
    transactional = producer_id >= 0
    return encode_batch(
        records,
        base_offset=0,
        producer_id=producer_id,
        producer_epoch=epoch,
        is_transactional=transactional,
    )


def marker(producer_id: int, control: ControlType, epoch: int = 0) -> bytes:
    return encode_marker(
        control,
        producer_id=producer_id,
        producer_epoch=epoch,
        coordinator_epoch=1,
        timestamp_ms=NOW,
    )


def as_coordinator(log: Log, batch: bytes) -> None:
    log.append(batch, origin=AppendOrigin.COORDINATOR, leader_epoch=0)


def test_a_coordinators_transactional_batch_opens_a_transaction_until_its_marker(make_log):
    log = make_log(cleanup_policy=("compact",))
    as_coordinator(log, offsets_batch())  # 0, 1
    as_coordinator(log, offsets_batch(7, 2))  # 2, 3: producer 7's, pending
    as_coordinator(log, offsets_batch())  # 4, 5
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 2
    log.append_as_coordinator(marker(7, ControlType.COMMIT, epoch=2), leader_epoch=0)  # 6
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 7


def test_clients_may_not_write_it_and_a_fenced_epoch_may_not_either(make_log):
    log = make_log()
    with pytest.raises(InvalidRecordError):  # a client's batch of a producer needs a sequence
        log.append(offsets_batch(7, 0))
    as_coordinator(log, offsets_batch(7, 3))
    with pytest.raises(InvalidProducerEpochError) as fenced:
        as_coordinator(log, offsets_batch(7, 2))
    assert fenced.value.error_code == ErrorCode.invalid_producer_epoch
    as_coordinator(log, offsets_batch(7, 3))  # the same epoch again: the same transaction
    assert log.log_end_offset == 4


def test_read_all_yields_records_with_their_producer_and_the_markers_in_order(make_log):
    log = make_log()
    as_coordinator(log, offsets_batch())  # 0, 1
    as_coordinator(log, offsets_batch(7, 0))  # 2, 3
    as_coordinator(log, offsets_batch(8, 0, count=1))  # 4
    log.append_as_coordinator(marker(8, ControlType.ABORT), leader_epoch=0)  # 5
    log.append_as_coordinator(marker(7, ControlType.COMMIT), leader_epoch=0)  # 6
    as_coordinator(log, offsets_batch(count=1))  # 7
    replicas = SimpleNamespace(get_partition=lambda topic, partition: SimpleNamespace(log=log))
    entries = list(ReplicaCoordinatorLog(replicas).read_all(0))  # type: ignore[arg-type]
    assert [
        (e.offset, e.producer_id, e.committed)
        if isinstance(e, LoggedMarker)
        else (e.offset, e.producer_id, e.key)
        for e in entries
    ] == [
        (0, -1, b"key-0"),
        (1, -1, b"key-1"),
        (2, 7, b"key-0"),
        (3, 7, b"key-1"),
        (4, 8, b"key-0"),
        (5, 8, False),
        (6, 7, True),
        (7, -1, b"key-0"),
    ]
    assert all(isinstance(e, LoggedRecord | LoggedMarker) for e in entries)
