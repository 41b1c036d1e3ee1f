"""The admin APIs over the real shard (offsets, classic and consumer managers): a simple
consumer's group lists, describes and is deleted by tombstones that a reloaded shard replays."""

from __future__ import annotations

import pytest

from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.errors import ErrorCode
from odradek.groups import admin
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import group_runtime
from odradek.groups.errors import GroupError
from odradek.groups.offsets import PartitionCommit
from odradek.groups.shard import ShardContext
from support.coordinator_memory import MemoryLog, in_loop, loaded


class Topics:
    def partition_count(self, topic: str) -> int | None:
        return 2 if topic == "t" else None

    def topic_id(self, topic: str):
        return None

    def topic_names(self) -> list[str]:
        return ["t"]


def new_runtime(log: MemoryLog) -> CoordinatorRuntime:
    config = GroupCoordinatorConfig()
    return group_runtime(
        log,
        lambda partition, timer: ShardContext(partition, config, timer, Topics(), lambda: 1000),
        write_timeout_ms=50,
    )


async def started(log: MemoryLog) -> CoordinatorRuntime:
    log.leader_epoch[0] = 1
    runtime = new_runtime(log)
    runtime.on_elected(0, 1)
    await loaded(runtime, 0)
    return runtime


def listed(shard):
    return [
        (g.group_id, g.protocol_type, g.state, g.type.value)
        for g in admin.list_groups(shard.groups, shard.offsets)
    ]


@in_loop
async def test_a_simple_consumers_group_through_the_real_shard():
    log = MemoryLog()
    runtime = await started(log)
    commits = [PartitionCommit("t", 0, 5), PartitionCommit("t", 1, 7)]
    answer = await runtime.write(
        0, lambda shard: shard.offsets.commit_offsets("simple", "", None, -1, commits)
    )
    assert set(answer.values()) == {ErrorCode.none}
    assert await runtime.read(0, listed) == [("simple", "", "Empty", "classic")]
    described = await runtime.read(
        0, lambda shard: admin.describe_group(shard.groups, shard.offsets, "simple")
    )
    assert (described.state, described.protocol_type, described.members) == ("Empty", "", ())

    deleted = await runtime.write(
        0, lambda shard: admin.delete_group(shard.groups, shard.offsets, "simple")
    )
    assert deleted == ErrorCode.none
    assert await runtime.read(0, listed) == []
    with pytest.raises(GroupError) as again:
        await runtime.write(
            0, lambda shard: admin.delete_group(shard.groups, shard.offsets, "simple")
        )
    assert again.value.error_code == ErrorCode.group_id_not_found
    await runtime.close()

    reloaded = await started(log)
    assert await reloaded.read(0, listed) == []
    assert await reloaded.read(0, lambda shard: shard.offsets.committed("simple")) == {}
    await reloaded.close()
