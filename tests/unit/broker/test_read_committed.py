"""read_committed on a leader: fetches stop at the last stable offset and name the aborted
transactions of what they return; ListOffsets latest is the LSO; a client's transactional batch
holds the LSO until the coordinator's marker, and clients cannot write markers."""

from __future__ import annotations

import asyncio

import pytest

from odradek.broker.partition import READ_COMMITTED, PartitionState
from odradek.broker.replica_manager import FetchPartitionRequest, ReplicaManager
from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode
from odradek.storage.batch import iter_batches
from odradek.storage.control import ControlType, encode_marker
from odradek.storage.manager import LogManager
from odradek.storage.records import Record, encode_batch
from odradek.storage.validator import AppendOrigin

BROKER = 1
NOW = 1_700_000_000_000


@pytest.fixture
def manager(tmp_path):
    log_manager = LogManager([tmp_path / "disk-0"])
    log_manager.load()
    replicas = ReplicaManager(BROKER, log_manager)
    yield replicas
    log_manager.shutdown()


def lead(replicas: ReplicaManager):
    state = PartitionState(leader=BROKER, leader_epoch=0, isr=(BROKER,), replicas=(BROKER,))
    replicas.become_leader_or_follower("t", 0, state, TopicConfig())
    return replicas.get_partition("t", 0)


def txn_batch(pid: int, count: int = 2) -> bytes:
    return encode_batch(
        [Record(i, NOW, b"k", b"v") for i in range(count)],
        base_offset=0,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def plain(count: int = 1) -> bytes:
    return encode_batch([Record(i, NOW, b"k", b"p") for i in range(count)], base_offset=0)


def marker(pid: int, control: ControlType) -> bytes:
    return encode_marker(
        control, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp_ms=NOW
    )


def fetch(manager, offset=0, isolation_level=READ_COMMITTED):
    (result,) = asyncio.run(
        manager.fetch(
            [FetchPartitionRequest("t", 0, offset, 1 << 20)],
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=isolation_level,
        )
    )
    return result


def test_read_committed_stops_at_the_lso_and_names_aborted_transactions(manager):
    partition = lead(manager)
    log = partition.log
    asyncio.run(manager.append_records(1, {("t", 0): plain(2)}))  # 0..1
    log.append_validated(log.validate(txn_batch(7), origin=AppendOrigin.COORDINATOR))  # 2..3
    asyncio.run(manager.append_records(1, {("t", 0): plain()}))  # 4
    assert log.high_watermark == 5
    result = fetch(manager)
    assert result.last_stable_offset == 2 and result.high_watermark == 5
    assert [h.base_offset for _, h in iter_batches(result.records.read_bytes())] == [0]
    assert result.aborted_transactions == ()
    uncommitted = fetch(manager, isolation_level=0)
    assert [h.base_offset for _, h in iter_batches(uncommitted.records.read_bytes())] == [0, 2, 4]
    assert manager.list_offsets("t", 0, -1, READ_COMMITTED).offset == 2
    assert manager.list_offsets("t", 0, -1).offset == 5

    log.append_as_coordinator(marker(7, ControlType.ABORT), leader_epoch=0)  # 5
    partition._maybe_increment_high_watermark()
    result = fetch(manager)
    assert result.last_stable_offset == result.high_watermark == 6
    assert [(t.producer_id, t.first_offset) for t in result.aborted_transactions] == [(7, 2)]
    # A transaction spans its first offset to its marker: a fetch from 4 still overlaps it.
    assert [t.producer_id for t in fetch(manager, offset=4).aborted_transactions] == [7]
    asyncio.run(manager.append_records(1, {("t", 0): plain()}))  # 6
    assert fetch(manager, offset=6).aborted_transactions == ()
    assert manager.list_offsets("t", 0, -1, READ_COMMITTED).offset == 7


def test_a_clients_transactional_batch_is_taken_and_holds_the_lso(manager):
    partition = lead(manager)
    results = asyncio.run(manager.append_records(1, {("t", 0): txn_batch(7)}))
    assert results[("t", 0)].error == ErrorCode.none
    partition._maybe_increment_high_watermark()
    assert partition.log.high_watermark == 2 and partition.log.last_stable_offset == 0
    results = asyncio.run(manager.append_records(1, {("t", 0): marker(7, ControlType.COMMIT)}))
    assert results[("t", 0)].error == ErrorCode.invalid_record


def test_the_coordinator_writes_markers_through_the_replica_manager(manager):
    partition = lead(manager)
    log = partition.log
    log.append_validated(log.validate(txn_batch(7), origin=AppendOrigin.COORDINATOR))  # 0..1
    assert partition.log.last_stable_offset == 0
    results = asyncio.run(
        manager.append_records(
            -1, {("t", 0): marker(7, ControlType.COMMIT)}, origin=AppendOrigin.COORDINATOR
        )
    )
    assert results[("t", 0)].error == ErrorCode.none and results[("t", 0)].base_offset == 2
    assert log.last_stable_offset == log.high_watermark == 3
    assert fetch(manager).aborted_transactions == ()
