"""The broker's data path rules: leadership, acks and min ISR, high watermark, long-poll fetch."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import FetchPartitionRequest, ReplicaManager
from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode
from odradek.storage.batch import iter_batches
from odradek.storage.manager import LogManager

BROKER = 1


@pytest.fixture
def manager(tmp_path, disk):
    log_manager = LogManager([tmp_path / "disk-0"], file_ops=disk)
    log_manager.load()
    replicas = ReplicaManager(BROKER, log_manager)
    yield replicas
    log_manager.shutdown()


def lead(replicas: ReplicaManager, topic="t", partition=0, epoch=0, isr=(BROKER,), **config):
    state = PartitionState(leader=BROKER, leader_epoch=epoch, isr=tuple(isr), replicas=(BROKER,))
    replicas.become_leader_or_follower(topic, partition, state, TopicConfig(**config))
    return replicas.get_partition(topic, partition)


def produce(replicas: ReplicaManager, acks: int, entries):
    return asyncio.run(replicas.append_records(acks, entries))


def records(kafka_batch, n=3, value=b"v"):
    return kafka_batch([(b"k%d" % i, value) for i in range(n)])


def test_the_leader_appends_and_the_high_watermark_follows(manager, kafka_batch):
    partition = lead(manager)
    for acks in (0, 1, -1):
        result = produce(manager, acks, {("t", 0): records(kafka_batch)})[("t", 0)]
        assert result.error == ErrorCode.none
    assert result.base_offset == 6
    assert partition.log.high_watermark == partition.log.log_end_offset == 9


def test_errors_are_per_partition(manager, kafka_batch):
    lead(manager, partition=0)
    corrupt = bytearray(records(kafka_batch))
    corrupt[-1] ^= 0xFF
    results = produce(
        manager,
        1,
        {("t", 0): records(kafka_batch), ("t", 1): records(kafka_batch), ("u", 0): bytes(corrupt)},
    )
    assert results[("t", 0)].error == ErrorCode.none
    assert results[("t", 1)].error == ErrorCode.unknown_topic_or_partition
    assert results[("u", 0)].error == ErrorCode.unknown_topic_or_partition
    lead(manager, topic="u")
    result = produce(manager, 1, {("u", 0): bytes(corrupt)})[("u", 0)]
    assert result.error == ErrorCode.corrupt_message
    assert "CRC" in result.error_message


def test_invalid_acks_fail_every_partition(manager, kafka_batch):
    lead(manager)
    result = produce(manager, 2, {("t", 0): records(kafka_batch)})[("t", 0)]
    assert result.error == ErrorCode.invalid_required_acks
    assert manager.get_partition("t", 0).log.log_end_offset == 0


def test_acks_all_below_min_insync_replicas_writes_nothing(manager, kafka_batch):
    partition = lead(manager, min_insync_replicas=2)
    result = produce(manager, -1, {("t", 0): records(kafka_batch)})[("t", 0)]
    assert result.error == ErrorCode.not_enough_replicas
    assert partition.log.log_end_offset == 0
    assert produce(manager, 1, {("t", 0): records(kafka_batch)})[("t", 0)].error == 0


def test_a_follower_refuses_produce_and_fetch(manager, kafka_batch):
    state = PartitionState(leader=2, leader_epoch=3, isr=(2, BROKER), replicas=(2, BROKER))
    manager.become_leader_or_follower("t", 0, state, TopicConfig())
    result = produce(manager, 1, {("t", 0): records(kafka_batch)})[("t", 0)]
    assert result.error == ErrorCode.not_leader_or_follower
    fetched = asyncio.run(
        manager.fetch(
            [FetchPartitionRequest("t", 0, 0, 1 << 20)],
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
        )
    )
    assert fetched[0].error == ErrorCode.not_leader_or_follower


def test_an_older_leader_epoch_does_not_replace_the_current_state(manager):
    partition = lead(manager, epoch=5)
    stale = PartitionState(leader=2, leader_epoch=4, isr=(2,), replicas=(2, BROKER))
    manager.become_leader_or_follower("t", 0, stale, TopicConfig())
    assert partition.is_leader and partition.state.leader_epoch == 5


def _fetch(manager, offset=0, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, partitions=(0,)):
    requests = [FetchPartitionRequest("t", p, offset, 1 << 20) for p in partitions]
    return asyncio.run(
        manager.fetch(requests, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes)
    )


def test_fetch_returns_whole_batches_below_the_high_watermark(manager, kafka_batch):
    partition = lead(manager)
    produce(manager, 1, {("t", 0): records(kafka_batch)})
    produce(manager, 1, {("t", 0): records(kafka_batch)})
    partition.log.update_high_watermark(3)  # as if a follower lagged
    (result,) = _fetch(manager)
    assert result.high_watermark == 3
    data = result.records.read_bytes()
    assert [h.base_offset for _, h in iter_batches(data)] == [0]


def test_fetch_beyond_the_log_end_is_out_of_range(manager, kafka_batch):
    lead(manager)
    produce(manager, 1, {("t", 0): records(kafka_batch)})
    (result,) = _fetch(manager, offset=10)
    assert result.error == ErrorCode.offset_out_of_range


def test_fetch_waits_for_data_and_wakes_on_append(manager, kafka_batch):
    lead(manager)

    async def scenario():
        fetching = asyncio.ensure_future(
            manager.fetch(
                [FetchPartitionRequest("t", 0, 0, 1 << 20)],
                max_wait_ms=5000,
                min_bytes=1,
                max_bytes=1 << 20,
            )
        )
        await asyncio.sleep(0.1)
        assert not fetching.done()
        started = time.monotonic()
        await manager.append_records(1, {("t", 0): records(kafka_batch)})
        (result,) = await asyncio.wait_for(fetching, 2)
        return result, time.monotonic() - started

    result, waited_s = asyncio.run(scenario())
    assert result.records is not None and result.records.size > 0
    assert waited_s < 1.0


def test_fetch_without_data_returns_empty_after_max_wait(manager):
    lead(manager)
    started = time.monotonic()
    (result,) = _fetch(manager, max_wait_ms=200)
    elapsed = time.monotonic() - started
    assert result.error == ErrorCode.none and result.records is None
    assert 0.19 <= elapsed < 2.0


def test_fetch_max_bytes_spans_partitions_but_the_first_batch_always_comes(manager, kafka_batch):
    lead(manager, partition=0)
    lead(manager, partition=1)
    big = records(kafka_batch, n=10, value=b"x" * 1000)
    produce(manager, 1, {("t", 0): big, ("t", 1): big})
    first, second = _fetch(manager, max_bytes=100, partitions=(0, 1))
    assert first.records is not None and first.records.size == len(big)  # larger than 100
    assert second.records is None  # no budget left


def test_list_offsets_and_delete_records(manager, kafka_batch):
    partition = lead(manager, segment_bytes=200)
    base = 1_700_000_000_000
    for n in range(4):
        batch = kafka_batch([(b"k", b"v%d" % n)], timestamp_ms=base + n * 1000)
        produce(manager, 1, {("t", 0): batch})
    assert manager.list_offsets("t", 0, -2).offset == 0
    assert manager.list_offsets("t", 0, -1).offset == 4
    found = manager.list_offsets("t", 0, base + 1500)
    assert (found.offset, found.timestamp) == (2, base + 2000)
    assert manager.list_offsets("t", 9, -1).error == ErrorCode.unknown_topic_or_partition
    assert manager.delete_records("t", 0, 2).offset == 2
    assert partition.log.log_start_offset == 2
    assert manager.list_offsets("t", 0, -2).offset == 2
    assert manager.delete_records("t", 0, 99).error == ErrorCode.offset_out_of_range
    assert manager.delete_records("t", 0, -1).offset == 4


def test_flush_messages_is_fsynced_off_the_loop_and_answered_after(manager, kafka_batch, disk):
    """flush.messages=1: the produce is answered, and its records become visible, only once they
    are fsynced; the fsync runs on a storage thread, so the loop serves others meanwhile."""
    durable = lead(manager, flush_messages=1)
    other = lead(manager, topic="other")
    loop_thread = threading.current_thread()
    fsync_threads: list[threading.Thread] = []
    disk_busy, disk_free = threading.Event(), threading.Event()

    def slow_fsync(call) -> None:
        fsync_threads.append(threading.current_thread())
        disk_busy.set()
        disk_free.wait(5)  # a slow disk; on the loop's thread this stalls every client

    disk.before("fsync", slow_fsync)

    async def scenario() -> None:
        produce_task = asyncio.create_task(
            manager.append_records(1, {("t", 0): records(kafka_batch)})
        )
        await asyncio.sleep(0)  # the produce runs up to its fsync
        started = time.monotonic()
        served = await manager.append_records(1, {("other", 0): records(kafka_batch)})
        assert time.monotonic() - started < 2.0, "another client waited for the fsync"
        assert served[("other", 0)].error == ErrorCode.none
        for _ in range(500):  # bounded: until the flush thread is inside its fsync
            if disk_busy.is_set():
                break
            await asyncio.sleep(0.01)
        assert disk_busy.is_set() and not produce_task.done()
        assert durable.log.high_watermark == 0  # not visible before it is durable
        disk_free.set()
        result = (await asyncio.wait_for(produce_task, 10))[("t", 0)]
        assert result.error == ErrorCode.none and result.base_offset == 0
        assert durable.log.recovery_point == durable.log.high_watermark == 3

    asyncio.run(scenario())
    assert fsync_threads and loop_thread not in fsync_threads
    assert other.log.recovery_point == 0


def test_a_small_compressed_batch_that_expands_far_is_validated_on_a_thread(tmp_path, kafka_batch):
    """Tried on the loop with a 1 MiB bound, it expands past it: validated again off the loop,
    with the real limit, and appended; a small one that stays small never leaves the loop."""
    from odradek.broker.workers import INLINE_DECOMPRESSED_MAX_BYTES, Workers

    async def scenario():
        log_manager = LogManager([tmp_path / "disk-0"])
        log_manager.load()
        workers = Workers()
        replicas = ReplicaManager(BROKER, log_manager, workers=workers)
        offloaded = []
        real_validate = workers.validate

        async def spy(fn, *args, **kwargs):
            offloaded.append(len(args[0]))
            return await real_validate(fn, *args, **kwargs)

        workers.validate = spy
        try:
            partition = lead(replicas)
            expanding = kafka_batch(
                [(b"k%d" % i, b"\x00" * 100_000) for i in range(30)], codec=3
            )  # 3 MB of zeros in a few KiB of lz4
            assert len(expanding) < 64 * 1024
            assert INLINE_DECOMPRESSED_MAX_BYTES < 30 * 100_000
            small = kafka_batch([(b"k", b"v" * 100)], codec=3)
            results = [
                await replicas.append_records(1, {("t", 0): records})
                for records in (small, expanding)
            ]
            return results, offloaded, partition.log.log_end_offset
        finally:
            workers.shutdown()
            log_manager.shutdown()

    results, offloaded, log_end_offset = asyncio.run(scenario())
    assert [r[("t", 0)].error for r in results] == [ErrorCode.none, ErrorCode.none]
    assert log_end_offset == 31
    assert len(offloaded) == 1  # only the expanding one went to a thread
