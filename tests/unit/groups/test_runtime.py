"""The coordinator runtime: writes are appended, then replayed, and answered once replicated;
loading replays the log through the same path; resigning unloads; timers run as writes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from odradek.coordinator.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)
from odradek.coordinator.result import Result
from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.errors import RequestTimedOutError
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import group_runtime
from odradek.groups.records import CoordinatorRecord, register
from odradek.groups.shard import GroupCoordinatorShard, ShardContext
from support.coordinator_memory import MemoryLog, in_loop, loaded


@dataclass(frozen=True, slots=True)
class CounterKey:
    __record_type__: ClassVar[int] = 999  # a test-only record type
    __flexible__: ClassVar[bool] = False
    name: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True)
class CounterValue:
    __version__: ClassVar[int] = 0
    __flexible__: ClassVar[bool] = False
    count: int = field(metadata={"kafka_type": "int32"})


register(CounterKey, CounterValue)


class Counters:
    """A manager: counters replayed from records."""

    RECORD_KEYS = (CounterKey,)

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.loaded = False
        self.unloaded = False

    def replay(self, record: CoordinatorRecord) -> None:
        if record.value is None:
            self.counts.pop(record.key.name, None)
        else:
            self.counts[record.key.name] = record.value.count

    def on_loaded(self) -> None:
        self.loaded = True

    def on_unloaded(self) -> None:
        self.unloaded = True


class CounterShard(GroupCoordinatorShard):
    def __init__(self, context: ShardContext):
        super().__init__(context)
        self.counters = Counters()
        self._add(self.counters)


def new_runtime(log: MemoryLog) -> CoordinatorRuntime:
    config = GroupCoordinatorConfig()
    return group_runtime(
        log,
        lambda partition, timer: ShardContext(partition, config, timer, None, lambda: 0),  # type: ignore[arg-type]
        new_shard=CounterShard,
        write_timeout_ms=50,
    )


def increment(name: str):
    def operation(shard: CounterShard) -> Result[int]:
        count = shard.counters.counts.get(name, 0) + 1
        return Result([CoordinatorRecord(CounterKey(name), CounterValue(count))], response=count)

    return operation


@in_loop
async def test_writes_replay_and_a_new_leader_rebuilds_the_same_state():
    log = MemoryLog()
    log.leader_epoch[3] = 1
    runtime = new_runtime(log)
    with pytest.raises(NotCoordinatorError):
        await runtime.write(3, increment("a"))
    runtime.on_elected(3, 1)
    await loaded(runtime, 3)
    assert [await runtime.write(3, increment("a")) for _ in range(3)] == [1, 2, 3]
    await runtime.write(3, increment("b"))
    runtime.on_resigned(3)
    with pytest.raises(NotCoordinatorError):
        await runtime.read(3, lambda shard: shard.counters.counts)

    log.leader_epoch[3] = 2
    successor = new_runtime(log)
    successor.on_elected(3, 2)
    with pytest.raises(CoordinatorLoadInProgressError):
        await successor.write(3, increment("a"))
    await loaded(successor, 3)
    assert await successor.read(3, lambda shard: dict(shard.counters.counts)) == {"a": 3, "b": 1}
    assert await successor.write(3, increment("a")) == 4


@in_loop
async def test_a_deposed_leader_writes_nothing_and_applies_nothing():
    log = MemoryLog()
    log.leader_epoch[0] = 1
    runtime = new_runtime(log)
    runtime.on_elected(0, 1)
    await loaded(runtime, 0)
    log.leader_epoch[0] = 2  # another broker leads now; this one has not heard yet
    with pytest.raises(NotCoordinatorError):
        await runtime.write(0, increment("a"))
    assert await runtime.read(0, lambda shard: dict(shard.counters.counts)) == {}


@in_loop
async def test_an_unreplicated_write_is_not_acknowledged_and_reads_wait_for_it():
    log = MemoryLog()
    log.leader_epoch[0] = 1
    runtime = new_runtime(log)
    runtime.on_elected(0, 1)
    await loaded(runtime, 0)
    log.replicate = False
    outcome: list[BaseException | None] = []

    def operation(shard: CounterShard) -> Result[int]:
        result = increment("a")(shard)
        result.on_written = outcome.append
        return result

    with pytest.raises(CoordinatorNotAvailableError):
        await runtime.write(0, operation)
    assert isinstance(outcome[0], RequestTimedOutError)
    with pytest.raises(CoordinatorNotAvailableError):
        await runtime.read(0, lambda shard: shard.counters.counts)


@in_loop
async def test_timers_run_as_writes_and_resigning_cancels_them():
    log = MemoryLog()
    log.leader_epoch[0] = 1
    runtime = new_runtime(log)
    runtime.on_elected(0, 1)
    await loaded(runtime, 0)
    shard = await runtime.read(0, lambda shard: shard)
    fired = asyncio.Event()

    def tick() -> Result[None]:
        fired.set()
        return Result([CoordinatorRecord(CounterKey("timer"), CounterValue(7))])

    shard.context.timer.schedule("tick", 10, tick)
    await asyncio.wait_for(fired.wait(), 2)
    for _ in range(100):
        if shard.counters.counts.get("timer") == 7:
            break
        await asyncio.sleep(0.01)
    assert shard.counters.counts["timer"] == 7

    shard.context.timer.schedule("late", 50, tick)
    fired.clear()
    runtime.on_resigned(0)
    assert shard.counters.unloaded
    await asyncio.sleep(0.1)
    assert not fired.is_set()
    await runtime.close()


@in_loop
async def test_an_older_resignation_does_not_unload_a_newer_leadership():
    log = MemoryLog()
    log.leader_epoch[0] = 5
    runtime = new_runtime(log)
    runtime.on_elected(0, 5)
    await loaded(runtime, 0)
    runtime.on_resigned(0, leader_epoch=4)
    assert runtime.is_active(0)
    await runtime.close()
