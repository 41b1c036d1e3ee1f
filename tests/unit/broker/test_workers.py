"""Validation runs on a worker thread when it may be slow: large, compressed or re-encoded sets."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from odradek.broker.workers import (
    COMPRESSED_INLINE_MAX_BYTES,
    INLINE_BATCHES_MAX,
    OFFLOAD_MIN_BYTES,
    Placement,
    Workers,
)
from odradek.config.topic import TopicConfig
from odradek.storage.compression import Compression
from odradek.storage.records import Record, encode_batch

DEFAULT = TopicConfig()


@pytest.fixture
def workers():
    async def make():
        return Workers()

    made = asyncio.run(make())
    yield made
    made.shutdown()


def test_small_uncompressed_record_sets_are_validated_inline(workers, kafka_batch):
    assert not workers.must_offload(kafka_batch([(b"k", b"v" * 1000)] * 10), DEFAULT)
    assert not workers.must_offload(b"", DEFAULT)
    assert not workers.must_offload(b"\x00" * 20, DEFAULT)  # not even a header: refused at once


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_a_small_compressed_batch_is_tried_on_the_loop_with_a_bound(workers, kafka_batch, codec):
    small = kafka_batch([(b"k", b"v" * 200)], codec=codec)
    assert len(small) < 1024
    assert workers.placement(small, DEFAULT) is Placement.INLINE_BOUNDED
    # Behind an uncompressed batch too: every header is read, not only the first.
    behind = kafka_batch([(b"k", b"v")]) + small
    assert workers.placement(behind, DEFAULT) is Placement.INLINE_BOUNDED
    # Our encoder keeps the codec even when it does not help (kafka-python's may not).
    records = [Record(i, 0, b"k", os.urandom(400).hex().encode()) for i in range(400)]
    large = encode_batch(records, base_offset=0, compression=Compression(codec))
    assert len(large) >= COMPRESSED_INLINE_MAX_BYTES
    assert workers.placement(large, DEFAULT) is Placement.THREAD


def test_large_sets_reencoding_topics_and_many_batches_go_to_a_thread(workers, kafka_batch):
    large = kafka_batch([(b"k", b"v" * 1000)] * (OFFLOAD_MIN_BYTES // 1000 + 10))
    assert len(large) >= OFFLOAD_MIN_BYTES and workers.must_offload(large, DEFAULT)
    tiny = kafka_batch([(b"k", b"v")])
    assert workers.must_offload(tiny, TopicConfig(compression_type="lz4"))
    many = tiny * (INLINE_BATCHES_MAX + 1)
    assert workers.must_offload(many, DEFAULT)
    assert not workers.must_offload(tiny * INLINE_BATCHES_MAX, DEFAULT)


def test_work_given_to_the_workers_runs_on_another_thread():
    async def scenario():
        workers = Workers()
        try:
            return await workers.validate(threading.current_thread)
        finally:
            workers.shutdown()

    assert asyncio.run(scenario()).name.startswith("odradek-validation")
