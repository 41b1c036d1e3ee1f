"""KIP-848 groups through the real coordinator runtime and its in-memory log: heartbeats are
written and replayed, a new leader rebuilds the groups by loading the log, and the session timer
runs as a write that fences a silent member."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.consumer.group import ConsumerGroup
from odradek.groups.consumer.requests import HeartbeatRequest
from odradek.groups.coordinator import group_runtime
from odradek.groups.shard import ShardContext
from support.coordinator_memory import MemoryLog, in_loop, loaded

TOPIC_ID = uuid.UUID(int=7)


class Topics:
    def partition_count(self, topic: str) -> int | None:
        return 3 if topic == "a" else None

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return TOPIC_ID if topic == "a" else None

    def topic_names(self) -> list[str]:
        return ["a"]


def new_runtime(log: MemoryLog, config: GroupCoordinatorConfig) -> CoordinatorRuntime:
    return group_runtime(
        log,
        lambda partition, timer: ShardContext(partition, config, timer, Topics(), lambda: 0),
        write_timeout_ms=100,
    )


def join(member_id: str) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id="g",
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=1000,
        subscribed_topic_names=("a",),
        owned={},
    )


async def heartbeat(runtime: CoordinatorRuntime, request: HeartbeatRequest):
    return await runtime.write(0, lambda shard: shard.consumer.heartbeat(request))


def group_of(runtime: CoordinatorRuntime) -> ConsumerGroup:
    slot = runtime._slots[0]
    group = slot.shard.groups["g"]
    assert isinstance(group, ConsumerGroup)
    return group


@in_loop
async def test_a_new_leader_loads_the_same_group() -> None:
    log = MemoryLog()
    log.leader_epoch[0] = 1
    config = GroupCoordinatorConfig()
    first = new_runtime(log, config)
    first.on_elected(0, 1)
    await loaded(first, 0)
    assert (await heartbeat(first, join("m1"))).member_epoch == 1
    assert (await heartbeat(first, join("m2"))).member_epoch == 2
    before = group_of(first)
    await first.close()

    log.leader_epoch[0] = 2
    second = new_runtime(log, config)
    second.on_elected(0, 2)
    await loaded(second, 0)
    after = group_of(second)
    assert (after.group_epoch, after.target_epoch) == (before.group_epoch, before.target_epoch)
    assert after.members == before.members and after.target == before.target
    assert after.owners == before.owners
    answer = await heartbeat(second, replace(join("m1"), member_epoch=1, owned=None))
    assert answer.member_epoch == 1  # carries on where it was: told to revoke
    await second.close()


@in_loop
async def test_a_silent_member_is_fenced_by_its_session_timer() -> None:
    log = MemoryLog()
    log.leader_epoch[0] = 1
    config = replace(GroupCoordinatorConfig(), group_consumer_session_timeout_ms=100)
    runtime = new_runtime(log, config)
    runtime.on_elected(0, 1)
    await loaded(runtime, 0)
    await heartbeat(runtime, join("m1"))
    await heartbeat(runtime, join("m2"))
    for _ in range(20):
        await heartbeat(runtime, replace(join("m1"), member_epoch=1, owned=None))
        if set(group_of(runtime).members) == {"m1"}:
            break
        await asyncio.sleep(0.02)
    assert set(group_of(runtime).members) == {"m1"}
    await runtime.close()
