"""The transaction coordinator facade (``transactions.coordinator``) on the runtime with a fake
marker sender: markers only once the Prepare record is replicated and one submission per
transaction at a time, completion after the sender's callback, re-driving after a load and on
the timer, resign cancelling the sender's work, timeouts fencing the producer, producer ids
awaited before the shard's synchronous allocation and never handed out twice, and the bounded
wait of AddPartitionsToTxn, AddOffsetsToTxn and InitProducerId for a completing transaction
(the tests that do not test it wait 0 ms: CONCURRENT_TRANSACTIONS at once)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from odradek.common.clock import ManualClock
from odradek.coordinator.errors import CoordinatorLoadInProgressError, NotCoordinatorError
from odradek.errors import ErrorCode as E
from odradek.transactions import records
from odradek.transactions.config import TransactionCoordinatorConfig
from odradek.transactions.coordinator import RESUBMIT_AFTER_MS, TransactionCoordinator
from odradek.transactions.metadata import TransactionMetadata
from odradek.transactions.metadata import TransactionState as S
from odradek.transactions.result import TxnMarker
from support.coordinator_memory import MemoryLog, in_loop, loaded


class FakeSender:
    """``broker.txn_markers`` in memory: keeps submissions until the test writes them."""

    def __init__(self) -> None:
        self.pending: list[tuple[TxnMarker, object, int]] = []
        self.submitted: list[TxnMarker] = []
        self.cancelled: list[int] = []

    def submit(self, marker, on_written, *, owner):
        self.submitted.append(marker)
        self.pending.append((marker, on_written, owner))

    def cancel_owner(self, owner):
        self.cancelled.append(owner)
        self.pending = [p for p in self.pending if p[2] != owner]

    async def write_all(self) -> None:
        pending, self.pending = self.pending, []
        for marker, on_written, _ in pending:
            await on_written(marker)  # type: ignore[operator]


class CountingIds:
    def __init__(self, start: int = 5000) -> None:
        self.next = start
        self.calls = 0

    async def next_producer_id(self) -> int:
        self.calls += 1
        await asyncio.sleep(0)  # a ZooKeeper round trip
        self.next += 1
        return self.next - 1


def coordinator(
    log: MemoryLog, sender: FakeSender | None, ids=None, clock=None, wait_ms=0, **config
):
    settings = dataclasses.replace(
        TransactionCoordinatorConfig(),
        transaction_state_log_num_partitions=config.pop("partitions", 1),
        write_timeout_ms=50,
        **config,
    )
    return TransactionCoordinator(
        log,
        settings,
        ids or CountingIds(),
        markers=lambda: sender,
        clock_ms=clock or ManualClock(now_ms=1_000_000),
        completion_wait_ms=wait_ms,
    )


async def elected(coordinator: TransactionCoordinator, log: MemoryLog, partition=0, epoch=1):
    log.leader_epoch[partition] = epoch
    coordinator.on_elected(partition, epoch)
    await loaded(coordinator.runtime, partition)


async def state(coordinator: TransactionCoordinator, tid: str) -> S:
    return await coordinator.read(tid, lambda s: s.transactions[tid].state)


async def begin(coordinator: TransactionCoordinator, tid="tx", partitions=(("t", 0),)):
    answer = await coordinator.init_producer_id(tid, 60_000)
    assert answer.error is E.none
    pid, epoch = answer.producer_id, answer.producer_epoch
    assert await coordinator.add_partitions(tid, pid, epoch, partitions) is E.none
    return pid, epoch


@in_loop
async def test_commit_markers_go_after_replication_and_the_callback_completes():
    log, sender = MemoryLog(), FakeSender()
    txn = coordinator(log, sender)
    await elected(txn, log, epoch=7)
    pid, epoch = await begin(txn, partitions=[("t", 0), ("u", 2)])
    assert await txn.end_transaction("tx", pid, epoch, True) is E.none
    assert await state(txn, "tx") is S.PREPARE_COMMIT
    [marker] = sender.submitted
    assert (marker.producer_id, marker.producer_epoch, marker.committed) == (pid, epoch, True)
    assert marker.coordinator_epoch == 7 and marker.partitions == (("t", 0), ("u", 2))
    assert sender.pending[0][2] == 0  # owner: the __transaction_state partition
    # The next transaction must wait for the markers.
    assert await txn.add_partitions("tx", pid, epoch, [("t", 0)]) is E.concurrent_transactions
    await sender.write_all()
    assert await state(txn, "tx") is S.COMPLETE_COMMIT
    assert await txn.add_partitions("tx", pid, epoch, [("t", 0)]) is E.none
    await txn.close()


@in_loop
async def test_no_marker_before_the_prepare_record_replicates_then_the_timer_sends_it_once():
    log, sender = MemoryLog(), FakeSender()
    txn = coordinator(log, sender, transaction_abort_timed_out_transaction_cleanup_interval_ms=30)
    await elected(txn, log)
    pid, epoch = await begin(txn)
    log.replicate = False
    with pytest.raises(Exception) as raised:
        await txn.end_transaction("tx", pid, epoch, False)
    assert raised.value.error_code is E.coordinator_not_available
    await asyncio.sleep(0.1)
    assert sender.submitted == []  # the Prepare record is not replicated: no marker
    log.replicate = True
    log.high_watermark[0] = len(log.records[0])
    for _ in range(300):
        if sender.submitted:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)  # more timer rounds: still one submission while in flight
    assert [(m.producer_id, m.committed) for m in sender.submitted] == [(pid, False)]
    await sender.write_all()
    assert await state(txn, "tx") is S.COMPLETE_ABORT
    await txn.close()


@in_loop
async def test_a_marker_the_sender_dropped_is_submitted_again_but_never_while_completing():
    log, sender, clock = MemoryLog(), FakeSender(), ManualClock(now_ms=1_000_000)
    txn = coordinator(
        log, sender, clock=clock, transaction_abort_timed_out_transaction_cleanup_interval_ms=10
    )
    await elected(txn, log)
    pid, epoch = await begin(txn)
    await txn.end_transaction("tx", pid, epoch, True)
    sender.pending.clear()  # the sender gave up without calling back
    await asyncio.sleep(0.1)
    assert len(sender.submitted) == 1  # too recent to be submitted again
    clock.now_ms += RESUBMIT_AFTER_MS
    for _ in range(300):
        if len(sender.submitted) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(sender.submitted) == 2 and len(sender.pending) == 1
    # While the callback runs (the shard busy), old as the submission is, nothing is resent.
    clock.now_ms += RESUBMIT_AFTER_MS
    await sender.write_all()
    await asyncio.sleep(0.05)
    assert len(sender.submitted) == 2
    assert await state(txn, "tx") is S.COMPLETE_COMMIT
    await txn.close()


@in_loop
async def test_resign_cancels_the_senders_work_and_the_next_leader_redrives_it():
    log, sender = MemoryLog(), FakeSender()
    txn = coordinator(log, sender)
    await elected(txn, log, epoch=1)
    pid, epoch = await begin(txn)
    await txn.end_transaction("tx", pid, epoch, True)
    assert len(sender.pending) == 1
    txn.on_resigned(0)
    assert sender.cancelled == [0] and sender.pending == []
    with pytest.raises(NotCoordinatorError):
        await txn.end_transaction("tx", pid, epoch, True)

    successor = coordinator(log, sender)
    await elected(successor, log, epoch=2)
    for _ in range(300):
        if sender.pending:
            break
        await asyncio.sleep(0.01)
    [(marker, _, owner)] = sender.pending
    assert (marker.producer_id, marker.committed, marker.coordinator_epoch, owner) == (
        pid,
        True,
        2,
        0,
    )
    await sender.write_all()
    assert await state(successor, "tx") is S.COMPLETE_COMMIT
    await txn.close()
    await successor.close()


@in_loop
async def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced():
    log, sender, clock = MemoryLog(), FakeSender(), ManualClock(now_ms=1_000_000)
    txn = coordinator(
        log, sender, clock=clock, transaction_abort_timed_out_transaction_cleanup_interval_ms=20
    )
    await elected(txn, log)
    answer = await txn.init_producer_id("tx", 1000)
    pid, epoch = answer.producer_id, answer.producer_epoch
    assert await txn.add_partitions("tx", pid, epoch, [("t", 0)]) is E.none
    clock.now_ms += 1001
    for _ in range(300):
        if sender.submitted:
            break
        await asyncio.sleep(0.01)
    [marker] = sender.submitted
    assert (marker.committed, marker.producer_epoch) == (False, epoch + 1)
    await sender.write_all()
    assert await state(txn, "tx") is S.COMPLETE_ABORT
    assert await txn.end_transaction("tx", pid, epoch, True) is E.producer_fenced
    await txn.close()


@in_loop
async def test_a_second_producer_fences_the_first_and_waits_for_the_abort():
    log, sender = MemoryLog(), FakeSender()
    txn = coordinator(log, sender)
    await elected(txn, log)
    pid, epoch = await begin(txn)
    second = await txn.init_producer_id("tx", 60_000)
    assert second.error is E.concurrent_transactions
    [marker] = sender.submitted
    assert (marker.committed, marker.producer_epoch) == (False, epoch + 1)
    await sender.write_all()
    second = await txn.init_producer_id("tx", 60_000)
    assert (second.error, second.producer_id, second.producer_epoch) == (E.none, pid, epoch + 2)
    assert await txn.add_partitions("tx", pid, epoch, [("t", 0)]) is E.producer_fenced
    await txn.close()


@in_loop
async def test_producer_ids_are_awaited_first_reused_when_unused_and_never_repeated():
    log, ids = MemoryLog(), CountingIds()
    txn = coordinator(log, FakeSender(), ids=ids)
    await elected(txn, log)
    answers = await asyncio.gather(*(txn.init_producer_id(f"id-{i}", 60_000) for i in range(20)))
    assert all(a.error is E.none for a in answers)
    assert len({a.producer_id for a in answers}) == 20
    # Bumping a known id needs no new producer id: the one reserved for it is kept.
    calls = ids.calls
    for _ in range(5):
        assert (await txn.init_producer_id("id-0", 60_000)).error is E.none
    assert ids.calls <= calls + 1
    fresh = await txn.init_producer_id("new", 60_000)
    assert fresh.producer_id not in {a.producer_id for a in answers}
    await txn.close()


@in_loop
async def test_bad_requests_first_then_unowned_or_loading_partitions():
    log = MemoryLog()
    txn = coordinator(log, FakeSender(), partitions=2, transaction_max_timeout_ms=1000)
    with pytest.raises(NotCoordinatorError):
        await txn.init_producer_id("tx", 500)
    # As Kafka: the request itself is judged first, on any broker.
    assert (await txn.init_producer_id("tx", 1001)).error is E.invalid_transaction_timeout
    assert (await txn.init_producer_id("", 500)).error is E.invalid_request
    log.leader_epoch[txn.partition_for("tx")] = 1
    txn.on_elected(txn.partition_for("tx"), 1)
    with pytest.raises(CoordinatorLoadInProgressError):
        await txn.init_producer_id("tx", 500)
    await loaded(txn.runtime, txn.partition_for("tx"))
    assert (await txn.init_producer_id("tx", 1001)).error is E.invalid_transaction_timeout
    assert (await txn.init_producer_id("tx", 1000)).error is E.none
    await txn.close()


@in_loop
async def test_list_and_describe_across_the_partitions_led_here():
    log = MemoryLog()
    txn = coordinator(log, FakeSender(), partitions=4)
    tids = ["a", "b", "c", "d", "e", "f"]
    owned = sorted({txn.partition_for(t) for t in tids})
    for partition in owned:
        await elected(txn, log, partition)
    for tid in tids:
        await begin(txn, tid)
    error, listings, unknown = await txn.list_transactions(["Ongoing", "Nope"])
    assert error is E.none and unknown == ["Nope"]
    assert sorted(x.transactional_id for x in listings) == tids
    assert {x.transaction_state for x in listings} == {"Ongoing"}
    described = await txn.describe("c")
    assert (described.error, described.state, described.topics) == (E.none, "Ongoing", {"t": [0]})
    unknown_id = next(t for t in ("x", "y", "z", "w") if txn.partition_for(t) in owned)
    assert (await txn.describe(unknown_id)).error is E.transactional_id_not_found
    await txn.close()


@in_loop
async def test_expired_transactional_ids_are_tombstoned_by_the_timer():
    log, clock = MemoryLog(), ManualClock(now_ms=1_000_000)
    txn = coordinator(
        log,
        FakeSender(),
        clock=clock,
        transactional_id_expiration_ms=1000,
        transaction_remove_expired_transaction_cleanup_interval_ms=20,
    )
    await elected(txn, log)
    assert (await txn.init_producer_id("idle", 60_000)).error is E.none
    clock.now_ms += 1000
    for _ in range(300):
        if await txn.read("idle", lambda s: "idle" not in s.transactions):
            break
        await asyncio.sleep(0.01)
    assert (await txn.describe("idle")).error is E.transactional_id_not_found
    assert log.records[0][-1].value is None  # the tombstone
    await txn.close()


class GatedIds(CountingIds):
    """A ZooKeeper round trip that takes as long as the test wants."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def next_producer_id(self) -> int:
        await self.gate.wait()
        return await super().next_producer_id()


@in_loop
async def test_an_id_reserved_for_a_request_the_shard_never_ran_is_kept():
    log, ids = MemoryLog(), GatedIds()
    txn = coordinator(log, FakeSender(), ids=ids)
    await elected(txn, log)
    waiting = asyncio.ensure_future(txn.init_producer_id("tx", 60_000))
    await asyncio.sleep(0.01)
    txn.on_resigned(0)  # the coordinator moves while ZooKeeper answers
    ids.gate.set()
    with pytest.raises(NotCoordinatorError):
        await waiting
    await elected(txn, log, epoch=2)
    answer = await txn.init_producer_id("tx", 60_000)
    assert (answer.error, answer.producer_id, ids.calls) == (E.none, 5000, 1)
    await txn.close()


class CountingLog(MemoryLog):
    """Remembers how many records each appended batch held."""

    def __init__(self) -> None:
        super().__init__()
        self.batch_records: list[int] = []

    async def append(self, partition: int, leader_epoch: int, batch: bytes) -> int:
        before = len(self.records.get(partition, []))
        end = await super().append(partition, leader_epoch, batch)
        self.batch_records.append(end - before)
        return end


def test_a_timer_round_expires_a_bounded_batch_and_the_next_rounds_the_rest(monkeypatch):
    from odradek.transactions import coordinator as module

    monkeypatch.setattr(module, "TIMER_TRANSACTIONS_MAX", 3)
    asyncio.run(asyncio.wait_for(_expire_in_rounds(), 10))


async def _expire_in_rounds() -> None:
    log, clock = CountingLog(), ManualClock(now_ms=1_000_000)
    txn = coordinator(
        log,
        FakeSender(),
        clock=clock,
        transactional_id_expiration_ms=1000,
        transaction_remove_expired_transaction_cleanup_interval_ms=30,
    )
    await elected(txn, log)
    for i in range(7):
        assert (await txn.init_producer_id(f"idle-{i}", 60_000)).error is E.none
    log.batch_records.clear()
    clock.now_ms += 1000
    for _ in range(300):
        if await txn.read("idle-0", lambda s: not s.transactions):
            break
        await asyncio.sleep(0.01)
    assert log.batch_records == [3, 3, 1]  # three rounds, none above the bound
    assert sum(1 for r in log.records[0] if r.value is None) == 7
    await txn.close()


# -- the bounded wait for a completing transaction ------------------------------------------------


async def prepared(wait_ms: int, committed=True):
    """A transaction in PrepareCommit (or PrepareAbort) with its markers held by the sender."""
    log, sender = MemoryLog(), FakeSender()
    txn = coordinator(log, sender, wait_ms=wait_ms)
    await elected(txn, log)
    pid, epoch = await begin(txn)
    assert await txn.end_transaction("tx", pid, epoch, committed) is E.none
    assert len(sender.pending) == 1
    return log, sender, txn, pid, epoch


async def markers_written_after(sender: FakeSender, delay_s: float) -> None:
    await asyncio.sleep(delay_s)
    await sender.write_all()


@in_loop
async def test_add_partitions_waits_for_the_completion_then_runs():
    log, sender, txn, pid, epoch = await prepared(wait_ms=5000)
    loop = asyncio.get_running_loop()
    started = loop.time()
    writer = asyncio.ensure_future(markers_written_after(sender, 0.05))
    assert await txn.add_partitions("tx", pid, epoch, [("t", 1)]) is E.none
    waited = loop.time() - started
    await writer
    assert 0.04 <= waited < 1.0  # answered once the markers were written, not at the bound
    assert await state(txn, "tx") is S.ONGOING
    # The log: PrepareCommit, CompleteCommit, then the new transaction's Ongoing.
    states = [
        TransactionMetadata.from_value("tx", records.decode(r.key, r.value).value).state
        for r in log.read_all(0)
    ][-3:]
    assert states == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.ONGOING]
    assert txn._waiters == {0: {}} or txn._waiters == {}
    await txn.close()


@in_loop
async def test_add_offsets_waits_for_the_completion_then_runs():
    log, sender, txn, pid, epoch = await prepared(wait_ms=5000, committed=False)
    writer = asyncio.ensure_future(markers_written_after(sender, 0.02))
    assert await txn.add_offsets("tx", pid, epoch, "group") is E.none
    await writer
    assert await state(txn, "tx") is S.ONGOING
    await txn.close()


@in_loop
async def test_the_wait_is_bounded_then_concurrent_transactions():
    log, sender, txn, pid, epoch = await prepared(wait_ms=80)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await txn.add_partitions("tx", pid, epoch, [("t", 1)]) is E.concurrent_transactions
    waited = loop.time() - started
    assert 0.07 <= waited < 1.0
    assert await state(txn, "tx") is S.PREPARE_COMMIT  # nothing written meanwhile
    assert txn._waiters.get(0, {}) == {}
    await sender.write_all()
    assert await txn.add_partitions("tx", pid, epoch, [("t", 1)]) is E.none
    await txn.close()


@in_loop
async def test_a_resign_during_the_wait_answers_not_coordinator():
    log, sender, txn, pid, epoch = await prepared(wait_ms=5000)
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiting = asyncio.ensure_future(txn.add_partitions("tx", pid, epoch, [("t", 1)]))
    await asyncio.sleep(0.03)
    assert not waiting.done()
    txn.on_resigned(0)
    with pytest.raises(NotCoordinatorError):
        await waiting
    assert loop.time() - started < 1.0  # woken by the resign, not by the bound
    await txn.close()


@in_loop
async def test_a_second_producer_waits_for_the_abort_it_started():
    log, sender = MemoryLog(), FakeSender()
    txn = coordinator(log, sender, wait_ms=5000)
    await elected(txn, log)
    pid, epoch = await begin(txn)
    second = asyncio.ensure_future(txn.init_producer_id("tx", 60_000))
    for _ in range(100):
        if sender.pending:
            break
        await asyncio.sleep(0.01)
    [marker] = sender.submitted
    assert (marker.committed, marker.producer_epoch) == (False, epoch + 1)
    assert not second.done()  # waiting for the abort, not answered CONCURRENT_TRANSACTIONS
    await sender.write_all()
    answer = await second
    assert (answer.error, answer.producer_id, answer.producer_epoch) == (E.none, pid, epoch + 2)
    await txn.close()


@in_loop
async def test_init_producer_id_waits_for_a_commit_in_flight():
    log, sender, txn, pid, epoch = await prepared(wait_ms=5000)
    writer = asyncio.ensure_future(markers_written_after(sender, 0.02))
    answer = await txn.init_producer_id("tx", 60_000, pid, epoch)
    await writer
    assert (answer.error, answer.producer_id, answer.producer_epoch) == (E.none, pid, epoch + 1)
    assert await state(txn, "tx") is S.EMPTY
    await txn.close()
