"""ListGroups, DescribeGroups and DeleteGroups of one shard: filters, groups known only by their
offsets, refusals with Kafka's codes, and deletion as replayed tombstones that survive a reload."""

from __future__ import annotations

import pytest

from odradek.coordinator.result import Result
from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.errors import ErrorCode
from odradek.groups import admin
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import group_runtime
from odradek.groups.errors import GroupError
from odradek.groups.group import GroupType
from odradek.groups.shard import ShardContext
from support.coordinator_memory import MemoryLog, in_loop, loaded
from support.group_doubles import DoubleShard, group_record, offset_record


def shard_with(*records) -> DoubleShard:
    shard = DoubleShard(ShardContext(0, GroupCoordinatorConfig(), None, None, lambda: 0))  # type: ignore[arg-type]
    for record in records:
        shard.replay(record)
    return shard


def sample() -> DoubleShard:
    return shard_with(
        group_record("stable", state="Stable", protocol_name="range", members=["m1", "m2"]),
        group_record("idle"),
        group_record("kip848", state="Reconciling", type="consumer", members=["c1"]),
        offset_record("idle", "t", 0, 5),
        offset_record("simple", "t", 0, 7),
        offset_record("simple", "t", 1, 9),
    )


def listed(shard: DoubleShard, **filters) -> list[tuple[str, str, str, str]]:
    return [
        (g.group_id, g.protocol_type, g.state, g.type.value)
        for g in admin.list_groups(shard.groups, shard.offsets, **filters)
    ]


def test_lists_every_group_and_those_known_only_by_offsets():
    assert listed(sample()) == [
        ("idle", "consumer", "Empty", "classic"),
        ("kip848", "consumer", "Reconciling", "consumer"),
        ("simple", "", "Empty", "classic"),
        ("stable", "consumer", "Stable", "classic"),
    ]


def test_state_filter_is_case_insensitive():
    assert [g[0] for g in listed(sample(), states_filter=["empty"])] == ["idle", "simple"]
    assert [g[0] for g in listed(sample(), states_filter=["STABLE", "reconciling"])] == [
        "kip848",
        "stable",
    ]
    assert listed(sample(), states_filter=["NoSuchState"]) == []


def test_type_filter():
    assert [g[0] for g in listed(sample(), types_filter=["Consumer"])] == ["kip848"]
    assert [g[0] for g in listed(sample(), types_filter=["classic"])] == [
        "idle",
        "simple",
        "stable",
    ]
    both = listed(sample(), types_filter=["classic"], states_filter=["Stable"])
    assert [g[0] for g in both] == ["stable"]


def test_describe_known_simple_and_unknown_groups():
    shard = sample()
    stable = admin.describe_group(shard.groups, shard.offsets, "stable")
    assert (stable.state, stable.protocol_type, stable.protocol_name) == (
        "Stable",
        "consumer",
        "range",
    )
    assert [m.member_id for m in stable.members] == ["m1", "m2"]
    simple = admin.describe_group(shard.groups, shard.offsets, "simple")
    assert (simple.state, simple.protocol_type, simple.members) == ("Empty", "", ())
    unknown = admin.describe_group(shard.groups, shard.offsets, "nobody")
    assert (unknown.state, unknown.protocol_type, unknown.members) == ("Dead", "", ())


@pytest.mark.parametrize(
    ("group_id", "code"),
    [
        ("", ErrorCode.group_id_not_found),  # an id like another, as Kafka
        ("nobody", ErrorCode.group_id_not_found),
        ("stable", ErrorCode.non_empty_group),
        ("kip848", ErrorCode.non_empty_group),
    ],
)
def test_delete_refusals(group_id, code):
    shard = sample()
    with pytest.raises(GroupError) as refused:
        admin.delete_group(shard.groups, shard.offsets, group_id)
    assert refused.value.error_code == code


def test_the_empty_group_id_is_a_group_id():
    shard = shard_with(offset_record("", "t", 0, 1))
    assert admin.describe_group(shard.groups, shard.offsets, "").state == "Empty"
    assert admin.delete_group(shard.groups, shard.offsets, "").response == ErrorCode.none
    assert admin.describe_group({}, shard.offsets, "nobody").state == "Dead"


def test_delete_writes_offset_then_group_tombstones():
    shard = sample()
    result = admin.delete_group(shard.groups, shard.offsets, "idle")
    assert result.response == ErrorCode.none and result.replay
    assert [(type(r.key).__name__, r.value) for r in result.records] == [
        ("DoubleOffsetKey", None),
        ("DoubleGroupKey", None),
    ]
    simple = admin.delete_group(shard.groups, shard.offsets, "simple")
    assert len(simple.records) == 2 and all(r.value is None for r in simple.records)


def new_runtime(log: MemoryLog) -> CoordinatorRuntime:
    config = GroupCoordinatorConfig()
    return group_runtime(
        log,
        lambda partition, timer: ShardContext(partition, config, timer, None, lambda: 0),  # type: ignore[arg-type]
        new_shard=DoubleShard,
        write_timeout_ms=50,
    )


@in_loop
async def test_delete_through_the_runtime_survives_a_reload():
    log = MemoryLog()
    log.leader_epoch[0] = 1
    runtime = new_runtime(log)
    runtime.on_elected(0, 1)
    await loaded(runtime, 0)

    await runtime.write(
        0,
        lambda shard: Result(
            records=[
                group_record("idle"),
                group_record("busy", state="Stable", members=["m"]),
                offset_record("idle", "t", 0, 5),
                offset_record("simple", "t", 3, 1),
            ]
        ),
    )
    for group_id in ("idle", "simple"):
        answer = await runtime.write(
            0, lambda shard, g=group_id: admin.delete_group(shard.groups, shard.offsets, g)
        )
        assert answer == ErrorCode.none
    with pytest.raises(GroupError):
        await runtime.write(
            0, lambda shard: admin.delete_group(shard.groups, shard.offsets, "busy")
        )

    def groups_listed(shard):
        return [g.group_id for g in admin.list_groups(shard.groups, shard.offsets)]

    assert await runtime.read(0, groups_listed) == ["busy"]
    await runtime.close()

    reloaded = new_runtime(log)
    reloaded.on_elected(0, 1)
    await loaded(reloaded, 0)
    assert await reloaded.read(0, groups_listed) == ["busy"]
    assert await reloaded.read(0, lambda shard: shard.offsets.group_ids()) == set()
    await reloaded.close()


def test_group_types_are_kafkas_names():
    assert [t.value for t in GroupType] == ["classic", "consumer"]
