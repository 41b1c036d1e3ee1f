"""controller_mutation_rate (broker.mutation_quota): Kafka's token bucket (burst, refill, a request
admitted while not negative), strict and permissive quotas, their throttles, on a fake clock."""

from __future__ import annotations

import pytest

from odradek.broker.mutation_quota import UNBOUNDED, ThrottlingQuotaExceededError, TokenBucket
from odradek.broker.quotas import DEFAULT_ENTITY, ClientQuotas, QuotaEntity, QuotaType
from odradek.common.clock import ManualClock
from odradek.errors import ErrorCode

M = "controller_mutation_rate"
WINDOW_NUM, WINDOW_S = 11, 1


def quotas(config: dict[QuotaEntity, dict[str, str]], **kwargs) -> tuple[ClientQuotas, ManualClock]:
    clock = ManualClock(now_ms=5_000_000.0)
    q = ClientQuotas(clock_ms=clock, window_num=WINDOW_NUM, window_size_s=WINDOW_S, **kwargs)
    for entity, keys in config.items():
        q.set_entity(entity, keys)
    return q, clock


def test_the_bucket_starts_full_refills_at_the_quota_and_never_beyond_the_burst():
    bucket = TokenBucket(burst=22, now_ms=0)
    bucket.record(30, quota=2, burst=22, now_ms=0)
    assert bucket.tokens == -8
    assert bucket.measure(quota=2, burst=22, now_ms=1500) == pytest.approx(-5)
    assert bucket.measure(quota=2, burst=22, now_ms=100_000) == 22  # capped at the burst


def test_strict_admits_while_not_negative_then_refuses_until_back_to_zero():
    q, clock = quotas({QuotaEntity(None, DEFAULT_ENTITY): {M: "2"}})
    # burst: 2/s x 11 windows x 1 s = 22 partitions
    first = q.mutation_quota("alice", "app", strict=True)
    first.record(22)  # the whole burst: the bucket at 0
    first.record(5)  # 0 is not negative: admitted, the bucket now at -5
    assert first.throttle_ms() == 0  # a strict request is throttled only when refused
    assert not first.exceeded
    with pytest.raises(ThrottlingQuotaExceededError) as refused:
        first.record(1)
    assert refused.value.error_code == ErrorCode.throttling_quota_exceeded
    assert refused.value.throttle_ms == 2500  # 5 tokens at 2 per second
    assert first.exceeded
    assert first.throttle_ms() == 2500

    clock.now_ms += 1000  # the answer waited a second: it owes that much less
    assert first.throttle_ms() == 1500
    second = q.mutation_quota("alice", "app", strict=True)
    with pytest.raises(ThrottlingQuotaExceededError) as again:
        second.record(1)  # nothing was taken by the refusals: still -3
    assert again.value.throttle_ms == 1500

    clock.now_ms += 1500
    third = q.mutation_quota("alice", "app", strict=True)
    third.record(3)  # back to 0: admitted
    assert third.throttle_ms() == 0


def test_permissive_admits_everything_and_throttles_once_negative():
    q, clock = quotas({QuotaEntity("bob", None): {M: "10"}})
    quota = q.mutation_quota("bob", "any", strict=False)
    quota.record(100)  # burst 110: 10 left
    assert quota.throttle_ms() == 0
    quota.record(30)  # -20: 2 s at 10 per second
    assert quota.throttle_ms() == 2000
    quota.record(10)  # never refused
    assert quota.throttle_ms() == 3000
    assert not quota.exceeded
    clock.now_ms += 500
    assert quota.throttle_ms() == 2500


def test_a_user_quota_is_one_bucket_for_all_its_clients_and_unknown_clients_are_unbounded():
    q, _ = quotas({QuotaEntity("bob", None): {M: "1"}})
    q.mutation_quota("bob", "one", strict=True).record(11)
    q.mutation_quota("bob", "two", strict=True).record(1)  # 0: admitted, -1
    with pytest.raises(ThrottlingQuotaExceededError):
        q.mutation_quota("bob", "three", strict=True).record(1)
    assert q.mutation_quota("carol", "one", strict=True) is UNBOUNDED
    UNBOUNDED.record(10**9)
    assert UNBOUNDED.throttle_ms() == 0


def test_the_most_specific_entity_wins_as_for_the_other_quotas():
    q, _ = quotas(
        {
            QuotaEntity("bob", "app"): {M: "100"},
            QuotaEntity("bob", None): {M: "1"},
        }
    )
    q.mutation_quota("bob", "app", strict=True).record(1000)  # its own bucket of 1100
    q.mutation_quota("bob", "app", strict=True).record(100)
    q.mutation_quota("bob", "other", strict=True).record(11)  # the user's bucket of 11


def test_the_burst_follows_a_changed_quota():
    q, clock = quotas({QuotaEntity(None, DEFAULT_ENTITY): {M: "1"}})
    q.mutation_quota("u", "c", strict=True).record(11)
    q.set_entity(QuotaEntity(None, DEFAULT_ENTITY), {M: "100"})
    clock.now_ms += 10_000  # refills at the new quota, up to the new burst of 1100
    q.mutation_quota("u", "c", strict=True).record(1000)
    q.mutation_quota("u", "c", strict=True).record(1)


def test_a_throttle_is_cut_to_the_windows_but_the_debt_is_kept():
    q, clock = quotas({QuotaEntity(None, DEFAULT_ENTITY): {M: "1"}})
    quota = q.mutation_quota("u", "c", strict=False)
    quota.record(111)  # -100: 100 s owed
    assert quota.throttle_ms() == WINDOW_NUM * WINDOW_S * 1000
    clock.now_ms += 11_000
    with pytest.raises(ThrottlingQuotaExceededError) as refused:
        q.mutation_quota("u", "c", strict=True).record(1)  # -89 still
    assert refused.value.throttle_ms == 11_000


def test_a_zero_quota_admits_one_request_then_throttles_by_the_bound():
    q, _ = quotas({QuotaEntity(None, DEFAULT_ENTITY): {M: "0"}})
    q.mutation_quota("u", "c", strict=True).record(1)
    with pytest.raises(ThrottlingQuotaExceededError) as refused:
        q.mutation_quota("u", "c", strict=True).record(1)
    assert refused.value.throttle_ms == WINDOW_NUM * WINDOW_S * 1000


def test_the_rate_based_record_refuses_the_bucket_quota():
    q, _ = quotas({QuotaEntity(None, DEFAULT_ENTITY): {M: "1"}})
    with pytest.raises(ValueError, match="token bucket"):
        q.record(QuotaType.CONTROLLER_MUTATION, "u", "c", 1)


def test_metrics_count_mutations_refusals_and_tokens():
    seen, tokens = [], []

    class Metrics:
        def observe(self, quota, user, client_id, value, throttle_ms):
            seen.append((quota, user, client_id, value, throttle_ms))

        def tokens_left(self, user, client_id, left):
            tokens.append(left)

    q, _ = quotas({QuotaEntity(None, DEFAULT_ENTITY): {M: "1"}}, metrics=Metrics())
    quota = q.mutation_quota("u", "c", strict=True)
    quota.record(12)
    with pytest.raises(ThrottlingQuotaExceededError):
        quota.record(3)
    assert seen == [(M, "", "c", 12, 0), (M, "", "c", 0, 1000)]  # a client-id quota's tags
    assert tokens == [-1, -1]
