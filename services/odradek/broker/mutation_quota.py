"""The ``controller_mutation_rate`` client quota (KIP-599): Kafka's ``TokenBucket`` and
``ControllerMutationQuota`` (strict and permissive).

**What is counted.** Partition mutations: the partitions a CreateTopics creates, a
CreatePartitions adds, a DeleteTopics deletes (``admin.topics`` records them, per topic, after
the topic passed validation and before it is written; a validate-only request records nothing).

**Token bucket.** Per sensor (the quota entity's tags, ``broker.quotas``) a bucket of *tokens*:
it starts full, at the *burst* ``quota x quota.window.num x quota.window.size.seconds``; it refills
at ``quota`` tokens per second, never above the burst; each mutation takes one token. The quota
is *exhausted* while the tokens are below zero. A request is admitted while the bucket is not
negative, so one request may take it negative (a burst larger than the bucket still passes once);
the throttle is the time until it is back to zero, ``-tokens / quota`` seconds, rounded to the
millisecond (Kafka's ``ControllerMutationQuotaManager.throttleTimeMs``). The quota in force and
the burst are those of the moment of each reading, as Kafka's bucket reads its config each time.

**Strict and permissive** (``MutationQuota``, one per request, as Kafka's):

- *strict* (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+: clients that know
  THROTTLING_QUOTA_EXCEEDED): before each topic's mutations the bucket is checked; if exhausted,
  that topic is refused with ``ThrottlingQuotaExceededError`` (error 89) and nothing is taken,
  otherwise its mutations are taken whatever they leave. The answer's ``throttle_time_ms`` is the
  last refusal's throttle (0 if none was refused: a strict client is never throttled for a request
  that was admitted);
- *permissive* (older versions): every topic is admitted and its mutations taken; if that leaves
  the bucket negative the answer carries the throttle (and the connection is muted, KIP-219).

``throttle_ms()`` is the throttle recorded less the time since it was recorded, as Kafka's
(an answer that waited, e.g. for leaders, owes that much less). It is cut to the quota's
``max_throttle_ms`` (``quota.window.num x quota.window.size.seconds``, Odradek's bound of every
client throttle: a connection is never muted longer); the bucket itself keeps the whole debt, so
a strict client that comes back early is refused again and a permissive one is throttled again.
A quota of 0 admits one request and then throttles by that bound.

A bucket with no quota is never made: ``UNBOUNDED`` (no entity sets the key) records nothing.
Time is ``clock_ms`` (monotonic milliseconds), injected by ``ClientQuotas``. Runs on the broker's
event loop; not thread-safe.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from odradek.errors import ErrorCode, OdradekError

__all__ = [
    "UNBOUNDED",
    "MutationQuota",
    "ThrottlingQuotaExceededError",
    "TokenBucket",
]

# Kafka's Errors.THROTTLING_QUOTA_EXCEEDED message, which clients show.
THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


class ThrottlingQuotaExceededError(OdradekError):
    """A strict request's topic refused: the client's mutation quota is exhausted."""

    error_code = ErrorCode.throttling_quota_exceeded

    def __init__(self, throttle_ms: int):
        super().__init__(THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        self.throttle_ms = throttle_ms


class TokenBucket:
    """Kafka's ``TokenBucket`` (see the module): ``tokens`` as of ``last_ms``."""

    __slots__ = ("last_ms", "tokens")

    def __init__(self, burst: float, now_ms: float):
        self.tokens = burst  # a new bucket is full (Kafka's first refill fills it)
        self.last_ms = now_ms

    def measure(self, quota: float, burst: float, now_ms: float) -> float:
        """The tokens left at ``now_ms``."""
        self._refill(quota, burst, now_ms)
        return self.tokens

    def record(self, value: float, quota: float, burst: float, now_ms: float) -> None:
        """Take ``value`` tokens at ``now_ms`` (they may go below zero)."""
        self._refill(quota, burst, now_ms)
        self.tokens = min(burst, self.tokens - value)

    def _refill(self, quota: float, burst: float, now_ms: float) -> None:
        elapsed_ms = max(now_ms - self.last_ms, 0.0)
        self.tokens = min(burst, self.tokens + quota * elapsed_ms / 1000)
        self.last_ms = max(now_ms, self.last_ms)


def refill_ms(tokens: float, quota: float, max_throttle_ms: int) -> int:
    """How long until ``tokens`` (below zero) refill to zero at ``quota`` per second, cut."""
    if quota <= 0:
        return max_throttle_ms
    return min(int(math.floor(-tokens / quota * 1000 + 0.5)), max_throttle_ms)


# Told each recording: (mutations taken, throttle_ms given, tokens left).
Observe = Callable[[float, int, float], None]


class MutationQuota:
    """One request's ``controller_mutation_rate`` quota, strict or permissive (see the module)."""

    def __init__(
        self,
        bucket: TokenBucket | None,
        *,
        quota: float = math.inf,
        window_s: float = 0.0,
        strict: bool = False,
        clock_ms: Callable[[], float] = lambda: 0.0,
        max_throttle_ms: int = 0,
        observe: Observe | None = None,
    ):
        self.bucket = bucket
        self.quota = quota
        self.burst = quota * window_s  # window_s: quota.window.num x quota.window.size.seconds
        self.strict = strict
        self.clock_ms = clock_ms
        self.max_throttle_ms = max_throttle_ms
        self.observe = observe
        self._throttle_ms = 0
        self._throttled_at_ms = 0.0

    @property
    def bounded(self) -> bool:
        """Whether anything is counted (False: ``UNBOUNDED``)."""
        return self.bucket is not None

    @property
    def exceeded(self) -> bool:
        """Whether a strict quota has refused a topic of this request (Kafka's ``isExceeded``)."""
        return self.strict and self._throttle_ms > 0

    def record(self, mutations: float) -> None:
        """Count a topic's ``mutations``; a strict quota already exhausted raises
        ``ThrottlingQuotaExceededError`` and counts nothing."""
        bucket = self.bucket
        if bucket is None:
            return
        now_ms = self.clock_ms()
        if self.strict:
            tokens = bucket.measure(self.quota, self.burst, now_ms)
            if tokens < 0:
                self._throttled(tokens, now_ms)
                self._observe(0, self._throttle_ms, tokens)
                raise ThrottlingQuotaExceededError(self._throttle_ms)
            bucket.record(mutations, self.quota, self.burst, now_ms)
            self._observe(mutations, 0, bucket.tokens)
            return
        bucket.record(mutations, self.quota, self.burst, now_ms)
        throttle_ms = 0
        if bucket.tokens < 0:
            self._throttled(bucket.tokens, now_ms)
            throttle_ms = self._throttle_ms
        self._observe(mutations, throttle_ms, bucket.tokens)

    def throttle_ms(self) -> int:
        """The answer's throttle: the last one recorded, less the time since (Kafka's)."""
        if self._throttle_ms <= 0:
            return 0
        elapsed_ms = self.clock_ms() - self._throttled_at_ms
        return max(0, int(self._throttle_ms - elapsed_ms))

    def _throttled(self, tokens: float, now_ms: float) -> None:
        self._throttle_ms = refill_ms(tokens, self.quota, self.max_throttle_ms)
        self._throttled_at_ms = now_ms

    def _observe(self, mutations: float, throttle_ms: int, tokens: float) -> None:
        if self.observe is not None:
            self.observe(mutations, throttle_ms, tokens)


UNBOUNDED = MutationQuota(None)  # Kafka's UnboundedControllerMutationQuota: no quota applies
