"""Proves that a rolling restart (``odradek local restart --rolling``: each broker in turn gets
SIGTERM, does its controlled shutdown, starts again, and the next waits for a full ISR) under
continuous acks=all idempotent load loses no acknowledged record, duplicates none, and leaves the
replicas identical; and measures the longest produce stall each broker's restart caused.

The scenario is ``test_faults.run_scenario``'s (ZooKeeper, two controllers, three brokers, a
topic with 3 replicas and ``min.insync.replicas`` 2, two idempotent ``acks=all`` producers, the
checker and the replica comparison at the end); the fault is the whole rolling restart. The stall
of one broker's restart is the longest gap between two consecutive acknowledgements of one
partition, as the producers saw them, that overlaps the time from its SIGTERM until every ISR was
full again. It is printed and recorded in the history's timeline, not asserted: the target is
under 1 s per broker on loopback, and a loaded CI machine must not fail on timing.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest
from proof.checker import History
from test_faults import SEEDS, Run, run_scenario

from odradek.local import cluster
from odradek.local.rolling import Progress, rolling_restart

pytestmark = [pytest.mark.integration, pytest.mark.fault]

TRAILING_ACKS_S = 1.0  # producing after the last restart, so the last window has its next ack
PRODUCE_S_MAX = 100.0  # the workload's limit: longer than three restarts on a loaded machine


def longest_stall(history: History, start_s: float, end_s: float) -> tuple[float, int | None]:
    """(seconds, partition) of the longest gap between consecutive acks of one partition that
    overlaps ``[start_s, end_s]`` (times as the history records them)."""
    by_partition: dict[int, list[float]] = defaultdict(list)
    for ack in history.acks:
        by_partition[ack.partition].append(ack.ack_time_s)
    longest, where = 0.0, None
    for partition, times in by_partition.items():
        times.sort()
        for before, after in zip(times, times[1:], strict=False):
            if after >= start_s and before <= end_s and after - before > longest:
                longest, where = after - before, partition
    return longest, where


def rolling_restart_fault(stalls: dict[int, tuple[float, int | None]]):
    def fault(run: Run) -> None:
        windows: dict[int, list[float]] = {}

        def progress(step: Progress) -> None:
            now_s = time.monotonic() - run.started_s
            run.event(f"rolling restart: {step}")
            if step.phase == "stopping":
                windows[step.broker_id] = [now_s, now_s]
            elif step.phase == "in-sync":
                windows[step.broker_id][1] = now_s

        reports = rolling_restart(run.data_dir, on_progress=progress)
        run.state = cluster.ClusterState.read(run.data_dir)
        assert not [r.broker_id for r in reports if r.killed], "a broker had to be killed"
        time.sleep(TRAILING_ACKS_S)
        for broker_id, (start_s, end_s) in sorted(windows.items()):
            stalls[broker_id] = longest_stall(run.history, start_s, end_s)
            seconds, partition = stalls[broker_id]
            run.event(
                f"restart of broker {broker_id}: longest produce stall {seconds * 1000:.0f} ms "
                f"(partition {partition})"
            )

    return fault


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", SEEDS[:1])
def test_a_rolling_restart_under_acks_all_load_loses_nothing(tmp_path, seed):
    stalls: dict[int, tuple[float, int | None]] = {}
    run_scenario(tmp_path, seed, rolling_restart_fault(stalls), duration_s_max=PRODUCE_S_MAX)
    assert sorted(stalls) == [1, 2, 3], stalls
    print(
        "longest produce stall per broker restart: "
        + ", ".join(f"broker {b}: {s * 1000:.0f} ms" for b, (s, _) in sorted(stalls.items())),
        flush=True,
    )
