"""A partition's replica rules on real logs: HW from the ISR, acks=all waiting, ISR changes
proposed to the controller, epoch fences, divergence, and a follower copying its leader."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from odradek.broker.partition import IsrProposal, Partition, PartitionState
from odradek.broker.replica_fetcher import truncation_offset
from odradek.broker.replica_manager import FetchPartitionRequest, ReplicaManager
from odradek.common.clock import ManualClock
from odradek.config.topic import TopicConfig
from odradek.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from odradek.storage.manager import LogManager

LEADER, F1, F2 = 1, 2, 3
REPLICAS = (LEADER, F1, F2)


class RecordingSender:
    """The controller's side of AlterPartition, decided by the test."""

    def __init__(self) -> None:
        self.proposals: list[tuple[Partition, IsrProposal]] = []

    def submit(self, partition: Partition, proposal: IsrProposal) -> None:
        self.proposals.append((partition, proposal))

    def commit_last(self, partition_epoch: int | None = None) -> tuple[int, ...]:
        partition, proposal = self.proposals[-1]
        epoch = proposal.partition_epoch + 1 if partition_epoch is None else partition_epoch
        assert partition.isr_change_committed(proposal, proposal.isr, proposal.leader_epoch, epoch)
        return proposal.isr


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(now_ms=1_000_000)


@pytest.fixture
def sender() -> RecordingSender:
    return RecordingSender()


@pytest.fixture
def manager(tmp_path, clock, sender):
    log_manager = LogManager([tmp_path / "disk-0"])
    log_manager.load()
    replicas = ReplicaManager(
        LEADER, log_manager, clock_ms=clock, replica_lag_time_max_ms=10_000, isr_changes=sender
    )
    yield replicas
    log_manager.shutdown()


def lead(manager, *, epoch=1, isr=REPLICAS, min_isr=2) -> Partition:
    state = PartitionState(LEADER, epoch, tuple(isr), REPLICAS, partition_epoch=epoch)
    assert manager.become_leader_or_follower(
        "t", 0, state, TopicConfig(min_insync_replicas=min_isr)
    )
    return manager.get_partition("t", 0)


def follower_fetch(partition: Partition, replica: int, offset: int, **kwargs):
    return partition.read(offset, 1 << 20, replica_id=replica, **kwargs)


def batch(kafka_batch, n=3):
    return kafka_batch([(b"k%d" % i, b"v") for i in range(n)])


def test_the_high_watermark_is_the_smallest_log_end_offset_in_the_isr(manager, kafka_batch):
    partition = lead(manager)

    async def scenario():
        await partition.append_as_leader(batch(kafka_batch), 1)
        assert partition.log.high_watermark == 0  # no follower has fetched yet
        follower_fetch(partition, F1, 3)
        assert partition.log.high_watermark == 0  # F2 is in the ISR and unknown
        follower_fetch(partition, F2, 2)
        assert partition.log.high_watermark == 2
        follower_fetch(partition, F2, 3)
        assert partition.log.high_watermark == 3
        # A consumer reads below the HW, a follower up to the log end.
        await partition.append_as_leader(batch(kafka_batch), 1)
        consumer = partition.read(3, 1 << 20)
        assert consumer.records is None and consumer.high_watermark == 3
        assert follower_fetch(partition, F1, 3).records is not None

    asyncio.run(scenario())


def test_acks_all_is_answered_once_every_isr_member_has_the_batch(manager, kafka_batch):
    partition = lead(manager)

    async def scenario():
        producing = asyncio.ensure_future(
            manager.append_records(-1, {("t", 0): batch(kafka_batch)}, timeout_ms=5000)
        )
        for _ in range(10):
            await asyncio.sleep(0)
        assert not producing.done()
        assert partition.waiting_produces == 1
        follower_fetch(partition, F1, 3)
        await asyncio.sleep(0)
        assert not producing.done()
        follower_fetch(partition, F2, 3)
        result = (await asyncio.wait_for(producing, 2))[("t", 0)]
        assert result.error == ErrorCode.none and result.base_offset == 0
        assert partition.waiting_produces == 0

    asyncio.run(scenario())


def test_acks_all_times_out_without_replication_and_keeps_the_records(manager, kafka_batch):
    partition = lead(manager)
    results = asyncio.run(
        manager.append_records(-1, {("t", 0): batch(kafka_batch)}, timeout_ms=100)
    )
    assert results[("t", 0)].error == ErrorCode.request_timed_out
    assert partition.log.log_end_offset == 3 and partition.log.high_watermark == 0


def test_acks_1_is_answered_on_the_leader_append(manager, kafka_batch):
    lead(manager)
    results = asyncio.run(manager.append_records(1, {("t", 0): batch(kafka_batch)}, timeout_ms=1))
    assert results[("t", 0)].error == ErrorCode.none


def test_below_min_isr_after_the_append_is_not_enough_replicas_after_append(
    manager, sender, clock, kafka_batch
):
    partition = lead(manager, isr=(LEADER, F1), min_isr=2)

    async def scenario():
        follower_fetch(partition, F1, 0)
        producing = asyncio.ensure_future(
            manager.append_records(-1, {("t", 0): batch(kafka_batch)}, timeout_ms=5000)
        )
        await asyncio.sleep(0.01)
        clock.now_ms += 20_000  # F1 stops fetching: out of sync
        partition.maybe_shrink_isr()
        assert sender.proposals[-1][1].isr == (LEADER,)
        assert not producing.done()  # a shrink counts only once committed
        sender.commit_last()
        result = (await asyncio.wait_for(producing, 2))[("t", 0)]
        assert result.error == ErrorCode.not_enough_replicas_after_append
        # And the next acks=all write is refused before it is written.
        refused = await manager.append_records(-1, {("t", 0): batch(kafka_batch)})
        assert refused[("t", 0)].error == ErrorCode.not_enough_replicas
        assert partition.log.log_end_offset == 3

    asyncio.run(scenario())


def test_a_delayed_produce_whose_producer_left_leaves_no_unretrieved_exception(
    manager, sender, clock, kafka_batch
):
    """Issue 23, scenario 7: the producer's connection closed (its delayed produce cancelled),
    then the ISR fell below min.insync.replicas; asyncio logged "Future exception was never
    retrieved: NotEnoughReplicasAfterAppendError" (a bug's log) when the waiter was dropped."""
    partition = lead(manager, isr=(LEADER, F1), min_isr=2)
    unhandled: list[str] = []

    async def scenario():
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: unhandled.append(context["message"])
        )
        follower_fetch(partition, F1, 0)
        producing = asyncio.ensure_future(
            manager.append_records(-1, {("t", 0): batch(kafka_batch)}, timeout_ms=5000)
        )
        await asyncio.sleep(0.01)
        producing.cancel()  # the connection is gone: its answers are dropped
        await asyncio.sleep(0)
        clock.now_ms += 20_000
        partition.maybe_shrink_isr()
        sender.commit_last()  # the HW passes the batch with the ISR below min.insync.replicas
        producing = None
        gc.collect()

    asyncio.run(scenario())
    gc.collect()
    assert unhandled == []


def test_a_lagging_follower_is_dropped_and_a_caught_up_one_returns(
    manager, sender, clock, kafka_batch
):
    partition = lead(manager)

    async def scenario():
        await partition.append_as_leader(batch(kafka_batch), 1)
        follower_fetch(partition, F1, 3)
        follower_fetch(partition, F2, 0)
        clock.now_ms += 5_000
        partition.maybe_shrink_isr()
        assert sender.proposals == []  # within replica.lag.time.max.ms
        clock.now_ms += 6_000
        follower_fetch(partition, F1, 3)
        partition.maybe_shrink_isr()
        assert sender.commit_last() == (LEADER, F1)
        assert partition.state.isr == (LEADER, F1)
        assert partition.log.high_watermark == 3  # F2 no longer holds it back
        follower_fetch(partition, F2, 1)
        assert len(sender.proposals) == 1  # not caught up to the HW yet
        follower_fetch(partition, F2, 3)
        assert sender.proposals[-1][1].expanding
        sender.commit_last()
        assert partition.state.isr == (LEADER, F1, F2)

    asyncio.run(scenario())


def test_a_refused_isr_change_leaves_the_isr_and_is_proposed_again(manager, sender, clock):
    partition = lead(manager)
    follower_fetch(partition, F1, 0)
    clock.now_ms += 20_000
    partition.maybe_shrink_isr()
    _, proposal = sender.proposals[-1]
    partition.maybe_shrink_isr()
    assert len(sender.proposals) == 1  # one change in flight at a time
    partition.isr_change_failed(proposal, "FENCED_LEADER_EPOCH")
    assert partition.state.isr == REPLICAS
    partition.maybe_shrink_isr()
    assert len(sender.proposals) == 2


def test_a_new_epoch_fails_waiting_produces_and_stale_epochs_change_nothing(manager, kafka_batch):
    partition = lead(manager, epoch=4)

    async def scenario():
        producing = asyncio.ensure_future(
            manager.append_records(-1, {("t", 0): batch(kafka_batch)}, timeout_ms=5000)
        )
        await asyncio.sleep(0.01)
        stale = PartitionState(F1, 3, (F1, F2), REPLICAS)
        assert not manager.become_leader_or_follower("t", 0, stale, TopicConfig())
        assert partition.is_leader
        newer = PartitionState(F1, 5, (F1, F2), REPLICAS)
        assert manager.become_leader_or_follower("t", 0, newer, TopicConfig())
        result = (await asyncio.wait_for(producing, 2))[("t", 0)]
        assert result.error == ErrorCode.not_leader_or_follower

    asyncio.run(scenario())
    with pytest.raises(NotLeaderOrFollowerError):
        partition.read(0, 100)


def test_leader_epochs_in_requests_are_checked_once_both_ways(manager):
    partition = lead(manager, epoch=4)
    with pytest.raises(FencedLeaderEpochError):
        partition.read(0, 100, current_leader_epoch=3)
    with pytest.raises(UnknownLeaderEpochError):
        partition.read(0, 100, current_leader_epoch=5)
    assert partition.read(0, 100, current_leader_epoch=4).records is None
    result = manager.list_offsets("t", 0, -1, current_leader_epoch=3)
    assert result.error == ErrorCode.fenced_leader_epoch


def test_a_follower_with_another_history_is_told_where_it_diverges(manager, kafka_batch):
    """Leader: epoch 1 at 0..2, epoch 3 from 3. A follower that fetched epoch 2 up to offset 5
    learns that epoch 2 is unknown here: the largest below it, 1, ends at 3."""
    partition = lead(manager, epoch=1)

    async def scenario():
        await partition.append_as_leader(batch(kafka_batch), 1)
        newer = PartitionState(LEADER, 3, REPLICAS, REPLICAS, partition_epoch=3)
        assert manager.become_leader_or_follower("t", 0, newer, TopicConfig())
        await partition.append_as_leader(batch(kafka_batch), 1)

    asyncio.run(scenario())
    read = follower_fetch(partition, F1, 5, last_fetched_epoch=2)
    assert read.diverging_epoch == (1, 3) and read.records is None
    same = follower_fetch(partition, F1, 3, last_fetched_epoch=1)
    assert same.diverging_epoch is None and same.records is not None
    # An epoch below every one held ends, as Kafka answers, where the first one held starts.
    assert follower_fetch(partition, F1, 5, last_fetched_epoch=0).diverging_epoch == (0, 0)
    with pytest.raises(OffsetOutOfRangeError):
        follower_fetch(partition, F1, 5, last_fetched_epoch=7)  # beyond every epoch held
    assert manager.last_offset_for_leader_epoch("t", 0, 3, 2).offset == 3
    assert manager.last_offset_for_leader_epoch("t", 0, 3, 3).offset == 6


def test_a_follower_copies_batches_unchanged_and_truncates_where_told(
    tmp_path, kafka_batch, manager
):
    leader = lead(manager, epoch=1)
    follower_logs = LogManager([tmp_path / "follower"])
    follower_logs.load()
    follower_manager = ReplicaManager(F1, follower_logs)
    state = PartitionState(LEADER, 1, REPLICAS, REPLICAS)
    assert follower_manager.become_leader_or_follower("t", 0, state, TopicConfig())
    follower = follower_manager.get_partition("t", 0)

    async def scenario():
        await leader.append_as_leader(batch(kafka_batch), 1)
        read = follower_fetch(leader, F1, 0)
        copied = await follower.append_as_follower(read.records.read_bytes())
        assert copied is not None and follower.log.log_end_offset == 3
        follower.update_follower_high_watermark(read.high_watermark)
        assert list(follower.log.batches()) == list(leader.log.batches())
        assert follower.log.latest_epoch == 1
        # Divergence: the leader says epoch 1 ends at 2. That is inside the follower's only
        # batch (0..2): the whole batch goes, to be fetched again.
        assert truncation_offset(follower, 1, 2) == 2
        await follower.truncate_to(2)
        assert follower.log.log_end_offset == 0 and follower.log.latest_epoch is None

    try:
        asyncio.run(scenario())
    finally:
        follower_logs.shutdown()


def test_a_follower_fetch_from_a_non_replica_is_refused(manager):
    partition = lead(manager)
    with pytest.raises(NotLeaderOrFollowerError):
        follower_fetch(partition, 9, 0)


def test_fetch_long_polls_follow_the_kind_of_fetcher(manager, kafka_batch):
    """A consumer's long poll wakes when the HW moves, a follower's when the log grows."""
    partition = lead(manager, isr=(LEADER, F1))

    async def scenario():
        request = [FetchPartitionRequest("t", 0, 0, 1 << 20)]
        consumer = asyncio.ensure_future(
            manager.fetch(request, max_wait_ms=3000, min_bytes=1, max_bytes=1 << 20)
        )
        follower = asyncio.ensure_future(
            manager.fetch(request, max_wait_ms=3000, min_bytes=1, max_bytes=1 << 20, replica_id=F1)
        )
        await asyncio.sleep(0.05)
        await partition.append_as_leader(batch(kafka_batch), 1)
        (copied,) = await asyncio.wait_for(follower, 2)
        assert copied.size > 0
        assert not consumer.done()  # nothing below the HW yet
        follower_fetch(partition, F1, 3)
        (read,) = await asyncio.wait_for(consumer, 2)
        assert read.size > 0 and read.high_watermark == 3

    asyncio.run(scenario())


def test_a_long_poll_over_many_partitions_wakes_on_any_and_leaves_no_waiter(manager, kafka_batch):
    """One future per waiting fetch, registered with every partition and removed from all of
    them once woken, timed out or cancelled."""
    state = PartitionState(LEADER, 1, (LEADER, F1), REPLICAS, partition_epoch=1)
    for i in range(5):
        assert manager.become_leader_or_follower("t", i, state, TopicConfig(min_insync_replicas=2))
    partitions = [manager.get_partition("t", i) for i in range(5)]

    def registered() -> int:
        return sum(len(p.fetch_waiters(for_follower=f)) for p in partitions for f in (True, False))

    async def scenario():
        request = [FetchPartitionRequest("t", i, 0, 1 << 20) for i in range(5)]
        follower = asyncio.ensure_future(
            manager.fetch(request, max_wait_ms=3000, min_bytes=1, max_bytes=1 << 20, replica_id=F1)
        )
        await asyncio.sleep(0.05)
        assert registered() == 5
        await partitions[3].append_as_leader(batch(kafka_batch), 1)
        copied = await asyncio.wait_for(follower, 2)
        assert [r.size > 0 for r in copied] == [False, False, False, True, False]
        assert registered() == 0
        # Timed out: nothing left behind either.
        started = time.monotonic()
        consumer = await manager.fetch(request[:3], max_wait_ms=100, min_bytes=1, max_bytes=1 << 20)
        assert all(r.size == 0 for r in consumer) and time.monotonic() - started >= 0.09
        assert registered() == 0
        # Cancelled (the client went away): nothing left behind.
        waiting = asyncio.ensure_future(
            manager.fetch(request, max_wait_ms=3000, min_bytes=1, max_bytes=1 << 20)
        )
        await asyncio.sleep(0.05)
        assert registered() == 5
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert registered() == 0

    asyncio.run(scenario())


def test_a_woken_fetch_reads_again_only_the_partitions_that_grew(manager, kafka_batch):
    """Issue 26: a follower's session holds thousands of partitions; a round that re-read all of
    them for each append made replication cost every partition per record."""
    state = PartitionState(LEADER, 1, (LEADER, F1), REPLICAS, partition_epoch=1)
    for i in range(5):
        assert manager.become_leader_or_follower("t", i, state, TopicConfig(min_insync_replicas=2))
    partitions = [manager.get_partition("t", i) for i in range(5)]
    reads: list[int] = []
    original = ReplicaManager._read

    def counting(self, request, *args, **kwargs):
        reads.append(request.partition)
        return original(self, request, *args, **kwargs)

    async def scenario():
        request = [FetchPartitionRequest("t", i, 0, 1 << 20) for i in range(5)]
        follower = asyncio.ensure_future(
            manager.fetch(request, max_wait_ms=3000, min_bytes=1, max_bytes=1 << 20, replica_id=F1)
        )
        await asyncio.sleep(0.05)
        assert reads == [0, 1, 2, 3, 4]  # the first read covers the whole session
        # A produce request of two partitions: its followers' fetches wake once both are in.
        await manager.append_records(
            1, {("t", 1): batch(kafka_batch), ("t", 3): batch(kafka_batch)}
        )
        copied = await asyncio.wait_for(follower, 2)
        assert [r.size > 0 for r in copied] == [False, True, False, True, False]
        assert reads[5:] == [1, 3]

    ReplicaManager._read = counting
    try:
        asyncio.run(scenario())
    finally:
        ReplicaManager._read = original
    assert partitions[1].log.log_end_offset == partitions[3].log.log_end_offset == 3


def test_a_commit_whose_answer_was_lost_is_taken_from_the_controllers_metadata(
    manager, sender, clock
):
    partition = lead(manager, epoch=2)
    follower_fetch(partition, F1, 0)
    clock.now_ms += 20_000
    partition.maybe_shrink_isr()
    _, proposal = sender.proposals[-1]
    # The controller committed it (partition epoch 3) but the answer never came.
    assert not partition.adopt_committed_isr(1, proposal.isr, 3)  # another leader epoch
    assert not partition.adopt_committed_isr(2, proposal.isr, 2)  # not newer
    assert partition.adopt_committed_isr(2, proposal.isr, 3)
    assert partition.state.isr == proposal.isr and partition.state.partition_epoch == 3
    assert partition.pending_isr is None
    assert not partition.isr_change_committed(proposal, proposal.isr, 2, 3)  # late answer
