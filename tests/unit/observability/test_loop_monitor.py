"""The event-loop monitor measures real stalls and turns readiness off only for long ones."""

from __future__ import annotations

import asyncio
import time

from odradek.common.clock import ManualClock
from odradek.observability.loop_monitor import EventLoopMonitor
from odradek.observability.metrics import common_metrics, new_registry


def test_a_short_spike_keeps_the_service_ready():
    clock = ManualClock(monotonic_s=1000.0)
    monitor = EventLoopMonitor(unready_lag_s=0.5, unready_after_s=5.0, clock=clock.monotonic)
    monitor.record(2.0, clock.monotonic())
    assert monitor.not_ready_reason() is None
    monitor.record(0.001, clock.monotonic())
    assert monitor.not_ready_reason() is None


def test_lag_that_stays_high_makes_it_unready_until_a_good_sample():
    clock = ManualClock(monotonic_s=1000.0)
    monitor = EventLoopMonitor(unready_lag_s=0.5, unready_after_s=5.0, clock=clock.monotonic)
    for _ in range(6):
        clock.advance(1.0)
        monitor.record(0.8, clock.monotonic())
    reason = monitor.not_ready_reason()
    assert reason is not None and "800 ms" in reason
    monitor.record(0.01, clock.monotonic())
    assert monitor.not_ready_reason() is None


def test_one_stall_as_long_as_the_window_counts_as_high_for_long():
    clock = ManualClock(monotonic_s=1000.0)
    monitor = EventLoopMonitor(unready_lag_s=0.5, unready_after_s=5.0, clock=clock.monotonic)
    monitor.record(6.0, clock.monotonic())  # the loop did not answer for 6 s
    assert monitor.not_ready_reason() is not None


def test_a_blocked_loop_shows_up_in_the_metric():
    registry = new_registry()
    metrics = common_metrics(registry)

    async def scenario():
        monitor = EventLoopMonitor(metrics, interval_s=0.01)
        monitor.start()
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # what a blocking call on the loop does to every client
        await asyncio.sleep(0.05)
        await monitor.stop()
        return monitor.max_lag_s

    max_lag_s = asyncio.run(scenario())
    assert max_lag_s >= 0.25
    assert registry.get_sample_value("odradek_event_loop_lag_seconds_count") >= 3
    assert registry.get_sample_value("odradek_event_loop_lag_seconds_bucket", {"le": "0.1"}) < (
        registry.get_sample_value("odradek_event_loop_lag_seconds_count")
    )
