"""Committed offsets (``groups.offsets``) on the real runtime with the in-memory log: commits are
records that a new leader replays into the same offsets; bad input gets Kafka's error codes and
writes nothing; members are validated by their group; OffsetDelete's refusals; expiry of
offsets and of empty groups; the records' formats, legacy key and every value version."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

import pytest

from odradek.common.clock import ManualClock
from odradek.coordinator.errors import CoordinatorNotAvailableError
from odradek.coordinator.result import Result
from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.errors import ErrorCode
from odradek.groups import offsets as offsets_module
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import group_runtime
from odradek.groups.errors import GroupError
from odradek.groups.group import GroupType
from odradek.groups.offsets import EXPIRY_TIMER, OffsetMetadataManager, PartitionCommit
from odradek.groups.records import CoordinatorRecord, decode, encode_key, encode_value, register
from odradek.groups.records.offsets import (
    LegacyOffsetCommitKey,
    OffsetCommitKey,
    OffsetCommitValueV0,
    OffsetCommitValueV1,
    OffsetCommitValueV2,
    OffsetCommitValueV3,
    OffsetCommitValueV4,
)
from odradek.groups.shard import GroupCoordinatorShard, ShardContext
from support.coordinator_memory import MemoryLog, in_loop, loaded

PARTITION = 0
MINUTE_MS = 60_000


class FakeTopics:
    def __init__(self, topics: dict[str, int]):
        self.topics = topics

    def partition_count(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def topic_id(self, topic: str) -> None:
        return None

    def topic_names(self) -> list[str]:
        return sorted(self.topics)


class FakeTimer:
    def __init__(self) -> None:
        self.scheduled: dict[str, tuple[int, object]] = {}

    def schedule(self, key: str, delay_ms: int, operation) -> None:
        self.scheduled[key] = (delay_ms, operation)

    def cancel(self, key: str) -> None:
        self.scheduled.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self.scheduled


@dataclass(frozen=True, slots=True)
class FakeGroupKey:
    """A test-only record type: the fake group's metadata, so its tombstone can be replayed."""

    __record_type__: ClassVar[int] = 998
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})


register(FakeGroupKey)


@dataclass
class FakeGroup:
    """A ``Group`` whose answers the test sets."""

    group_id: str
    members: dict[str, int] = field(default_factory=dict)  # member id -> generation
    protocol: str | None = "consumer"
    subscribed: set[str] = field(default_factory=set)
    fetch_checks: list[tuple[str | None, int]] = field(default_factory=list)

    @property
    def type(self) -> GroupType:
        return GroupType.CLASSIC

    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"

    def protocol_type(self) -> str | None:
        return self.protocol

    def is_empty(self) -> bool:
        return not self.members

    def describe(self):
        raise NotImplementedError

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int):
        if generation < 0 and not member_id and not self.members:
            return
        if member_id not in self.members:
            raise GroupError(ErrorCode.unknown_member_id)
        if generation != self.members[member_id]:
            raise GroupError(ErrorCode.illegal_generation)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        self.fetch_checks.append((member_id, member_epoch))
        if member_id not in self.members:
            raise GroupError(ErrorCode.unknown_member_id)
        if member_epoch != self.members[member_id]:
            raise GroupError(ErrorCode.stale_member_epoch)

    def validate_delete_group(self) -> None:
        if self.members:
            raise GroupError(ErrorCode.non_empty_group)

    def is_subscribed_to(self, topic: str) -> bool:
        return bool(self.members) and topic in self.subscribed

    def tombstones(self) -> Sequence[CoordinatorRecord]:
        return [CoordinatorRecord(FakeGroupKey(self.group_id), None)]


class FakeGroups:
    """The manager of the fake groups: replays their tombstones."""

    RECORD_KEYS = (FakeGroupKey,)

    def __init__(self, groups: dict) -> None:
        self.groups = groups

    def replay(self, record: CoordinatorRecord) -> None:
        if record.value is None:
            self.groups.pop(record.key.group, None)

    def on_loaded(self) -> None: ...

    def on_unloaded(self) -> None: ...


class Shard(GroupCoordinatorShard):
    def __init__(self, context: ShardContext):
        super().__init__(context)
        self._add(FakeGroups(self.groups))


TOPICS = {"orders": 3, "audit": 1}


def new_runtime(log: MemoryLog, clock: ManualClock, config: GroupCoordinatorConfig | None = None):
    config = config or GroupCoordinatorConfig()
    return group_runtime(
        log,
        lambda partition, timer: ShardContext(partition, config, timer, FakeTopics(TOPICS), clock),
        new_shard=Shard,
        write_timeout_ms=50,
        clock_ms=clock,
    )


async def started(
    log: MemoryLog, clock: ManualClock, epoch: int = 1, **config
) -> CoordinatorRuntime:
    log.leader_epoch[PARTITION] = epoch
    runtime = new_runtime(log, clock, replace(GroupCoordinatorConfig(), **config))
    runtime.on_elected(PARTITION, epoch)
    await loaded(runtime, PARTITION)
    return runtime


def commit(group: str, *commits: PartitionCommit, member: str = "", generation: int = -1, **kw):
    def operation(shard):
        return shard.offsets.commit_offsets(group, member, None, generation, commits, **kw)

    return operation


def fetch(group: str, topics=None, member: str | None = None, epoch: int = -1):
    return lambda shard: shard.offsets.fetch_offsets(group, topics, member, epoch)


def offsets_of(fetched) -> dict[tuple[str, int], int]:
    return {
        (topic, p.partition): (-1 if p.offset is None else p.offset.committed_offset)
        for topic, partitions in fetched
        for p in partitions
    }


@in_loop
async def test_a_simple_consumers_commits_are_replayed_by_the_next_leader():
    log, clock = MemoryLog(), ManualClock(now_ms=1_000_000)
    runtime = await started(log, clock)
    errors = await runtime.write(
        PARTITION,
        commit(
            "simple",
            PartitionCommit("orders", 0, 42, 3, "m0"),
            PartitionCommit("orders", 2, 7),
            PartitionCommit("audit", 0, 1),
        ),
    )
    assert set(errors.values()) == {ErrorCode.none}
    clock.now_ms += 5
    await runtime.write(PARTITION, commit("simple", PartitionCommit("orders", 0, 43, 4, "m1")))
    shard = await runtime.read(PARTITION, lambda shard: shard)
    assert "simple" not in shard.groups  # no group object for a simple consumer
    assert shard.offsets.group_ids() == {"simple"}
    committed = shard.offsets.committed("simple")
    assert committed[("orders", 0)].committed_offset == 43
    assert committed[("orders", 0)].leader_epoch == 4
    assert committed[("orders", 0)].metadata == "m1"
    assert committed[("orders", 0)].commit_timestamp_ms == clock.now_ms
    assert committed[("orders", 2)].metadata == ""  # null metadata is stored as ""
    runtime.on_resigned(PARTITION)

    successor = await started(log, clock, epoch=2)
    fetched = await successor.read(PARTITION, fetch("simple"))
    assert offsets_of(fetched) == {("audit", 0): 1, ("orders", 0): 43, ("orders", 2): 7}
    asked = [("orders", [0, 1]), ("missing", [5])]
    fetched = await successor.read(PARTITION, fetch("simple", asked))
    assert offsets_of(fetched) == {("orders", 0): 43, ("orders", 1): -1, ("missing", 5): -1}
    assert offsets_of(await successor.read(PARTITION, fetch("nobody"))) == {}
    await successor.close()


@in_loop
async def test_bad_partitions_get_their_error_and_write_nothing():
    log, clock = MemoryLog(), ManualClock(now_ms=1_000_000)
    runtime = await started(log, clock, offset_metadata_max_bytes=10)
    errors = await runtime.write(
        PARTITION,
        commit(
            "g",
            PartitionCommit("missing", 0, 1),
            PartitionCommit("orders", 3, 1),
            PartitionCommit("orders", -1, 1),
            PartitionCommit("orders", 0, 1, metadata="x" * 11),
            PartitionCommit("orders", 1, 1, metadata="x" * 10),
        ),
    )
    assert errors == {
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
        ("orders", 3): ErrorCode.unknown_topic_or_partition,
        ("orders", -1): ErrorCode.unknown_topic_or_partition,
        ("orders", 0): ErrorCode.offset_metadata_too_large,
        ("orders", 1): ErrorCode.none,
    }
    assert len(log.records[PARTITION]) == 1
    shard = await runtime.read(PARTITION, lambda shard: shard)
    assert list(shard.offsets.committed("g")) == [("orders", 1)]
    await runtime.close()


@in_loop
async def test_whole_request_errors_write_nothing():
    log, clock = MemoryLog(), ManualClock(now_ms=1_000_000)
    runtime = await started(log, clock)
    one = PartitionCommit("orders", 0, 1)
    with pytest.raises(GroupError) as empty_id:
        await runtime.write(PARTITION, commit("", one))
    assert empty_id.value.error_code == ErrorCode.invalid_group_id
    with pytest.raises(GroupError) as no_group:  # a generation, but no group
        await runtime.write(PARTITION, commit("ghost", one, member="m", generation=3))
    assert no_group.value.error_code == ErrorCode.group_id_not_found

    shard = await runtime.read(PARTITION, lambda shard: shard)
    shard.groups["g"] = FakeGroup("g", members={"m1": 5})
    for member, generation, code in [
        ("m2", 5, ErrorCode.unknown_member_id),
        ("m1", 4, ErrorCode.illegal_generation),
        ("", -1, ErrorCode.unknown_member_id),  # a simple commit while the group has members
    ]:
        with pytest.raises(GroupError) as refused:
            await runtime.write(PARTITION, commit("g", one, member=member, generation=generation))
        assert refused.value.error_code == code
    assert PARTITION not in log.records
    assert await runtime.write(PARTITION, commit("g", one, member="m1", generation=5)) == {
        ("orders", 0): ErrorCode.none
    }
    await runtime.close()


@in_loop
async def test_a_commit_not_replicated_is_not_acknowledged():
    log, clock = MemoryLog(), ManualClock(now_ms=1_000_000)
    runtime = await started(log, clock)
    log.replicate = False
    with pytest.raises(CoordinatorNotAvailableError):
        await runtime.write(PARTITION, commit("g", PartitionCommit("orders", 0, 9)))
    with pytest.raises(CoordinatorNotAvailableError):  # nor read back before it is
        await runtime.read(PARTITION, fetch("g"))
    log.replicate = True
    log.high_watermark[PARTITION] = len(log.records[PARTITION])
    assert offsets_of(await runtime.read(PARTITION, fetch("g"))) == {("orders", 0): 9}
    await runtime.close()


@in_loop
async def test_a_kip848_member_fetching_is_validated_by_its_group():
    log, clock = MemoryLog(), ManualClock(now_ms=1_000_000)
    runtime = await started(log, clock)
    shard = await runtime.read(PARTITION, lambda shard: shard)
    group = FakeGroup("g", members={"m1": 7})
    shard.groups["g"] = group
    await runtime.write(
        PARTITION, commit("g", PartitionCommit("orders", 0, 5), member="m1", generation=7)
    )
    assert offsets_of(await runtime.read(PARTITION, fetch("g", member="m1", epoch=7))) == {
        ("orders", 0): 5
    }
    with pytest.raises(GroupError) as stale:
        await runtime.read(PARTITION, fetch("g", member="m1", epoch=6))
    assert stale.value.error_code == ErrorCode.stale_member_epoch
    await runtime.read(PARTITION, fetch("g"))  # an admin's fetch names no member
    assert group.fetch_checks == [("m1", 7), ("m1", 6)]
    await runtime.close()


@in_loop
async def test_offset_delete():
    log, clock = MemoryLog(), ManualClock(now_ms=1_000_000)
    runtime = await started(log, clock)
    shard = await runtime.read(PARTITION, lambda shard: shard)
    both = [("orders", [0, 1]), ("audit", [0])]
    with pytest.raises(GroupError) as unknown:
        await runtime.write(PARTITION, lambda s: s.offsets.delete_offsets("nobody", both))
    assert unknown.value.error_code == ErrorCode.group_id_not_found

    await runtime.write(
        PARTITION,
        commit("simple", PartitionCommit("orders", 0, 1), PartitionCommit("audit", 0, 2)),
    )
    errors = await runtime.write(
        PARTITION, lambda s: s.offsets.delete_offsets("simple", [*both, ("gone", [0])])
    )
    assert errors == {
        ("orders", 0): ErrorCode.none,
        ("orders", 1): ErrorCode.none,  # nothing committed: deleted all the same
        ("audit", 0): ErrorCode.none,
        ("gone", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert shard.offsets.group_ids() == set()
    assert [r.value for r in log.records[PARTITION][-2:]] == [None, None]

    shard.groups["classic"] = FakeGroup("classic", members={"m": 1}, protocol="raw")
    with pytest.raises(GroupError) as non_empty:
        await runtime.write(PARTITION, lambda s: s.offsets.delete_offsets("classic", both))
    assert non_empty.value.error_code == ErrorCode.non_empty_group

    shard.groups["consumers"] = FakeGroup("consumers", members={"m": 1}, subscribed={"orders"})
    await runtime.write(
        PARTITION,
        commit(
            "consumers",
            PartitionCommit("orders", 0, 1),
            PartitionCommit("audit", 0, 2),
            member="m",
            generation=1,
        ),
    )
    errors = await runtime.write(PARTITION, lambda s: s.offsets.delete_offsets("consumers", both))
    assert errors[("orders", 0)] == ErrorCode.group_subscribed_to_topic
    assert errors[("audit", 0)] == ErrorCode.none
    assert list(shard.offsets.committed("consumers")) == [("orders", 0)]
    await runtime.close()


@in_loop
async def test_delete_group_offsets_gives_the_tombstones_of_every_offset():
    log, clock = MemoryLog(), ManualClock(now_ms=1_000_000)
    runtime = await started(log, clock)
    await runtime.write(
        PARTITION, commit("g", PartitionCommit("orders", 1, 1), PartitionCommit("audit", 0, 2))
    )
    shard = await runtime.read(PARTITION, lambda shard: shard)
    tombstones = shard.offsets.delete_group_offsets("g")
    assert tombstones == [
        CoordinatorRecord(OffsetCommitKey("g", "audit", 0), None),
        CoordinatorRecord(OffsetCommitKey("g", "orders", 1), None),
    ]
    assert shard.offsets.delete_group_offsets("nobody") == []
    await runtime.write(PARTITION, lambda s: Result(records=tombstones))
    assert shard.offsets.committed("g") == {}
    assert shard.offsets.group_ids() == set()
    await runtime.close()


def expiring_shard(clock: ManualClock, retention_minutes: int = 10) -> tuple[Shard, FakeTimer]:
    timer = FakeTimer()
    config = replace(
        GroupCoordinatorConfig(),
        offsets_retention_minutes=retention_minutes,
        offsets_retention_check_interval_ms=1000,
    )
    shard = Shard(ShardContext(PARTITION, config, timer, FakeTopics(TOPICS), clock))
    shard.on_loaded()
    return shard, timer


def apply(shard: Shard, result) -> list[CoordinatorRecord]:
    for record in result.records:
        shard.replay(record)
    return list(result.records)


def test_expiry_of_a_simple_groups_offsets_counts_from_each_commit():
    clock = ManualClock(now_ms=1_000_000)
    shard, timer = expiring_shard(clock)
    assert timer.scheduled[EXPIRY_TIMER][0] == 1000
    apply(shard, shard.offsets.commit_offsets("s", "", None, -1, [PartitionCommit("orders", 0, 1)]))
    clock.now_ms += 5 * MINUTE_MS
    apply(shard, shard.offsets.commit_offsets("s", "", None, -1, [PartitionCommit("orders", 1, 1)]))
    clock.now_ms += 5 * MINUTE_MS - 1
    assert apply(shard, shard.offsets.expire()) == []
    clock.now_ms += 1
    expired = apply(shard, shard.offsets.expire())
    assert expired == [CoordinatorRecord(OffsetCommitKey("s", "orders", 0), None)]
    assert list(shard.offsets.committed("s")) == [("orders", 1)]
    assert timer.is_scheduled(EXPIRY_TIMER)  # it runs again


def test_a_retention_time_of_the_commit_overrides_the_brokers():
    clock = ManualClock(now_ms=1_000_000)
    shard, _ = expiring_shard(clock)
    commit = [PartitionCommit("orders", 0, 1)]
    apply(shard, shard.offsets.commit_offsets("s", "", None, -1, commit, retention_ms=1000))
    assert shard.offsets.committed("s")[("orders", 0)].expire_timestamp_ms == clock.now_ms + 1000
    clock.now_ms += 999
    assert apply(shard, shard.offsets.expire()) == []
    clock.now_ms += 1
    assert len(apply(shard, shard.offsets.expire())) == 1


def test_a_group_with_members_keeps_the_offsets_of_topics_it_consumes():
    clock = ManualClock(now_ms=1_000_000)
    shard, _ = expiring_shard(clock)
    group = FakeGroup("g", members={"m": 1}, subscribed={"orders"})
    shard.groups["g"] = group
    commits = [PartitionCommit("orders", 0, 1), PartitionCommit("audit", 0, 1)]
    apply(shard, shard.offsets.commit_offsets("g", "m", None, 1, commits))
    clock.now_ms += 11 * MINUTE_MS
    expired = apply(shard, shard.offsets.expire())
    assert expired == [CoordinatorRecord(OffsetCommitKey("g", "audit", 0), None)]
    assert "g" in shard.groups

    group.members.clear()  # the group empties: its offsets count from now on
    clock.now_ms += 60 * MINUTE_MS
    assert apply(shard, shard.offsets.expire()) == []
    clock.now_ms += 10 * MINUTE_MS
    expired = apply(shard, shard.offsets.expire())
    assert expired == [
        CoordinatorRecord(OffsetCommitKey("g", "orders", 0), None),
        CoordinatorRecord(FakeGroupKey("g"), None),  # an empty group left without offsets
    ]
    assert "g" not in shard.groups
    assert shard.offsets.group_ids() == set()


def test_a_busy_group_of_another_protocol_keeps_every_offset():
    clock = ManualClock(now_ms=1_000_000)
    shard, _ = expiring_shard(clock)
    shard.groups["connect"] = FakeGroup("connect", members={"m": 1}, protocol="connect")
    commits = [PartitionCommit("audit", 0, 1)]
    apply(shard, shard.offsets.commit_offsets("connect", "m", None, 1, commits))
    clock.now_ms += 11 * MINUTE_MS
    assert apply(shard, shard.offsets.expire()) == []


def test_an_empty_group_without_offsets_is_deleted_and_a_busy_one_is_not():
    clock = ManualClock(now_ms=1_000_000)
    shard, _ = expiring_shard(clock)
    shard.groups["empty"] = FakeGroup("empty")
    shard.groups["busy"] = FakeGroup("busy", members={"m": 1})
    assert apply(shard, shard.offsets.expire()) == [CoordinatorRecord(FakeGroupKey("empty"), None)]
    assert list(shard.groups) == ["busy"]


def test_records_round_trip_and_every_value_version_is_read():
    key = OffsetCommitKey("group", "topic", 7)
    for value in [
        OffsetCommitValueV0(5, "m", 100),
        OffsetCommitValueV1(5, "m", 100, 200),
        OffsetCommitValueV2(5, "m", 100),
        OffsetCommitValueV3(5, 2, "m", 100),
        OffsetCommitValueV4(5, 2, "m", 100),
    ]:
        record = decode(encode_key(key), encode_value(value))
        assert record == CoordinatorRecord(key, value)
    assert encode_key(key)[:2] == b"\x00\x01"
    legacy = LegacyOffsetCommitKey("group", "topic", 7)
    assert encode_key(legacy)[:2] == b"\x00\x00"
    assert decode(encode_key(legacy), None) == CoordinatorRecord(legacy, None)


def test_legacy_keys_are_replayed_like_current_ones():
    clock = ManualClock(now_ms=1_000_000)
    shard, _ = expiring_shard(clock)
    shard.replay(
        CoordinatorRecord(
            LegacyOffsetCommitKey("old", "orders", 0), OffsetCommitValueV1(9, "x", 100, -1)
        )
    )
    stored = shard.offsets.committed("old")[("orders", 0)]
    assert (stored.committed_offset, stored.leader_epoch, stored.metadata) == (9, -1, "x")
    shard.replay(CoordinatorRecord(OffsetCommitKey("old", "orders", 0), None))
    assert shard.offsets.group_ids() == set()


def test_the_manager_is_the_shards():
    clock = ManualClock(now_ms=1_000_000)
    shard, _ = expiring_shard(clock)
    assert isinstance(shard.offsets, OffsetMetadataManager)


def test_an_expiry_run_writes_a_bounded_batch_and_continues_at_once(monkeypatch):
    monkeypatch.setattr(offsets_module, "MAX_EXPIRED_RECORDS", 2)
    clock = ManualClock(now_ms=1_000_000)
    shard, timer = expiring_shard(clock)
    for group in ("a", "b", "c"):
        commits = [PartitionCommit("orders", 0, 1)]
        apply(shard, shard.offsets.commit_offsets(group, "", None, -1, commits))
    clock.now_ms += 10 * MINUTE_MS
    assert len(apply(shard, shard.offsets.expire())) == 2
    assert timer.scheduled[EXPIRY_TIMER][0] == 0  # more are due: the next run at once
    assert apply(shard, shard.offsets.expire()) == [
        CoordinatorRecord(OffsetCommitKey("c", "orders", 0), None)
    ]
    assert timer.scheduled[EXPIRY_TIMER][0] == 1000
    assert shard.offsets.group_ids() == set()
