"""Which request frames are decoded off the loop: large ones, and large Produce frames only
when they hold many topics or partitions (issue 23), read from the frame without decoding it;
and no full collection while one is worked on, for a bounded time."""

from __future__ import annotations

import gc
from datetime import timedelta
from importlib import import_module

import pytest

from odradek.common.clock import ManualClock
from odradek.large_messages import (
    FULL_COLLECTION_DEFER_MAX_S,
    OFF_LOOP_MIN_BYTES,
    PRODUCE_OFF_LOOP_MIN_ELEMENTS,
    full_collections_deferred,
    produce_elements,
    should_offload,
)
from odradek.protocol.apis import ApiKey
from odradek.protocol.codec import encode_request
from odradek.protocol.schemas import request_schema


def _produce(version: int, topics: int, partitions: int, records: bytes | None = None) -> bytes:
    m = import_module(request_schema(ApiKey.PRODUCE, version).__module__)
    partition_data = tuple(
        m.PartitionProduceData(index=i, records=records) for i in range(partitions)
    )
    topic = m.TopicProduceData(name="t", partition_data=partition_data)
    request = m.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=timedelta(seconds=1),
        topic_data=(topic,) * topics,
    )
    return encode_request(request, 1, "client")


@pytest.mark.parametrize("version", [3, 8, 9, 11])  # both sides of flexible versions (v9)
def test_produce_elements_are_read_from_the_frame(version):
    assert produce_elements(_produce(version, 3, 7)) == 10
    assert produce_elements(_produce(version, 0, 0)) == 0
    assert produce_elements(_produce(version, 3, 7)[:15]) == 0  # too short to say


def test_a_large_produce_of_few_partitions_stays_on_the_loop():
    frame = _produce(11, 1, 2, records=b"\0" * OFF_LOOP_MIN_BYTES)
    assert len(frame) >= OFF_LOOP_MIN_BYTES
    assert not should_offload(frame, ApiKey.PRODUCE)


def test_a_large_produce_of_many_tiny_elements_is_decoded_off_the_loop():
    frame = _produce(11, OFF_LOOP_MIN_BYTES // 3, 0)
    assert produce_elements(frame) >= PRODUCE_OFF_LOOP_MIN_ELEMENTS
    assert should_offload(frame, ApiKey.PRODUCE)
    assert not should_offload(_produce(11, 100, 0), ApiKey.PRODUCE)  # small: on the loop


def test_other_apis_go_by_size():
    assert should_offload(b"\0" * OFF_LOOP_MIN_BYTES, ApiKey.METADATA)
    assert not should_offload(b"\0" * (OFF_LOOP_MIN_BYTES - 1), ApiKey.METADATA)


def test_no_full_collection_while_large_requests_are_in_flight_then_as_before():
    before = gc.get_threshold()
    with full_collections_deferred():
        young, middle, old = gc.get_threshold()
        assert (young, middle) == before[:2] and old > 10**9  # the third generation out of reach
        with full_collections_deferred():  # another large request, overlapping
            assert gc.get_threshold()[2] == old
        assert gc.get_threshold()[2] == old  # one still in flight
    assert gc.get_threshold() == before


def test_overlapping_large_requests_defer_full_collections_for_a_bounded_time():
    before = gc.get_threshold()
    clock = ManualClock(monotonic_s=100.0)
    with full_collections_deferred(clock.monotonic):
        clock.advance(FULL_COLLECTION_DEFER_MAX_S + 1)
        with full_collections_deferred(
            clock.monotonic
        ):  # one more, past the bound: collections resume
            assert gc.get_threshold() == before
        with full_collections_deferred(clock.monotonic):
            assert gc.get_threshold() == before  # until none is in flight
    assert gc.get_threshold() == before
    with full_collections_deferred(clock.monotonic):  # the next one defers again
        assert gc.get_threshold()[2] > 10**9
    assert gc.get_threshold() == before
