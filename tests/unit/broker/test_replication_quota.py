"""The replication quota measures as Kafka's SimpleRate does and holds back only what it must."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from odradek.broker.replication_quota import ReplicationQuota, SampledRate, Side
from odradek.common.clock import ManualClock
from odradek.config.throttle import UNTHROTTLED_RATE
from odradek.config.topic import TopicConfig
from odradek.observability.metrics import new_registry, replication_quota_metrics

BROKER = 2


def throttled(**lists: str) -> TopicConfig:
    return TopicConfig.from_properties({k.replace("_", "."): v for k, v in lists.items()})


def test_a_rate_is_the_sum_over_at_least_one_window():
    rate = SampledRate(window_num=11, window_size_ms=1000)
    rate.record(500, 0)
    assert rate.measure(100) == pytest.approx(500)  # 0.1 s elapsed counts as one window
    rate.record(500, 1500)
    assert rate.measure(2000) == pytest.approx(500)  # 1000 bytes over 2 s
    assert rate.measure(4000) == pytest.approx(250)


def test_samples_older_than_every_window_no_longer_count():
    rate = SampledRate(window_num=3, window_size_ms=1000)
    for second in range(3):
        rate.record(300, second * 1000)
    assert rate.measure(2500) == pytest.approx(900 / 2.5)
    # At 3.0 s the first sample (started at 0) is 3 windows old: gone.
    assert rate.measure(3000) == pytest.approx(600 / 2.0)
    rate.record(100, 3000)  # reuses the oldest sample's slot
    assert rate.measure(3000) == pytest.approx(700 / 2.0)
    assert rate.measure(60_000) == 0


def test_the_quota_is_exceeded_above_its_bound_only():
    clock = ManualClock(now_ms=5_000_000.0)
    quota = ReplicationQuota(Side.FOLLOWER, BROKER, rate_limit_bytes_per_s=1000, clock_ms=clock)
    assert not quota.is_quota_exceeded()  # measuring starts now
    quota.record(1000)
    assert not quota.is_quota_exceeded()  # 1000 bytes in the first window: at the bound
    quota.record(1)
    assert quota.is_quota_exceeded()
    clock.advance(1.5)
    assert not quota.is_quota_exceeded()  # 1001 bytes over 1.5 s
    quota.record(600)
    assert quota.is_quota_exceeded()  # 1601 over 1.5 s
    clock.advance(0.2)
    assert not quota.is_quota_exceeded()  # 1601 over 1.7 s


def test_over_a_long_run_the_recorded_rate_stays_at_the_bound():
    """A follower that fetches 64 KiB whenever it is allowed averages the bound over time."""
    clock = ManualClock(now_ms=5_000_000.0)
    bound = 256 * 1024
    quota = ReplicationQuota(Side.FOLLOWER, BROKER, rate_limit_bytes_per_s=bound, clock_ms=clock)
    fetched = 0
    for _ in range(3000):  # 30 s in steps of 10 ms
        if not quota.is_quota_exceeded():
            quota.record(64 * 1024)
            fetched += 64 * 1024
        clock.advance(0.01)
    assert bound * 30 * 0.9 <= fetched <= bound * 30 + 4 * 64 * 1024


def test_unthrottled_never_holds_back_and_a_new_bound_applies_at_once():
    clock = ManualClock(now_ms=5_000_000.0)
    quota = ReplicationQuota(Side.LEADER, BROKER, clock_ms=clock)
    assert quota.rate_limit_bytes_per_s == UNTHROTTLED_RATE
    quota.record(10**15)
    assert not quota.is_quota_exceeded()
    quota.update_quota(1000)
    assert quota.is_quota_exceeded()  # what was measured counts against the new bound
    quota.update_quota(UNTHROTTLED_RATE)
    assert not quota.is_quota_exceeded()


def test_only_listed_out_of_sync_replicas_are_held_back():
    clock = ManualClock(now_ms=5_000_000.0)
    leader = ReplicationQuota(Side.LEADER, BROKER, rate_limit_bytes_per_s=10, clock_ms=clock)
    follower = ReplicationQuota(Side.FOLLOWER, BROKER, rate_limit_bytes_per_s=10, clock_ms=clock)
    config = throttled(
        leader_replication_throttled_replicas=f"0:{BROKER},1:9",
        follower_replication_throttled_replicas=f"1:{BROKER}",
    )
    # Each side reads its own list, and only the pairs naming this broker.
    assert leader.is_throttled(config, 0) and not leader.is_throttled(config, 1)
    assert follower.is_throttled(config, 1) and not follower.is_throttled(config, 0)
    leader.record(1000)
    follower.record(1000)
    assert leader.should_throttle(config, 0, in_sync=False)
    assert not leader.should_throttle(config, 0, in_sync=True)  # in sync: never delayed
    assert not leader.should_throttle(config, 1, in_sync=False)  # not listed here
    assert follower.should_throttle(config, 1, in_sync=False)
    assert not follower.should_throttle(config, 0, in_sync=False)
    everything = throttled(leader_replication_throttled_replicas="*")
    assert leader.should_throttle(everything, 41, in_sync=False)


def test_the_metrics_show_bytes_hold_backs_rate_and_bound():
    clock = ManualClock(now_ms=5_000_000.0)
    registry = new_registry()
    metrics = replication_quota_metrics(registry)
    quota = ReplicationQuota(
        Side.FOLLOWER, BROKER, rate_limit_bytes_per_s=100, clock_ms=clock, metrics=metrics
    )
    config = throttled(follower_replication_throttled_replicas="*")
    quota.is_quota_exceeded()
    quota.record(400)
    clock.advance(2)
    assert quota.should_throttle(config, 0, in_sync=False)
    text = generate_latest(registry).decode()
    assert 'odradek_replication_throttled_bytes_total{side="follower"} 400.0' in text
    assert 'odradek_replication_throttled_partitions_held_back_total{side="follower"} 1.0' in text
    assert 'odradek_replication_throttled_bytes_per_second{side="follower"} 200.0' in text
    assert (
        'odradek_replication_throttled_rate_limit_bytes_per_second{side="follower"} 100.0' in text
    )
