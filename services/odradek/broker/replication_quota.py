"""Replication throttles (KIP-73): Kafka's ``ReplicationQuotaManager``, one per side.

A broker has two quotas: the **leader** side counts the bytes it sends to followers for
partitions that ``leader.replication.throttled.replicas`` lists on this broker, the **follower**
side the bytes it fetches for partitions that ``follower.replication.throttled.replicas`` lists on
this broker (``config/throttle.py`` has the formats). Each side's bound is its dynamic rate,
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` (``update_quota``).

Kafka's rules, kept exactly:

- A partition is *throttled* when its topic's list names it on this broker (``is_throttled``).
  Every byte replicated for a throttled partition is recorded, in sync or not (leader: the sizes
  of the throttled partitions of each follower Fetch answer; follower: each throttled partition's
  records as appended).
- It is *held back* only when, besides, its replica is out of sync and the side's measured rate
  is over the bound (``should_throttle``). The leader then answers that partition with no records
  (its offsets still go out); the follower leaves it out of its next Fetch. A replica in sync is
  never delayed: on the leader, the follower is in the ISR; on the follower, its last fetch had
  caught up with the leader's high watermark.
- The rate is Kafka's ``SimpleRate`` over a ``SampledStat`` (``SampledRate``):
  ``replication.quota.window.num`` samples (11) of ``replication.quota.window.size.seconds`` (1 s)
  each; a sample older than all of them together is reset; the rate is the sum of the samples
  over the time since the oldest one started, but over at least one window. "Over the bound" is
  rate > bound, so a rate of Long.MAX_VALUE never holds anything back.

Time comes from ``clock_ms`` (monotonic milliseconds), injectable so tests drive it.

Runs on the broker's event loop; the metrics thread only reads the rate (``rate``, which changes
nothing), so a scrape never races a ``record``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from odradek.common.clock import monotonic_ms
from odradek.config.broker import BROKER_KEYS, BrokerConfig
from odradek.config.throttle import UNTHROTTLED_RATE, ThrottleRates, lists_replica
from odradek.config.topic import TopicConfig
from odradek.observability.metrics import ReplicationQuotaMetrics

__all__ = ["ReplicationQuota", "ReplicationQuotas", "SampledRate", "Side"]

WINDOW_NUM_DEFAULT: int = BROKER_KEYS["replication.quota.window.num"].default
WINDOW_SIZE_S_DEFAULT: int = BROKER_KEYS["replication.quota.window.size.seconds"].default


class Side(StrEnum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class _Sample:
    start_ms: float
    value: float = 0.0


class SampledRate:
    """Kafka's ``SimpleRate``: a sum over ``window_num`` samples, per second of time covered.

    Not thread-safe for ``record``; ``measure`` only reads.
    """

    def __init__(self, window_num: int, window_size_ms: float):
        if window_num < 1 or window_size_ms <= 0:
            raise ValueError("a rate needs at least one window of positive length")
        self.window_num = window_num
        self.window_size_ms = window_size_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_size_ms:
            sample = self._advance(now_ms)
        sample.value += value

    def measure(self, now_ms: float) -> float:
        """Units per second: live samples' sum over max(time since the oldest, one window).

        Kafka purges (resets to ``now``, empty) the samples older than all windows together
        before measuring; leaving those out and counting ``now`` as a start is the same.
        """
        expire_ms = self.window_num * self.window_size_ms
        live = [s for s in self._samples if now_ms - s.start_ms < expire_ms]
        oldest_ms = min((s.start_ms for s in live), default=now_ms)
        if len(live) < len(self._samples):
            oldest_ms = min(oldest_ms, now_ms)
        elapsed_ms = max(now_ms - oldest_ms, self.window_size_ms)
        return sum(s.value for s in live) * 1000 / elapsed_ms

    def start(self, now_ms: float) -> None:
        """Begin measuring at ``now_ms`` if nothing was recorded yet (Kafka's ``oldest(now)``
        creates the first sample when the quota is first checked)."""
        self._current_sample(now_ms)

    def _current_sample(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_num * self.window_size_ms:
            sample.start_ms, sample.value = now_ms, 0.0  # Kafka's purge of an obsolete sample
        return sample

    def _advance(self, now_ms: float) -> _Sample:
        self._current = (self._current + 1) % self.window_num
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms))
        else:
            sample = self._samples[self._current]
            sample.start_ms, sample.value = now_ms, 0.0
        return self._samples[self._current]


class ReplicationQuota:
    """One side's quota on one broker; see the module docstring."""

    def __init__(
        self,
        side: Side,
        broker_id: int,
        *,
        window_num: int = WINDOW_NUM_DEFAULT,
        window_size_s: float = WINDOW_SIZE_S_DEFAULT,
        rate_limit_bytes_per_s: int = UNTHROTTLED_RATE,
        clock_ms: Callable[[], float] = monotonic_ms,
        metrics: ReplicationQuotaMetrics | None = None,
    ):
        self.side = side
        self.broker_id = broker_id
        self.clock_ms = clock_ms
        self.rate_limit_bytes_per_s = rate_limit_bytes_per_s
        self._rate = SampledRate(window_num, window_size_s * 1000)
        self._throttled_bytes = self._held_back = None
        self._limit_gauge = None
        if metrics is not None:
            self._throttled_bytes = metrics.throttled_bytes.labels(side=side.value)
            self._held_back = metrics.held_back.labels(side=side.value)
            metrics.rate.labels(side=side.value).set_function(self.rate)
            self._limit_gauge = metrics.rate_limit.labels(side=side.value)
            self._limit_gauge.set(rate_limit_bytes_per_s)

    def update_quota(self, rate_limit_bytes_per_s: int) -> None:
        """A new bound; what was measured so far counts against it (Kafka keeps the sensor)."""
        self.rate_limit_bytes_per_s = rate_limit_bytes_per_s
        if self._limit_gauge is not None:
            self._limit_gauge.set(rate_limit_bytes_per_s)

    def _replicas(self, config: TopicConfig) -> tuple[str, ...]:
        if self.side is Side.LEADER:
            return config.leader_replication_throttled_replicas
        return config.follower_replication_throttled_replicas

    def is_throttled(self, config: TopicConfig, partition: int) -> bool:
        """Whether the topic's list for this side names ``partition`` on this broker."""
        return lists_replica(self._replicas(config), partition, self.broker_id)

    def is_quota_exceeded(self) -> bool:
        if self.rate_limit_bytes_per_s >= UNTHROTTLED_RATE:
            return False
        now_ms = self.clock_ms()
        self._rate.start(now_ms)
        return self._rate.measure(now_ms) > self.rate_limit_bytes_per_s

    def should_throttle(self, config: TopicConfig, partition: int, *, in_sync: bool) -> bool:
        """Kafka's ``shouldLeaderThrottle`` / ``shouldFollowerThrottle``; counts a hold-back."""
        held = not in_sync and self.is_throttled(config, partition) and self.is_quota_exceeded()
        if held and self._held_back is not None:
            self._held_back.inc()
        return held

    def record(self, size_bytes: int) -> None:
        """Bytes replicated for throttled partitions."""
        if size_bytes <= 0:
            return
        self._rate.record(size_bytes, self.clock_ms())
        if self._throttled_bytes is not None:
            self._throttled_bytes.inc(size_bytes)

    def rate(self) -> float:
        """The measured rate in bytes/s (reads only)."""
        return self._rate.measure(self.clock_ms())


@dataclass(frozen=True, slots=True)
class ReplicationQuotas:
    """A broker's two quotas; ``update`` applies new dynamic rates to both."""

    leader: ReplicationQuota
    follower: ReplicationQuota

    @classmethod
    def of(
        cls,
        config: BrokerConfig,
        metrics: ReplicationQuotaMetrics | None = None,
        clock_ms: Callable[[], float] = monotonic_ms,
    ) -> ReplicationQuotas:
        def quota(side: Side) -> ReplicationQuota:
            return ReplicationQuota(
                side,
                config.broker_id,
                window_num=config.replication_quota_window_num,
                window_size_s=config.replication_quota_window_size_seconds,
                clock_ms=clock_ms,
                metrics=metrics,
            )

        return cls(quota(Side.LEADER), quota(Side.FOLLOWER))

    def update(self, rates: ThrottleRates) -> None:
        self.leader.update_quota(rates.leader_bytes_per_s)
        self.follower.update_quota(rates.follower_bytes_per_s)
