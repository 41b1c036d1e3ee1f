"""The consumer lag metric: sampled from committed offsets (replicated ones, through the runtime)
and local high watermarks, exported per group and partition, bounded, replaced as a whole."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from odradek.broker.group_lag import run_consumer_lag, sample_consumer_lag
from odradek.coordinator.result import Result
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.coordinator import GroupCoordinator, group_runtime
from odradek.groups.shard import ShardContext
from odradek.observability.metrics import consumer_lag_metrics, new_registry
from support.coordinator_memory import MemoryLog, in_loop, loaded
from support.group_doubles import DoubleShard, offset_record


def replicas(high_watermarks: dict[tuple[str, int], int]) -> SimpleNamespace:
    return SimpleNamespace(
        partitions={
            tp: SimpleNamespace(log=SimpleNamespace(high_watermark=hw))
            for tp, hw in high_watermarks.items()
        }
    )


async def coordinator_with(*records) -> GroupCoordinator:
    log = MemoryLog()
    config = GroupCoordinatorConfig(offsets_topic_num_partitions=2)
    runtime = group_runtime(
        log,
        lambda p, timer: ShardContext(p, config, timer, None, lambda: 0),  # type: ignore[arg-type]
        new_shard=DoubleShard,
        write_timeout_ms=50,
    )
    for p in range(2):
        log.leader_epoch[p] = 1
        runtime.on_elected(p, 1)
        await loaded(runtime, p)
    coordinator = GroupCoordinator(runtime, config)
    for record in records:
        await coordinator.write(record.key.group, lambda shard, r=record: Result(records=[r]))
    return coordinator


@in_loop
async def test_lag_is_high_watermark_minus_committed_for_local_partitions():
    coordinator = await coordinator_with(
        offset_record("a", "t", 0, 40),
        offset_record("a", "t", 1, 100),
        offset_record("b", "t", 0, 10),
        offset_record("b", "elsewhere", 0, 1),  # no replica here: not in the sample
    )
    rows = await sample_consumer_lag(coordinator, replicas({("t", 0): 50, ("t", 1): 90}))
    assert sorted(rows) == [("a", "t", 0, 10), ("a", "t", 1, 0), ("b", "t", 0, 40)]
    await coordinator.runtime.close()


@in_loop
async def test_the_metric_is_exported_and_bounded():
    registry = new_registry()
    metrics = consumer_lag_metrics(registry, series_max=2)
    metrics.update([("g", "t", 0, 5), ("g", "t", 1, 7), ("h", "t", 0, 1)])
    text = generate_latest(registry).decode()
    assert 'odradek_group_consumer_lag{group="g",partition="0",topic="t"} 5.0' in text
    assert 'odradek_group_consumer_lag{group="g",partition="1",topic="t"} 7.0' in text
    assert 'group="h"' not in text
    assert "odradek_group_consumer_lag_series_omitted 1.0" in text
    metrics.update([("h", "t", 0, 3)])
    assert metrics.lag("g", "t", 0) is None and metrics.lag("h", "t", 0) == 3


@in_loop
async def test_the_sampler_runs_until_stopped():
    coordinator = await coordinator_with(offset_record("a", "t", 0, 1))
    metrics = consumer_lag_metrics(new_registry())
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        run_consumer_lag(coordinator, replicas({("t", 0): 4}), metrics, stop, interval_s=0.01)
    )
    for _ in range(100):
        if metrics.lag("a", "t", 0) == 3:
            break
        await asyncio.sleep(0.01)
    assert metrics.lag("a", "t", 0) == 3
    stop.set()
    await asyncio.wait_for(task, 1)
    await coordinator.runtime.close()


def test_the_lag_holder_has_help_text_and_is_refused_twice():
    registry = new_registry()
    consumer_lag_metrics(registry)
    families = {
        f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
    }
    assert set(families) == {
        "odradek_group_consumer_lag",
        "odradek_group_consumer_lag_series_omitted",
    }
    assert all(f.documentation for f in families.values())
    with pytest.raises(ValueError, match="Duplicated"):
        consumer_lag_metrics(registry)
