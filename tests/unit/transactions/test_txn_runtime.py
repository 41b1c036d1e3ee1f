"""The transaction coordinator's shard on the coordinators' runtime (``coordinator.runtime``
with the ``__transaction_state`` record format): writes are appended and replayed, markers go
once the Prepare record is replicated, and a new leader loads the same transactions and
finishes what was being completed. Nothing of this is wired into the broker yet."""

from __future__ import annotations

import pytest

from odradek.coordinator.errors import CoordinatorNotAvailableError
from odradek.coordinator.result import Result
from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.errors import ErrorCode as E
from odradek.transactions import records
from odradek.transactions.config import TransactionCoordinatorConfig
from odradek.transactions.metadata import TransactionState
from odradek.transactions.result import Outcome, TxnMarker
from odradek.transactions.shard import TransactionCoordinatorShard, TransactionShardContext
from support.coordinator_memory import MemoryLog, in_loop, loaded

ids = iter(range(1000, 2000))


def new_runtime(log: MemoryLog) -> CoordinatorRuntime:
    config = TransactionCoordinatorConfig()
    return CoordinatorRuntime(
        log,
        lambda partition, timer: TransactionShardContext(  # type: ignore[arg-type, return-value]
            partition, config, lambda: next(ids), lambda: 5_000
        ),
        new_shard=TransactionCoordinatorShard,  # type: ignore[arg-type]
        record_format=records.FORMAT,
        write_timeout_ms=50,
    )


def run(operation, sent: list[TxnMarker]):
    """An operation of the shard as the runtime's ``Result``: markers go once replicated."""

    def as_result(shard: TransactionCoordinatorShard) -> Result:
        outcome: Outcome = operation(shard)

        def on_written(error: BaseException | None) -> None:
            if error is None:
                sent.extend(outcome.markers)

        return Result(outcome.records, response=outcome.response, on_written=on_written)

    return as_result


@in_loop
async def test_a_transaction_through_the_runtime_and_a_new_leader_finishes_it():
    log = MemoryLog()
    log.leader_epoch[2] = 1
    runtime = new_runtime(log)
    runtime.on_elected(2, 1)
    await loaded(runtime, 2)
    sent: list[TxnMarker] = []
    answer = await runtime.write(2, run(lambda s: s.init_producer_id("tx", 60_000), sent))
    pid, epoch = answer.producer_id, answer.producer_epoch
    assert answer.error is E.none and epoch == 0
    add = run(lambda s: s.add_partitions("tx", pid, epoch, [("t", 0)]), sent)
    assert await runtime.write(2, add) is E.none
    end = run(lambda s: s.end_transaction("tx", pid, epoch, True), sent)
    assert await runtime.write(2, end) is E.none
    assert [(m.transactional_id, m.committed, m.partitions) for m in sent] == [
        ("tx", True, (("t", 0),))
    ]
    runtime.on_resigned(2)

    log.leader_epoch[2] = 2
    successor = new_runtime(log)
    successor.on_elected(2, 2)
    await loaded(successor, 2)
    pending = await successor.read(2, lambda s: s.pending_completions())
    assert [(m.transactional_id, m.producer_id, m.committed) for m in pending] == [
        ("tx", pid, True)
    ]
    complete = run(lambda s: s.complete("tx", pid, epoch), sent)
    assert await successor.write(2, complete) is E.none
    state = await successor.read(2, lambda s: s.transactions["tx"].state)
    assert state is TransactionState.COMPLETE_COMMIT
    await runtime.close()
    await successor.close()


@in_loop
async def test_no_markers_while_the_prepare_record_is_not_replicated():
    log = MemoryLog()
    log.leader_epoch[0] = 1
    runtime = new_runtime(log)
    runtime.on_elected(0, 1)
    await loaded(runtime, 0)
    sent: list[TxnMarker] = []
    answer = await runtime.write(0, run(lambda s: s.init_producer_id("tx", 60_000), sent))
    pid = answer.producer_id
    await runtime.write(0, run(lambda s: s.add_partitions("tx", pid, 0, [("t", 1)]), sent))
    log.replicate = False
    with pytest.raises(CoordinatorNotAvailableError):
        await runtime.write(0, run(lambda s: s.end_transaction("tx", pid, 0, False), sent))
    assert sent == []
    await runtime.close()
