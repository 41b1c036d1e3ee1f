"""WriteTxnMarkers on a leader: a marker ends the producer's transaction (the LSO moves), waits
for the ISR, is fenced for an older coordinator epoch, is written even with no transaction open,
settles a __consumer_offsets partition's transactional offsets, answers per partition for
followers and unknown partitions, and is refused off the inter-broker listener."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from kio.schema.write_txn_markers.v1 import request as wire

from odradek.broker.context import DeferredAnswer
from odradek.broker.handlers import write_txn_markers
from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import ReplicaManager
from odradek.common.topics import OFFSETS_TOPIC
from odradek.config.topic import TopicConfig
from odradek.coordinator.errors import CoordinatorLoadInProgressError
from odradek.errors import ErrorCode
from odradek.storage.batch import BatchHeader
from odradek.storage.control import ControlType, read_marker
from odradek.storage.manager import LogManager
from odradek.storage.records import Record, encode_batch
from odradek.storage.validator import AppendOrigin
from support.authorizer import handler_context

BROKER = 1
NOW = 1_700_000_000_000


@pytest.fixture
def replicas(tmp_path):
    log_manager = LogManager([tmp_path / "disk-0"])
    log_manager.load()
    yield ReplicaManager(BROKER, log_manager)
    log_manager.shutdown()


def host(replicas, topic: str, index: int = 0, *, leader: int = BROKER, isr=(BROKER,)):
    state = PartitionState(leader=leader, leader_epoch=0, isr=tuple(isr), replicas=tuple(isr))
    replicas.become_leader_or_follower(topic, index, state, TopicConfig())
    return replicas.get_partition(topic, index)


def open_transaction(partition, pid: int, values=(b"a", b"b")) -> None:
    data = encode_batch(
        [Record(i, NOW, b"k", v) for i, v in enumerate(values)],
        base_offset=0,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    partition.log.append_validated(
        partition.log.validate(data, origin=AppendOrigin.COORDINATOR), leader_epoch=0
    )
    partition._maybe_increment_high_watermark()


class Groups:
    def __init__(self, failures: dict[int, Exception] | None = None):
        self.completed: list[tuple[int, int, bool]] = []
        self.failures = failures or {}

    async def complete_transaction(self, partition: int, producer_id: int, committed: bool):
        if partition in self.failures:
            raise self.failures[partition]
        self.completed.append((partition, producer_id, committed))


def request(*markers) -> wire.WriteTxnMarkersRequest:
    return wire.WriteTxnMarkersRequest(markers=tuple(markers))


def marker(pid: int, partitions: dict[str, list[int]], *, committed=True, coordinator_epoch=5):
    return wire.WritableTxnMarker(
        producer_id=pid,
        producer_epoch=0,
        transaction_result=committed,
        topics=tuple(
            wire.WritableTxnMarkerTopic(name=name, partition_indexes=tuple(indexes))
            for name, indexes in partitions.items()
        ),
        coordinator_epoch=coordinator_epoch,
    )


def call(replicas, req, *, listener="PLAINTEXT", groups=None):
    broker = SimpleNamespace(
        replica_manager=replicas,
        config=SimpleNamespace(effective_inter_broker_listener_name="PLAINTEXT"),
        groups=groups,
    )
    ctx = handler_context(broker, 1, listener=SimpleNamespace(name=listener))

    async def run():
        answer = await write_txn_markers.handle(ctx, req)
        if isinstance(answer, DeferredAnswer):
            answer = await answer.response
        return answer

    response = asyncio.run(asyncio.wait_for(run(), 10))
    return {
        (m.producer_id, t.name, p.partition_index): p.error_code
        for m in response.markers
        for t in m.topics
        for p in t.partitions
    }


def markers_in(partition) -> list[tuple[int, ControlType, int]]:
    found = []
    for _, batch in partition.log.batches(0):
        header = BatchHeader.parse(batch)
        if header.is_control:
            m = read_marker(header, batch)
            found.append((header.producer_id, m.control, m.coordinator_epoch))
    return found


def test_a_commit_marker_ends_the_transaction_and_moves_the_lso(replicas):
    partition = host(replicas, "t")
    open_transaction(partition, 7)
    assert partition.log.last_stable_offset == 0
    errors = call(replicas, request(marker(7, {"t": [0]})))
    assert errors == {(7, "t", 0): ErrorCode.none}
    assert partition.log.last_stable_offset == 3 == partition.log.high_watermark
    assert markers_in(partition) == [(7, ControlType.COMMIT, 5)]


def test_an_abort_marker_lists_the_transaction_as_aborted(replicas):
    partition = host(replicas, "t")
    open_transaction(partition, 7)
    call(replicas, request(marker(7, {"t": [0]}, committed=False)))
    aborted = partition.log.collect_aborted_transactions(0, 3)
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(7, 0)]


def test_an_older_coordinator_epoch_is_fenced(replicas):
    partition = host(replicas, "t")
    open_transaction(partition, 7)
    call(replicas, request(marker(7, {"t": [0]}, coordinator_epoch=5)))
    open_transaction(partition, 7)
    errors = call(replicas, request(marker(7, {"t": [0]}, coordinator_epoch=4)))
    assert errors == {(7, "t", 0): ErrorCode.transaction_coordinator_fenced}
    assert partition.log.last_stable_offset == 3  # the second transaction is still open
    assert markers_in(partition) == [(7, ControlType.COMMIT, 5)]


def test_a_marker_without_an_open_transaction_is_written_anyway(replicas):
    partition = host(replicas, "t")
    errors = call(replicas, request(marker(9, {"t": [0]}, committed=False)))
    assert errors == {(9, "t", 0): ErrorCode.none}
    assert markers_in(partition) == [(9, ControlType.ABORT, 5)]
    assert partition.log.collect_aborted_transactions(0, 1) == []


def test_followers_and_unknown_partitions_answer_for_themselves(replicas):
    led = host(replicas, "t", 0)
    host(replicas, "t", 1, leader=2, isr=(2, BROKER))
    errors = call(replicas, request(marker(7, {"t": [0, 1, 2], "nope": [0, -1]})))
    assert errors == {
        (7, "t", 0): ErrorCode.none,
        (7, "t", 1): ErrorCode.not_leader_or_follower,
        (7, "t", 2): ErrorCode.unknown_topic_or_partition,
        (7, "nope", 0): ErrorCode.unknown_topic_or_partition,
        (7, "nope", -1): ErrorCode.unknown_topic_or_partition,
    }
    assert markers_in(led) == [(7, ControlType.COMMIT, 5)]


def test_the_answer_waits_for_the_isr(replicas, monkeypatch):
    monkeypatch.setattr(write_txn_markers, "MARKER_APPEND_TIMEOUT_MS", 200)
    partition = host(replicas, "t", isr=(BROKER, 2))  # the follower never fetches
    errors = call(replicas, request(marker(7, {"t": [0]})))
    assert errors == {(7, "t", 0): ErrorCode.request_timed_out}
    assert markers_in(partition) == [(7, ControlType.COMMIT, 5)]  # written, not replicated


def test_markers_wait_for_their_isrs_together(replicas, monkeypatch):
    monkeypatch.setattr(write_txn_markers, "MARKER_APPEND_TIMEOUT_MS", 300)
    for index in range(4):
        host(replicas, "t", index, isr=(BROKER, 2))  # the follower never fetches
    started = time.monotonic()
    errors = call(replicas, request(*(marker(7 + i, {"t": [i]}) for i in range(4))))
    assert set(errors.values()) == {ErrorCode.request_timed_out}
    assert time.monotonic() - started < 4 * 0.3  # not one timeout after the other


def test_offsets_partitions_settle_the_transactional_offsets(replicas):
    host(replicas, OFFSETS_TOPIC, 0)
    host(replicas, OFFSETS_TOPIC, 1, leader=2, isr=(2, BROKER))
    host(replicas, "t", 0)
    groups = Groups()
    req = request(
        marker(7, {OFFSETS_TOPIC: [0, 1], "t": [0]}),
        marker(8, {OFFSETS_TOPIC: [0]}, committed=False),
    )
    errors = call(replicas, req, groups=groups)
    assert errors[(7, OFFSETS_TOPIC, 1)] == ErrorCode.not_leader_or_follower
    assert groups.completed == [(0, 7, True), (0, 8, False)]  # written partitions only


def test_a_failure_to_settle_is_the_partitions_error(replicas):
    for index in (0, 1, 2):
        host(replicas, OFFSETS_TOPIC, index)
    groups = Groups({0: CoordinatorLoadInProgressError("loading"), 1: RuntimeError("bug")})
    errors = call(replicas, request(marker(7, {OFFSETS_TOPIC: [0, 1, 2]})), groups=groups)
    assert errors == {
        (7, OFFSETS_TOPIC, 0): ErrorCode.coordinator_load_in_progress,
        (7, OFFSETS_TOPIC, 1): ErrorCode.unknown_server_error,
        (7, OFFSETS_TOPIC, 2): ErrorCode.none,
    }
    assert groups.completed == [(2, 7, True)]


def test_a_broker_without_groups_writes_offsets_markers_all_the_same(replicas):
    host(replicas, OFFSETS_TOPIC, 0)
    errors = call(replicas, request(marker(7, {OFFSETS_TOPIC: [0]})), groups=None)
    assert errors == {(7, OFFSETS_TOPIC, 0): ErrorCode.none}


def test_only_the_inter_broker_listener_serves_it(replicas):
    partition = host(replicas, "t")
    errors = call(replicas, request(marker(7, {"t": [0, 1]})), listener="EXTERNAL")
    assert set(errors.values()) == {ErrorCode.cluster_authorization_failed}
    assert len(errors) == 2
    assert markers_in(partition) == []
