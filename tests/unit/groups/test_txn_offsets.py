"""Transactional offsets (TxnOffsetCommit) on the real runtime and shard with the in-memory log:
they are written as the producer's transactional batch and stay pending until its marker;
a commit marker makes them committed unless a later plain commit exists, an abort drops them;
a new leader loading the log (records and markers in log order) has the same state as the live
one; OffsetFetch with require_stable sees them as unstable; deletion and expiry keep to Kafka."""

from __future__ import annotations

import asyncio

import pytest

from odradek.common.clock import ManualClock
from odradek.coordinator.errors import CoordinatorLoadInProgressError
from odradek.coordinator.result import Result, TxnProducer
from odradek.coordinator.runtime import CoordinatorRuntime, LoggedMarker, LoggedRecord
from odradek.errors import ErrorCode
from odradek.groups.classic.group import ClassicGroup, ClassicGroupState
from odradek.groups.classic.member import ClassicMember
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import group_runtime
from odradek.groups.errors import GroupError
from odradek.groups.offsets import EXPIRY_TIMER, PartitionCommit
from odradek.groups.pending_offsets import PendingOffsets
from odradek.groups.shard import GroupCoordinatorShard, ShardContext
from odradek.storage.batch import BatchHeader
from support.coordinator_memory import MemoryLog, in_loop, loaded

P = 0
GROUP = "g"
MINUTE_MS = 60_000


class Topics:
    topics = {"orders": 3}

    def partition_count(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def topic_id(self, topic: str) -> None:
        return None

    def topic_names(self) -> list[str]:
        return sorted(self.topics)


class BatchLog(MemoryLog):
    """The in-memory log that also keeps each appended batch's header."""

    def __init__(self) -> None:
        super().__init__()
        self.headers: list[BatchHeader] = []

    async def append(self, partition: int, leader_epoch: int, batch: bytes) -> int:
        self.headers.append(BatchHeader.parse(batch))
        return await super().append(partition, leader_epoch, batch)


def new_runtime(log: MemoryLog, clock: ManualClock | None = None, **config) -> CoordinatorRuntime:
    group_config = GroupCoordinatorConfig(**config)
    clock = clock or ManualClock(now_ms=1_000_000)
    return group_runtime(
        log,
        lambda partition, timer: ShardContext(partition, group_config, timer, Topics(), clock),
        write_timeout_ms=50,
        clock_ms=clock,
    )


async def started(log: MemoryLog, clock: ManualClock | None = None, **config) -> CoordinatorRuntime:
    log.leader_epoch[P] = log.leader_epoch.get(P, 0) + 1
    runtime = new_runtime(log, clock, **config)
    runtime.on_elected(P, log.leader_epoch[P])
    await loaded(runtime, P)
    return runtime


def at(partition: int, offset: int, metadata: str = "") -> PartitionCommit:
    return PartitionCommit("orders", partition, offset, -1, metadata)


def txn_commit(
    *commits: PartitionCommit,
    producer_id: int = 7,
    epoch: int = 0,
    group: str = GROUP,
    member: str = "",
    generation: int = -1,
):
    def operation(shard: GroupCoordinatorShard):
        return shard.offsets.commit_transactional_offsets(
            group, member, None, generation, TxnProducer(producer_id, epoch), commits
        )

    return operation


def plain_commit(*commits: PartitionCommit, group: str = GROUP):
    return lambda shard: shard.offsets.commit_offsets(group, "", None, -1, commits)


async def committed(runtime: CoordinatorRuntime, group: str = GROUP) -> dict[int, int]:
    offsets = await runtime.read(P, lambda shard: shard.offsets.committed(group))
    return {partition: o.committed_offset for (_, partition), o in offsets.items()}


async def fetch(runtime: CoordinatorRuntime, partitions=(0, 1, 2), *, stable: bool):
    fetched = await runtime.read(
        P,
        lambda shard: shard.offsets.fetch_offsets(
            GROUP, [("orders", list(partitions))], require_stable=stable
        ),
    )
    return {
        p.partition: "unstable"
        if p.unstable
        else (None if p.offset is None else p.offset.committed_offset)
        for _, ps in fetched
        for p in ps
    }


async def marker(runtime: CoordinatorRuntime, log: MemoryLog, producer_id: int, committed: bool):
    """What WriteTxnMarkers does: append the marker, then hand it to the coordinator."""
    log.append_marker(P, producer_id, committed)
    assert await runtime.complete_transaction(P, producer_id, committed)


@in_loop
async def test_offsets_stay_pending_until_the_commit_marker():
    log = BatchLog()
    runtime = await started(log)
    errors = await runtime.write(P, txn_commit(at(0, 10), at(1, 20), producer_id=7, epoch=3))
    assert errors == {("orders", 0): ErrorCode.none, ("orders", 1): ErrorCode.none}
    header = log.headers[-1]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, -1)
    assert header.is_transactional and not header.is_control
    assert [r.producer_id for r in log.records[P]] == [7, 7]
    assert await committed(runtime) == {}
    assert await fetch(runtime, stable=False) == {0: None, 1: None, 2: None}
    assert await fetch(runtime, stable=True) == {0: "unstable", 1: "unstable", 2: None}
    pending = runtime._slots[P].shard.offsets.pending(7)
    assert {tp: o.committed_offset for tp, o in pending[GROUP].items()} == {
        ("orders", 0): 10,
        ("orders", 1): 20,
    }
    await marker(runtime, log, 7, committed=True)
    assert await committed(runtime) == {0: 10, 1: 20}
    assert await fetch(runtime, stable=True) == {0: 10, 1: 20, 2: None}
    assert runtime._slots[P].shard.offsets.pending(7) == {}
    await runtime.close()


@in_loop
async def test_an_abort_drops_them_and_the_committed_offsets_stay():
    log = MemoryLog()
    runtime = await started(log)
    await runtime.write(P, plain_commit(at(0, 5)))
    await runtime.write(P, txn_commit(at(0, 10), at(2, 30)))
    assert await fetch(runtime, stable=False) == {0: 5, 1: None, 2: None}
    assert await fetch(runtime, stable=True) == {0: "unstable", 1: None, 2: "unstable"}
    await marker(runtime, log, 7, committed=False)
    assert await committed(runtime) == {0: 5}
    assert await fetch(runtime, stable=True) == {0: 5, 1: None, 2: None}
    await runtime.close()


@in_loop
async def test_a_pending_offset_overrides_only_an_earlier_committed_one():
    log = MemoryLog()
    runtime = await started(log)
    await runtime.write(P, plain_commit(at(0, 1), at(1, 1)))  # offsets 0, 1
    await runtime.write(P, txn_commit(at(0, 10), at(1, 10)))  # 2, 3: pending
    await runtime.write(P, plain_commit(at(1, 50)))  # 4: later than the pending one
    await marker(runtime, log, 7, committed=True)
    assert await committed(runtime) == {0: 10, 1: 50}
    await runtime.close()


@in_loop
async def test_two_producers_pending_on_one_partition_end_apart():
    log = MemoryLog()
    runtime = await started(log)
    await runtime.write(P, txn_commit(at(0, 10), producer_id=7))
    await runtime.write(P, txn_commit(at(0, 20), producer_id=8))
    await marker(runtime, log, 8, committed=False)
    assert await fetch(runtime, (0,), stable=True) == {0: "unstable"}  # 7's is still open
    await marker(runtime, log, 7, committed=True)
    assert await fetch(runtime, (0,), stable=True) == {0: 10}
    await marker(runtime, log, 7, committed=True)  # again: it has nothing pending any more
    await marker(runtime, log, 9, committed=True)  # a producer that committed nothing here
    assert await committed(runtime) == {0: 10}
    await runtime.close()


@in_loop
async def test_a_new_leader_loads_the_same_state_from_records_and_markers_in_log_order():
    log = MemoryLog()
    runtime = await started(log)
    await runtime.write(P, plain_commit(at(0, 1)))
    await runtime.write(P, txn_commit(at(0, 10), at(1, 10), producer_id=7))
    await runtime.write(P, plain_commit(at(1, 50)))
    await marker(runtime, log, 7, committed=True)
    await runtime.write(P, txn_commit(at(2, 99), producer_id=8))
    await marker(runtime, log, 8, committed=False)
    await runtime.write(P, txn_commit(at(0, 70), at(2, 70), producer_id=9))  # still open
    live = (await committed(runtime), await fetch(runtime, stable=True))
    assert live == ({0: 10, 1: 50}, {0: "unstable", 1: 50, 2: "unstable"})
    assert any(isinstance(entry, LoggedMarker) for entry in log.records[P])
    runtime.on_resigned(P)
    await runtime.close()

    reloaded = await started(log)
    assert (await committed(reloaded), await fetch(reloaded, stable=True)) == live
    await marker(reloaded, log, 9, committed=True)
    assert await committed(reloaded) == {0: 70, 1: 50, 2: 70}
    await reloaded.close()


@in_loop
async def test_a_marker_handed_over_while_the_shard_loads_is_applied_after_the_load():
    log = MemoryLog()
    runtime = await started(log)
    await runtime.write(P, txn_commit(at(0, 10)))
    runtime.on_resigned(P)
    await runtime.close()
    log.append_marker(P, 7, True)  # the new leader's load may or may not read it
    log.leader_epoch[P] += 1
    reloaded = new_runtime(log)
    reloaded.on_elected(P, log.leader_epoch[P])
    assert await reloaded.complete_transaction(P, 7, True)
    assert await committed(reloaded) == {0: 10}
    assert not await reloaded.complete_transaction(1, 7, True)  # not led here: nothing to do
    await reloaded.close()


@in_loop
async def test_a_shard_still_loading_is_load_in_progress_and_one_resigned_has_nothing():
    log = MemoryLog()
    log.leader_epoch[P] = 1
    runtime = new_runtime(log)
    gate = asyncio.Event()
    original = runtime._load

    async def slow_load(slot):
        await gate.wait()
        await original(slot)

    runtime._load = slow_load  # type: ignore[method-assign]
    runtime.on_elected(P, 1)
    with pytest.raises(CoordinatorLoadInProgressError):
        await runtime.complete_transaction(P, 7, True, timeout_ms=20)
    waiting = asyncio.ensure_future(runtime.complete_transaction(P, 7, True, timeout_ms=5000))
    await asyncio.sleep(0.01)
    runtime.on_resigned(P)  # resigned while loading: nothing to apply here
    assert await waiting is False
    runtime.on_elected(P, 2)
    gate.set()
    await loaded(runtime, P)
    await runtime.close()


@in_loop
async def test_a_tombstone_between_the_offsets_and_the_marker_wins():
    log = MemoryLog()
    runtime = await started(log)
    await runtime.write(P, plain_commit(at(0, 1)))
    await runtime.write(P, txn_commit(at(0, 10), at(1, 10)))
    deleted = await runtime.write(P, lambda s: s.offsets.delete_offsets(GROUP, [("orders", [1])]))
    assert deleted == {("orders", 1): ErrorCode.none}
    await marker(runtime, log, 7, committed=True)
    assert await committed(runtime) == {0: 10}
    runtime.on_resigned(P)
    await runtime.close()
    reloaded = await started(log)
    assert await committed(reloaded) == {0: 10}
    await reloaded.close()


@in_loop
async def test_delete_group_writes_tombstones_for_pending_offsets_too():
    log = MemoryLog()
    runtime = await started(log)
    await runtime.write(P, plain_commit(at(0, 1)))
    await runtime.write(P, txn_commit(at(1, 10), at(2, 10), group="only-pending"))
    shard = runtime._slots[P].shard
    assert shard.offsets.group_ids() == {GROUP, "only-pending"}
    tombstones = shard.offsets.delete_group_offsets("only-pending")
    assert [(r.key.partition, r.value) for r in tombstones] == [(1, None), (2, None)]
    await runtime.write(P, lambda s: Result(records=tombstones))
    await marker(runtime, log, 7, committed=True)
    assert await committed(runtime, "only-pending") == {}
    assert shard.offsets.group_ids() == {GROUP}
    await runtime.close()


@in_loop
async def test_expiry_keeps_an_offset_with_a_pending_one_and_its_group():
    clock = ManualClock(now_ms=1_000_000)
    log = MemoryLog()
    runtime = await started(log, clock, offsets_retention_minutes=1)
    await runtime.write(P, plain_commit(at(0, 1), at(1, 1)))
    await runtime.write(P, txn_commit(at(0, 10)))
    clock.now_ms += 2 * MINUTE_MS
    shard = runtime._slots[P].shard
    records, more = shard.offsets.expired_records()
    assert not more
    assert [(r.key.partition, r.value) for r in records] == [(1, None)]
    await runtime.write(P, lambda s: Result(records=records))
    await marker(runtime, log, 7, committed=True)
    assert await committed(runtime) == {0: 10}
    assert shard.context.timer.is_scheduled(EXPIRY_TIMER)
    await runtime.close()


@in_loop
async def test_expiry_does_not_delete_an_empty_group_with_pending_offsets():
    clock = ManualClock(now_ms=1_000_000)
    log = MemoryLog()
    runtime = await started(log, clock, offsets_retention_minutes=1)
    shard = runtime._slots[P].shard
    group = ClassicGroup("empty")
    shard.groups["empty"] = group
    await runtime.write(P, txn_commit(at(0, 10), group="empty"))
    clock.now_ms += 2 * MINUTE_MS
    shard.offsets.expired_records()  # the group is seen empty from now
    clock.now_ms += 2 * MINUTE_MS
    records, _ = shard.offsets.expired_records()
    assert records == []
    await marker(runtime, log, 7, committed=False)
    records, _ = shard.offsets.expired_records()
    assert records == list(group.tombstones())
    await runtime.close()


@in_loop
async def test_bad_input_gets_kafka_errors_and_writes_nothing_it_refuses():
    log = MemoryLog()
    runtime = await started(log, offset_metadata_max_bytes=4)
    for operation, code in [
        (txn_commit(at(0, 1), group=""), ErrorCode.invalid_group_id),
        (txn_commit(at(0, 1), group="nobody", generation=3), ErrorCode.illegal_generation),
    ]:
        with pytest.raises(GroupError) as refused:
            await runtime.write(P, operation)
        assert refused.value.error_code == code
    errors = await runtime.write(
        P,
        txn_commit(at(0, 1), at(3, 1), at(1, 1, "toolong"), PartitionCommit("gone", 0, 1)),
    )
    assert errors == {
        ("orders", 0): ErrorCode.none,
        ("orders", 3): ErrorCode.unknown_topic_or_partition,
        ("orders", 1): ErrorCode.offset_metadata_too_large,
        ("gone", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert len(log.records[P]) == 1
    assert await runtime.write(P, txn_commit(at(9, 1))) == {
        ("orders", 9): ErrorCode.unknown_topic_or_partition
    }
    assert len(log.records[P]) == 1  # nothing to write: no batch, no transaction opened
    await runtime.close()


def test_a_classic_group_validates_a_transactional_commit_as_kafka():
    group = ClassicGroup(GROUP)
    group.validate_offset_commit("", None, -1, is_transactional=True)  # empty: anyone
    member = _add_member(group, "m-1")
    group.generation_id = 4
    # A producer's request before v3 names no member: accepted even with members.
    group.validate_offset_commit("", None, -1, is_transactional=True)
    with pytest.raises(GroupError) as plain:
        group.validate_offset_commit("", None, -1)
    assert plain.value.error_code == ErrorCode.unknown_member_id
    group.validate_offset_commit(member, None, 4, is_transactional=True)
    for args, code in [
        ((member, None, 3), ErrorCode.illegal_generation),
        (("nobody", None, 4), ErrorCode.unknown_member_id),
        (("", None, 4), ErrorCode.unknown_member_id),
    ]:
        with pytest.raises(GroupError) as refused:
            group.validate_offset_commit(*args, is_transactional=True)
        assert refused.value.error_code == code


def _add_member(group: ClassicGroup, member_id: str) -> str:
    """A member, and the group completing its rebalance (it awaits its assignment)."""
    group.add(
        ClassicMember(
            member_id=member_id,
            group_instance_id=None,
            client_id="c",
            client_host="/127.0.0.1",
            rebalance_timeout_ms=1000,
            session_timeout_ms=1000,
            protocol_type="consumer",
            protocols=(("range", b""),),
        )
    )
    group.transition_to(ClassicGroupState.PREPARING_REBALANCE, 0)
    group.transition_to(ClassicGroupState.COMPLETING_REBALANCE, 0)
    return member_id


@in_loop
async def test_a_completing_rebalance_does_not_refuse_a_transactional_commit():
    log = MemoryLog()
    runtime = await started(log)
    shard = runtime._slots[P].shard
    group = ClassicGroup(GROUP)
    member = _add_member(group, "m-1")
    group.generation_id = 1
    shard.groups[GROUP] = group
    errors = await runtime.write(P, txn_commit(at(0, 3), member=member, generation=1))
    assert errors == {("orders", 0): ErrorCode.none}
    with pytest.raises(GroupError) as busy:
        await runtime.write(
            P, lambda s: s.offsets.commit_offsets(GROUP, member, None, 1, [at(0, 3)])
        )
    assert busy.value.error_code == ErrorCode.rebalance_in_progress
    await runtime.close()


@in_loop
async def test_a_shard_without_transactions_refuses_a_log_with_markers():
    class PlainShard:
        """A coordinator's shard that knows nothing of transactions."""

        def __init__(self, context):
            self.context = context
            self.replayed = []

        def replay(self, record):
            self.replayed.append(record)

        def on_loaded(self): ...

        def on_unloaded(self): ...

    log = MemoryLog()
    log.records[P] = [LoggedMarker(0, 7, True)]
    log.leader_epoch[P] = 1
    runtime = group_runtime(
        log,
        lambda partition, timer: ShardContext(
            partition, GroupCoordinatorConfig(), timer, Topics(), ManualClock(now_ms=1_000_000)
        ),
        new_shard=PlainShard,  # type: ignore[arg-type]
    )
    runtime.on_elected(P, 1)
    for _ in range(50):
        await asyncio.sleep(0.01)
        if P not in runtime._slots:
            break
    assert P not in runtime._slots  # the load failed: served as NOT_COORDINATOR
    assert not isinstance(log.records[P][0], LoggedRecord)
    await runtime.close()


def test_pending_offsets_keep_no_empty_entries():
    pending: PendingOffsets[int] = PendingOffsets()
    pending.add(7, "a", ("t", 0), 1)
    pending.add(7, "a", ("t", 1), 2)
    pending.add(8, "a", ("t", 0), 3)
    pending.add(8, "b", ("t", 0), 4)
    assert pending.partitions("a") == {("t", 0): {7, 8}, ("t", 1): {7}}
    pending.drop_partition("a", ("t", 0))
    assert pending.of_producer(7) == {"a": {("t", 1): 2}}
    assert pending.of_producer(8) == {"b": {("t", 0): 4}}
    assert sorted(pending.end(7)) == [("a", ("t", 1), 2)]
    assert pending.group_ids() == {"b"} and not pending.has("a")
    assert pending.end(8) == [("b", ("t", 0), 4)] and pending.end(8) == []
    assert pending.group_ids() == set() and pending._by_producer == {} and pending._open == {}
