"""The broker's fetch session cache keeps KIP-227's rules: contexts, errors, eviction, bounds."""

from __future__ import annotations

import random

import pytest

from odradek.broker.fetch_sessions import (
    EPOCH_MAX,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
    next_epoch,
)
from odradek.broker.replica_manager import FetchPartitionRequest, FetchResult
from odradek.common.clock import ManualClock
from odradek.config.broker import BrokerConfig
from odradek.errors import ErrorCode
from odradek.storage.segment import FileSlice


def cache(
    slots: int = 10, partitions: int = 1000, clock: ManualClock | None = None
) -> FetchSessionCache:
    return FetchSessionCache(
        slots, partitions, monotonic=(clock or ManualClock()).monotonic, rng=random.Random(7)
    )


def want(topic: str, partition: int, offset: int = 0, max_bytes: int = 1 << 20):
    return FetchPartitionRequest(topic, partition, offset, max_bytes)


def result(request: FetchPartitionRequest, hw: int = 10, records: int = 0, **fields):
    slice_ = FileSlice(None, 0, records, request.fetch_offset + 1) if records else None  # type: ignore[arg-type]
    return FetchResult(
        request.topic,
        request.partition,
        high_watermark=hw,
        last_stable_offset=fields.pop("lso", hw),
        log_start_offset=fields.pop("log_start", 0),
        records=slice_,
        **fields,
    )


def open_session(
    sessions: FetchSessionCache, partitions, *, privileged: bool = False, hw: int = 10
) -> int:
    context = sessions.new_context(
        INVALID_SESSION_ID, INITIAL_EPOCH, partitions, privileged=privileged
    )
    assert isinstance(context, FullFetchContext)
    answer = context.respond([result(p, hw) for p in context.partitions])
    assert answer.error == ErrorCode.none
    assert len(answer.results) == len(partitions)
    return answer.session_id


def incremental(sessions, session_id, epoch, partitions=(), forgotten=()):
    return sessions.new_context(session_id, epoch, partitions, forgotten, privileged=False)


def test_epochs_go_up_by_one_and_wrap_to_one():
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(EPOCH_MAX) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_sessionless_full_fetch_reads_everything_and_makes_no_session():
    sessions = cache()
    parts = [want("a", 0), want("a", 1)]
    context = sessions.new_context(INVALID_SESSION_ID, FINAL_EPOCH, parts, privileged=False)
    assert isinstance(context, SessionlessFetchContext)
    assert context.partitions == parts
    answer = context.respond([result(p) for p in parts])
    assert (answer.session_id, len(answer.results), len(sessions)) == (0, 2, 0)


def test_a_full_fetch_opens_a_session_that_expects_epoch_one():
    sessions = cache()
    session_id = open_session(sessions, [want("a", 0), want("a", 1)])
    assert session_id != INVALID_SESSION_ID
    assert sessions.get(session_id).epoch == 1
    assert sessions.total_partitions == 2


def test_incremental_fetch_reads_the_session_and_answers_only_what_changed():
    sessions = cache()
    parts = [want("a", 0), want("a", 1), want("b", 0)]
    session_id = open_session(sessions, parts, hw=10)
    context = incremental(sessions, session_id, 1)
    assert isinstance(context, IncrementalFetchContext)
    assert context.partitions == parts  # nothing named: every partition of the session is read
    results = [
        result(parts[0], hw=10),  # unchanged: left out
        result(parts[1], hw=11),  # high watermark moved
        result(parts[2], hw=10, records=100),  # records
    ]
    answer = context.respond(results)
    assert answer.session_id == session_id
    assert [(r.topic, r.partition) for r in answer.results] == [("a", 1), ("b", 0)]
    # Nothing changed since: an empty answer.
    again = incremental(sessions, session_id, 2).respond(
        [result(parts[0], 10), result(parts[1], 11), result(parts[2], 10)]
    )
    assert again.results == []


@pytest.mark.parametrize(
    "change",
    [
        {"hw": 11, "lso": 10},
        {"lso": 9},
        {"log_start": 3},
        {"error": ErrorCode.not_leader_or_follower},
        {"diverging_epoch": (3, 7)},
    ],
    ids=["high_watermark", "last_stable_offset", "log_start_offset", "error", "diverging_epoch"],
)
def test_each_kind_of_change_is_answered(change):
    sessions = cache()
    part = want("a", 0)
    session_id = open_session(sessions, [part], hw=10)
    answer = incremental(sessions, session_id, 1).respond([result(part, **{"hw": 10, **change})])
    assert len(answer.results) == 1


def test_after_an_error_the_partition_is_answered_again_once_it_is_gone():
    sessions = cache()
    part = want("a", 0)
    session_id = open_session(sessions, [part], hw=10)
    # An error answer that still carries the offsets it had.
    failed = result(part, 10, error=ErrorCode.not_leader_or_follower)
    assert incremental(sessions, session_id, 1).respond([failed]).results == [failed]
    # The same state as before the error is news to the fetcher, which saw only the error.
    assert len(incremental(sessions, session_id, 2).respond([result(part, 10)]).results) == 1


def test_added_changed_and_forgotten_partitions_update_the_session():
    sessions = cache()
    session_id = open_session(sessions, [want("a", 0), want("a", 1)])
    context = incremental(
        sessions,
        session_id,
        1,
        partitions=[want("a", 1, offset=5, max_bytes=77), want("c", 0)],
        forgotten=[("a", 0), ("zzz", 9)],  # forgetting an unknown partition is harmless
    )
    assert context.partitions == [want("a", 1, offset=5, max_bytes=77), want("c", 0)]
    assert sessions.total_partitions == 2


def test_forgetting_every_partition_ends_the_session():
    sessions = cache()
    session_id = open_session(sessions, [want("a", 0)])
    context = incremental(sessions, session_id, 1, forgotten=[("a", 0)])
    assert isinstance(context, SessionlessFetchContext)
    assert context.respond([]).session_id == INVALID_SESSION_ID
    assert sessions.get(session_id) is None and sessions.total_partitions == 0


def test_partitions_answered_with_records_are_read_last_next_time():
    sessions = cache()
    parts = [want("a", 0), want("a", 1), want("a", 2)]
    session_id = open_session(sessions, parts)
    incremental(sessions, session_id, 1).respond(
        [result(parts[0], records=10), result(parts[1]), result(parts[2])]
    )
    assert [p.partition for p in incremental(sessions, session_id, 2).partitions] == [1, 2, 0]


def test_unknown_session_wrong_epoch_and_topic_id_mismatch_are_session_errors():
    sessions = cache()
    session_id = open_session(sessions, [want("a", 0)])
    for context, error in [
        (incremental(sessions, session_id + 1, 1), ErrorCode.fetch_session_id_not_found),
        (incremental(sessions, INVALID_SESSION_ID, 1), ErrorCode.fetch_session_id_not_found),
        (incremental(sessions, session_id, 2), ErrorCode.invalid_fetch_session_epoch),
        (incremental(sessions, session_id, -5), ErrorCode.invalid_fetch_session_epoch),
        (
            sessions.new_context(session_id, 1, [], privileged=False, uses_topic_ids=True),
            ErrorCode.fetch_session_topic_id_error,
        ),
    ]:
        assert isinstance(context, SessionErrorContext)
        assert context.partitions == []
        answer = context.respond([])
        assert (answer.error, answer.session_id, answer.results) == (error, 0, [])
    # Errors leave the session as it was: the right epoch still works.
    assert isinstance(incremental(sessions, session_id, 1), IncrementalFetchContext)


def test_a_request_handled_while_another_waited_makes_the_waiting_one_stale():
    sessions = cache()
    part = want("a", 0)
    session_id = open_session(sessions, [part])
    waiting = incremental(sessions, session_id, 1)
    incremental(sessions, session_id, 2).respond([result(part)])  # a duplicate moved on
    answer = waiting.respond([result(part, 99)])
    assert (answer.error, answer.session_id) == (ErrorCode.invalid_fetch_session_epoch, session_id)


def test_a_full_fetch_naming_a_session_closes_it():
    sessions = cache()
    first = open_session(sessions, [want("a", 0)])
    context = sessions.new_context(first, FINAL_EPOCH, [want("a", 0)], privileged=False)
    assert isinstance(context, SessionlessFetchContext)
    assert sessions.get(first) is None
    second = open_session(sessions, [want("a", 0)])
    context = sessions.new_context(second, INITIAL_EPOCH, [want("b", 0)], privileged=False)
    assert sessions.get(second) is None
    third = context.respond([result(want("b", 0))]).session_id
    assert third not in (INVALID_SESSION_ID, second)
    assert len(sessions) == 1 and sessions.total_partitions == 1


def test_a_partition_named_twice_is_fetched_once_with_its_last_parameters():
    sessions = cache()
    context = sessions.new_context(
        0, INITIAL_EPOCH, [want("a", 0, 1), want("a", 0, 2)], privileged=False
    )
    assert context.partitions == [want("a", 0, 2)]


def test_zero_slots_means_no_sessions():
    sessions = cache(slots=0)
    assert open_session(sessions, [want("a", 0)]) == INVALID_SESSION_ID


def test_a_full_cache_refuses_a_consumer_while_every_session_is_young():
    clock = ManualClock(monotonic_s=1000.0)
    sessions = cache(slots=2, clock=clock)
    assert open_session(sessions, [want("a", 0)])
    assert open_session(sessions, [want("a", 0)])
    # Young sessions are safe from a consumer, even one with more partitions.
    assert open_session(sessions, [want("a", p) for p in range(5)]) == INVALID_SESSION_ID
    assert len(sessions) == 2 and sessions.evictions == 0


def test_a_stale_session_is_evicted_first():
    clock = ManualClock(monotonic_s=1000.0)
    sessions = cache(slots=2, clock=clock)
    stale = open_session(sessions, [want("a", p) for p in range(9)])
    clock.advance(ms=MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS)
    busy = open_session(sessions, [want("a", 0)])
    clock.advance(ms=1)  # stale is now unused for longer than the eviction time
    new = open_session(sessions, [want("b", 0)])
    assert new != INVALID_SESSION_ID
    assert sessions.get(stale) is None and sessions.get(busy) is not None
    assert sessions.evictions == 1


def test_a_follower_evicts_a_young_consumer_session_and_consumers_cannot_evict_followers():
    clock = ManualClock(monotonic_s=1000.0)
    sessions = cache(slots=1, clock=clock)
    consumer = open_session(sessions, [want("a", p) for p in range(50)])
    follower = open_session(sessions, [want("a", 0)], privileged=True)
    assert follower != INVALID_SESSION_ID and sessions.get(consumer) is None
    clock.advance(ms=MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS + 1)
    incremental(sessions, follower, 1)  # used: not stale, though old
    big_consumer = [want("a", p) for p in range(500)]
    assert open_session(sessions, big_consumer) == INVALID_SESSION_ID
    assert sessions.get(follower) is not None


def test_an_old_session_is_evicted_by_a_bigger_one_not_by_a_smaller_one():
    clock = ManualClock(monotonic_s=1000.0)
    sessions = cache(slots=1, clock=clock)
    old = open_session(sessions, [want("a", p) for p in range(3)])
    clock.advance(ms=MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS + 1)
    incremental(sessions, old, 1)  # used just now: old but not stale
    assert open_session(sessions, [want("b", p) for p in range(3)]) == INVALID_SESSION_ID
    bigger = open_session(sessions, [want("b", p) for p in range(4)])
    assert bigger != INVALID_SESSION_ID and sessions.get(old) is None


def test_cached_partitions_never_pass_the_bound():
    clock = ManualClock(monotonic_s=1000.0)
    sessions = cache(slots=100, partitions=10, clock=clock)
    first = open_session(sessions, [want("a", p) for p in range(6)])
    # 6 + 5 > 10 and the first session is young: no room, nothing evicted.
    assert open_session(sessions, [want("b", p) for p in range(5)]) == INVALID_SESSION_ID
    assert open_session(sessions, [want("b", p) for p in range(11)]) == INVALID_SESSION_ID
    second = open_session(sessions, [want("b", p) for p in range(4)])
    assert second != INVALID_SESSION_ID and sessions.total_partitions == 10
    # Growing a session past the bound closes it: the fetcher starts over with a full fetch.
    context = incremental(sessions, second, 1, partitions=[want("c", 0)])
    assert context.respond([]).error == ErrorCode.fetch_session_id_not_found
    assert sessions.get(second) is None and sessions.total_partitions == 6
    # Swapping partitions within the bound is fine.
    swap = incremental(sessions, first, 1, [want("c", 0)], forgotten=[("a", 0)])
    assert isinstance(swap, IncrementalFetchContext) and sessions.total_partitions == 6


def test_eviction_frees_enough_partitions_or_evicts_nothing():
    clock = ManualClock(monotonic_s=1000.0)
    sessions = cache(slots=100, partitions=10, clock=clock)
    small = [open_session(sessions, [want(f"t{i}", 0), want(f"t{i}", 1)]) for i in range(4)]
    keeper = open_session(sessions, [want("k", 0), want("k", 1)], privileged=True)
    assert sessions.total_partitions == 10
    clock.advance(ms=MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS + 1)
    for session_id, epoch in [(s, 1) for s in small] + [(keeper, 1)]:
        incremental(sessions, session_id, epoch)  # all in use: none stale
    # 9 partitions need the 4 consumer sessions and the follower's: the follower's is worth
    # more than a consumer's, so nothing at all is evicted.
    assert open_session(sessions, [want("n", p) for p in range(9)]) == INVALID_SESSION_ID
    assert len(sessions) == 5 and sessions.evictions == 0
    # 8 partitions: the four consumer sessions (2 each, fewer than 8) make room.
    assert open_session(sessions, [want("n", p) for p in range(8)]) != INVALID_SESSION_ID
    assert sessions.get(keeper) is not None and sessions.evictions == 4


def test_an_illegal_topic_name_is_never_cached():
    sessions = cache()
    long_name = "x" * 250
    assert open_session(sessions, [want(long_name, 0)]) == INVALID_SESSION_ID
    session_id = open_session(sessions, [want("a", 0)])
    context = incremental(sessions, session_id, 1, partitions=[want(long_name, 0)])
    assert context.respond([]).error == ErrorCode.fetch_session_id_not_found
    assert len(sessions) == 0 and sessions.total_partitions == 0


def test_a_hostile_client_opening_sessions_cannot_grow_the_cache_past_its_bounds():
    clock = ManualClock(monotonic_s=1000.0)
    sessions = cache(slots=20, partitions=500, clock=clock)
    for round_ in range(200):
        clock.advance(ms=MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS // 10)
        parts = [want(f"t{round_}", p) for p in range(round_ % 60 + 1)]
        session_id = open_session(sessions, parts, privileged=round_ % 2 == 0)
        if session_id:
            incremental(sessions, session_id, 1, [want(f"u{round_}", p) for p in range(30)])
        assert len(sessions) <= 20
        assert sessions.total_partitions <= 500
        assert sessions.total_partitions == sum(
            len(s.partitions) for s in sessions.sessions.values()
        )


def test_the_cache_is_sized_by_the_brokers_keys():
    config = BrokerConfig.from_properties(
        {
            "broker.id": 1,
            "zookeeper.connect": "127.0.0.1:2181",
            "log.dirs": "/var/lib/odradek",
            "max.incremental.fetch.session.cache.slots": "3",
            "odradek.max.incremental.fetch.session.cache.partitions": "50",
        }
    )
    sized = FetchSessionCache.of(config)
    assert (sized.max_slots, sized.max_partitions) == (3, 50)
    assert (FetchSessionCache.of().max_slots, FetchSessionCache.of().max_partitions) == (
        1000,
        100_000,
    )
