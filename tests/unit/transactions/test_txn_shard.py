"""The transaction coordinator's shard: operations, fencing, timeouts, replay equivalence.

Every record an operation returns goes through bytes (encode, decode) and ``replay``, as the
runtime would; ``reloaded`` replays the same bytes into a fresh shard, as a new coordinator."""

from __future__ import annotations

import dataclasses

import pytest

from odradek.coordinator.partitioner import partition_for
from odradek.coordinator.records import encode_key, encode_value
from odradek.errors import ErrorCode as E
from odradek.transactions.config import TransactionCoordinatorConfig
from odradek.transactions.metadata import IllegalStateTransitionError, TransactionState
from odradek.transactions.records import decode
from odradek.transactions.result import InitProducerIdAnswer, Outcome, TxnMarker, fenced_error_for
from odradek.transactions.shard import TransactionCoordinatorShard, TransactionShardContext

S = TransactionState
TIMEOUT = 60_000


class Harness:
    def __init__(self, config: TransactionCoordinatorConfig | None = None):
        self.now = 1_000
        self.next_id = 100
        self.log: list[tuple[bytes, bytes | None]] = []
        self.config = config or TransactionCoordinatorConfig()
        self.shard = self.new_shard()

    def new_shard(self) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(
            TransactionShardContext(
                partition=0,
                config=self.config,
                allocate_producer_id=self.allocate,
                clock_ms=lambda: self.now,
                coordinator_epoch=7,
            )
        )

    def allocate(self) -> int:
        self.next_id += 1
        return self.next_id

    def apply(self, outcome: Outcome):
        """As the runtime: append the records' bytes, replay the records themselves."""
        for record in outcome.records:
            key, value = encode_key(record.key), encode_value(record.value)
            decoded = decode(key, value)
            assert (decoded.key, decoded.value) == (record.key, record.value)
            self.log.append((key, value))
            self.shard.replay(record)
        return outcome.response

    def reloaded(self) -> TransactionCoordinatorShard:
        shard = self.new_shard()
        for key, value in self.log:
            shard.replay(decode(key, value))
        return shard

    # shortcuts
    def init(self, tid="tx", timeout=TIMEOUT, **expected) -> InitProducerIdAnswer:
        return self.apply(self.shard.init_producer_id(tid, timeout, **expected))

    def begin(self, tid="tx", partitions=(("t", 0), ("t", 1))) -> InitProducerIdAnswer:
        answer = self.init(tid)
        assert answer.error is E.none
        assert self.add(tid, answer, partitions) is E.none
        return answer

    def add(self, tid, answer, partitions):
        return self.apply(
            self.shard.add_partitions(tid, answer.producer_id, answer.producer_epoch, partitions)
        )

    def state(self, tid="tx"):
        return self.shard.transactions[tid].state


@pytest.fixture
def h():
    return Harness()


# -- InitProducerId ---------------------------------------------------------------------------


def test_new_transactional_id_gets_an_allocated_id_and_epoch_0(h):
    answer = h.init()
    assert answer == InitProducerIdAnswer(E.none, 101, 0)
    assert h.state() is S.EMPTY
    assert len(h.log) == 1


def test_init_again_bumps_the_epoch_and_keeps_the_id(h):
    h.init()
    assert h.init() == InitProducerIdAnswer(E.none, 101, 1)
    assert h.init(timeout=5) == InitProducerIdAnswer(E.none, 101, 2)
    assert h.shard.transactions["tx"].transaction_timeout_ms == 5


def test_exhausted_epoch_rotates_the_producer_id(h):
    h.init()
    current = h.shard.transactions["tx"]
    h.shard.transactions["tx"] = dataclasses.replace(current, producer_epoch=32766)
    answer = h.init()
    assert answer == InitProducerIdAnswer(E.none, 102, 0)
    assert h.shard.transactions["tx"].previous_producer_id == 101


def test_invalid_requests(h):
    assert h.init(tid="").error is E.invalid_request
    assert h.init(timeout=0).error is E.invalid_transaction_timeout
    assert h.init(timeout=900_001).error is E.invalid_transaction_timeout
    assert h.init(timeout=900_000).error is E.none
    assert h.log and len(h.log) == 1


def test_max_timeout_is_configurable():
    h = Harness(TransactionCoordinatorConfig(transaction_max_timeout_ms=10))
    assert h.init(timeout=11).error is E.invalid_transaction_timeout
    assert h.init(timeout=10).error is E.none


def test_init_on_ongoing_fences_and_aborts(h):
    first = h.begin()
    outcome = h.shard.init_producer_id("tx", TIMEOUT)
    assert outcome.response.error is E.concurrent_transactions
    assert outcome.markers == (TxnMarker("tx", 101, 1, False, 7, (("t", 0), ("t", 1))),)
    h.apply(outcome)
    assert h.state() is S.PREPARE_ABORT
    # the old producer is fenced
    assert h.add("tx", first, [("t", 2)]) is E.producer_fenced
    assert h.apply(h.shard.end_transaction("tx", 101, 0, committed=True)) is E.producer_fenced
    # while the abort completes, the new producer retries
    assert h.init().error is E.concurrent_transactions
    assert h.apply(h.shard.complete("tx", 101, 1)) is E.none
    assert h.state() is S.COMPLETE_ABORT
    assert h.init() == InitProducerIdAnswer(E.none, 101, 2)


def test_init_on_prepare_is_concurrent_transactions(h):
    answer = h.begin()
    h.apply(h.shard.end_transaction("tx", answer.producer_id, answer.producer_epoch, True))
    assert h.shard.init_producer_id("tx", TIMEOUT).response.error is E.concurrent_transactions
    assert h.shard.init_producer_id("tx", TIMEOUT).records == ()


def test_kip_360_expected_epoch(h):
    h.init()  # epoch 0
    assert h.init(expected_producer_id=101, expected_producer_epoch=0).producer_epoch == 1
    # a retry of that bump (its answer lost): the same epoch again, no bump
    assert h.init(expected_producer_id=101, expected_producer_epoch=0) == InitProducerIdAnswer(
        E.none, 101, 1
    )
    # a zombie
    assert h.init(expected_producer_id=101, expected_producer_epoch=5).error is E.producer_fenced
    # another producer id
    assert h.init(expected_producer_id=55, expected_producer_epoch=1).error is E.producer_fenced


def test_kip_360_retry_after_rotation(h):
    h.init()
    current = h.shard.transactions["tx"]
    h.shard.transactions["tx"] = dataclasses.replace(current, producer_epoch=32766)
    rotated = h.init(expected_producer_id=101, expected_producer_epoch=32766)
    assert rotated == InitProducerIdAnswer(E.none, 102, 0)
    # the answer was lost: the producer retries with what it held
    retry = h.init(expected_producer_id=101, expected_producer_epoch=32766)
    assert retry == InitProducerIdAnswer(E.none, 102, 0)


def test_expected_epoch_after_a_fence_is_fenced(h):
    """Kafka's fence forgets the epoch before it: the bumped epoch is never handed out."""
    h.begin()
    h.apply(h.shard.init_producer_id("tx", TIMEOUT))  # fence 0 -> 1, abort
    h.apply(h.shard.complete("tx", 101, 1))
    assert h.init(expected_producer_id=101, expected_producer_epoch=0).error is E.producer_fenced
    assert h.init(expected_producer_id=101, expected_producer_epoch=1).producer_epoch == 2


# -- AddPartitionsToTxn, AddOffsetsToTxn -----------------------------------------------------------


def test_add_partitions(h):
    answer = h.init()
    assert h.add("tx", answer, [("t", 0)]) is E.none
    metadata = h.shard.transactions["tx"]
    assert metadata.state is S.ONGOING and metadata.transaction_start_timestamp_ms == 1_000
    h.now = 2_000
    written = len(h.log)
    assert h.add("tx", answer, [("t", 0)]) is E.none
    assert len(h.log) == written  # nothing new, nothing written
    assert h.add("tx", answer, [("u", 3)]) is E.none
    metadata = h.shard.transactions["tx"]
    assert metadata.partitions == {("t", 0), ("u", 3)}
    assert metadata.transaction_start_timestamp_ms == 1_000  # the start stays


def test_add_partitions_errors(h):
    answer = h.init()
    assert h.apply(h.shard.add_partitions("", 101, 0, [("t", 0)])) is E.invalid_request
    assert (
        h.apply(h.shard.add_partitions("nope", 101, 0, [("t", 0)])) is E.invalid_producer_id_mapping
    )
    assert (
        h.apply(h.shard.add_partitions("tx", 999, 0, [("t", 0)])) is E.invalid_producer_id_mapping
    )
    assert h.apply(h.shard.add_partitions("tx", 101, 3, [("t", 0)])) is E.producer_fenced
    h.add("tx", answer, [("t", 0)])
    h.apply(h.shard.end_transaction("tx", 101, 0, committed=False))
    assert h.add("tx", answer, [("t", 1)]) is E.concurrent_transactions


def test_add_offsets_adds_the_groups_offsets_partition(h):
    answer = h.init()
    assert h.apply(h.shard.add_offsets("tx", 101, 0, "my-group")) is E.none
    expected = ("__consumer_offsets", partition_for("my-group", 50))
    assert h.shard.transactions["tx"].partitions == {expected}
    assert h.shard.offsets_partition("my-group") == expected
    assert h.apply(h.shard.add_offsets("tx", 101, 1, "my-group")) is E.producer_fenced
    assert answer.producer_epoch == 0


def test_new_transaction_after_complete(h):
    answer = h.begin()
    h.apply(h.shard.end_transaction("tx", 101, 0, True))
    h.apply(h.shard.complete("tx", 101, 0))
    h.now = 5_000
    assert h.add("tx", answer, [("v", 0)]) is E.none
    metadata = h.shard.transactions["tx"]
    assert metadata.partitions == {("v", 0)} and metadata.transaction_start_timestamp_ms == 5_000


# -- EndTxn and completion ---------------------------------------------------------------------


@pytest.mark.parametrize("committed", [True, False])
def test_end_transaction(h, committed):
    h.begin()
    outcome = h.shard.end_transaction("tx", 101, 0, committed)
    assert outcome.response is E.none
    assert outcome.markers == (TxnMarker("tx", 101, 0, committed, 7, (("t", 0), ("t", 1))),)
    h.apply(outcome)
    assert h.state() is (S.PREPARE_COMMIT if committed else S.PREPARE_ABORT)
    # retries while the markers are written
    assert h.shard.end_transaction("tx", 101, 0, committed).response is E.concurrent_transactions
    assert h.shard.end_transaction("tx", 101, 0, not committed).response is E.invalid_txn_state
    assert h.apply(h.shard.complete("tx", 101, 0)) is E.none
    metadata = h.shard.transactions["tx"]
    assert metadata.state is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT)
    assert metadata.partitions == frozenset()
    # retries after completion
    assert h.shard.end_transaction("tx", 101, 0, committed).response is E.none
    assert h.shard.end_transaction("tx", 101, 0, not committed).response is E.invalid_txn_state


def test_end_transaction_errors(h):
    h.init()
    assert h.shard.end_transaction("", 101, 0, True).response is E.invalid_request
    assert h.shard.end_transaction("tx", 101, 0, True).response is E.invalid_txn_state  # Empty
    assert h.shard.end_transaction("tx", 5, 0, True).response is E.invalid_producer_id_mapping
    assert h.shard.end_transaction("nope", 101, 0, True).response is E.invalid_producer_id_mapping
    assert h.shard.end_transaction("tx", 101, 1, True).response is E.producer_fenced


def test_stale_completion_writes_nothing(h):
    h.begin()
    assert h.shard.complete("tx", 101, 0).records == ()  # still Ongoing
    h.apply(h.shard.end_transaction("tx", 101, 0, True))
    assert h.shard.complete("tx", 101, 1).records == ()  # another epoch
    assert h.shard.complete("nope", 1, 0).records == ()


def test_fenced_error_for_old_versions():
    assert fenced_error_for("EndTxn", 1, E.producer_fenced) is E.invalid_producer_epoch
    assert fenced_error_for("EndTxn", 2, E.producer_fenced) is E.producer_fenced
    assert fenced_error_for("InitProducerId", 3, E.producer_fenced) is E.invalid_producer_epoch
    assert fenced_error_for("InitProducerId", 4, E.producer_fenced) is E.producer_fenced
    assert fenced_error_for("AddPartitionsToTxn", 1, E.none) is E.none


# -- time --------------------------------------------------------------------------------------


def test_timeouts(h):
    h.begin("a")
    h.now = 2_000
    h.begin("b")
    h.init("idle")
    assert h.shard.timed_out_transactions(1_000 + TIMEOUT) == []
    assert h.shard.timed_out_transactions(1_001 + TIMEOUT) == ["a"]
    assert h.shard.timed_out_transactions(2_001 + TIMEOUT) == ["a", "b"]
    outcome = h.shard.abort_timed_out(1_001 + TIMEOUT)
    assert outcome.response == ["a"]
    assert [(m.transactional_id, m.producer_epoch, m.committed) for m in outcome.markers] == [
        ("a", 1, False)
    ]
    h.apply(outcome)
    assert h.state("a") is S.PREPARE_ABORT and h.state("b") is S.ONGOING
    # the producer of "a" learns it was fenced
    assert h.shard.end_transaction("a", 101, 0, True).response is E.producer_fenced
    # an aborting transaction is not timed out again
    assert h.shard.timed_out_transactions(10**9) == ["b"]


def test_expiry_of_idle_transactional_ids():
    h = Harness(TransactionCoordinatorConfig(transactional_id_expiration_ms=10_000))
    h.init("idle")
    h.begin("busy")
    assert h.shard.expire_transactional_ids(10_999).response == []
    outcome = h.shard.expire_transactional_ids(11_000)
    assert outcome.response == ["idle"]
    h.apply(outcome)
    assert "idle" not in h.shard.transactions and "busy" in h.shard.transactions
    assert h.log[-1][1] is None  # a tombstone
    assert h.shard.describe("idle").error is E.transactional_id_not_found
    assert "idle" not in h.reloaded().transactions


# -- loading -----------------------------------------------------------------------------------


def test_new_coordinator_finishes_prepared_transactions(h):
    h.begin("c")
    h.apply(h.shard.end_transaction("c", 101, 0, True))
    h.begin("a", partitions=[("x", 0)])
    h.apply(h.shard.end_transaction("a", 102, 0, False))
    h.begin("o")
    h.init("e")
    loaded = h.reloaded()
    assert loaded.pending_completions() == [
        TxnMarker("a", 102, 0, False, 7, (("x", 0),)),
        TxnMarker("c", 101, 0, True, 7, (("t", 0), ("t", 1))),
    ]
    h.shard = loaded
    for marker in loaded.pending_completions():
        h.apply(loaded.complete(marker.transactional_id, marker.producer_id, marker.producer_epoch))
    assert h.state("a") is S.COMPLETE_ABORT and h.state("c") is S.COMPLETE_COMMIT
    assert h.shard.pending_completions() == []


def test_replay_equivalence_over_a_mixed_history(h):
    """Live state (made by replaying each outcome) equals a reload of the same records."""
    h.begin("a")
    h.apply(h.shard.end_transaction("a", 101, 0, True))
    h.apply(h.shard.complete("a", 101, 0))
    h.init("a")
    h.begin("b")
    h.apply(h.shard.init_producer_id("b", TIMEOUT))  # fence
    h.apply(h.shard.complete("b", 102, 1))
    h.init("b")
    h.begin("c")
    h.now += 10 * TIMEOUT
    h.apply(h.shard.abort_timed_out(h.now))
    h.init("d")
    current = h.shard.transactions["d"]
    h.shard.transactions["d"] = dataclasses.replace(current, producer_epoch=32766)
    h.log.append(
        (
            encode_key(decode(*h.log[-1]).key),
            encode_value(h.shard.transactions["d"].to_value()),
        )
    )
    h.init("d", expected_producer_id=104, expected_producer_epoch=32766)  # rotation
    h.add("d", h.init("d"), [("z", 9)])
    assert h.reloaded().transactions == without_memory(h.shard.transactions)


def without_memory(transactions):
    """What a reload knows: no last epoch, and no previous producer id in value v0."""
    return {
        tid: dataclasses.replace(m, last_producer_epoch=-1, previous_producer_id=-1)
        for tid, m in transactions.items()
    }


def test_replay_equivalence_with_value_v1():
    h = Harness(TransactionCoordinatorConfig(transaction_version_level=1))
    h.begin("a")
    h.apply(h.shard.end_transaction("a", 101, 0, False))
    h.init("b")
    assert decode(*h.log[-1]).value.__version__ == 1
    reloaded = h.reloaded().transactions
    assert reloaded == {
        tid: dataclasses.replace(m, last_producer_epoch=-1)
        for tid, m in h.shard.transactions.items()
    }
    assert reloaded["a"].previous_producer_id == 101


def test_a_fence_forgets_the_last_epoch(h):
    """A producer that bumped with its epoch, then timed out: its old epoch claims nothing."""
    h.init()
    answer = h.init(expected_producer_id=101, expected_producer_epoch=0)  # epoch 1, last 0
    h.add("tx", answer, [("t", 0)])
    h.apply(h.shard.abort_timed_out(10**12))  # fenced: epoch 2
    assert h.shard.transactions["tx"].last_producer_epoch == -1
    h.apply(h.shard.complete("tx", 101, 2))
    assert h.init(expected_producer_id=101, expected_producer_epoch=0).error is E.producer_fenced
    assert h.init(expected_producer_id=101, expected_producer_epoch=1).error is E.producer_fenced


def test_zombie_cannot_claim_a_new_producers_epoch(h):
    """A new producer (no expected epoch) bumps and forgets the epoch before."""
    h.init()  # epoch 0
    h.init(expected_producer_id=101, expected_producer_epoch=0)  # epoch 1, last 0
    assert h.init().producer_epoch == 2  # a new producer: last forgotten
    assert h.init(expected_producer_id=101, expected_producer_epoch=1).error is E.producer_fenced
    assert h.init(expected_producer_id=101, expected_producer_epoch=0).error is E.producer_fenced


def test_retry_across_a_coordinator_change_is_fenced(h):
    """Kafka's documented limit: the last epoch is not in the log."""
    h.init()
    h.init(expected_producer_id=101, expected_producer_epoch=0)  # epoch 1, last 0
    live = h.shard.init_producer_id("tx", TIMEOUT, 101, 0).response
    assert live == InitProducerIdAnswer(E.none, 101, 1)
    h.shard = h.reloaded()
    assert h.init(expected_producer_id=101, expected_producer_epoch=0).error is E.producer_fenced


def test_operations_never_change_state_themselves(h):
    h.begin()
    before = dict(h.shard.transactions)
    h.shard.end_transaction("tx", 101, 0, True)
    h.shard.init_producer_id("tx", TIMEOUT)
    h.shard.add_partitions("tx", 101, 0, [("q", 1)])
    h.shard.abort_timed_out(10**12)
    h.shard.expire_transactional_ids(10**12)
    assert h.shard.transactions == before


def test_replay_refuses_foreign_records(h):
    from odradek.coordinator.records import CoordinatorRecord

    with pytest.raises(RuntimeError):
        h.shard.replay(CoordinatorRecord(object(), None))


def test_illegal_states_raise(h):
    h.init()
    current = h.shard.transactions["tx"]
    h.shard.transactions["tx"] = dataclasses.replace(current, state=S.DEAD)
    with pytest.raises(IllegalStateTransitionError):
        h.shard.init_producer_id("tx", TIMEOUT)
    with pytest.raises(IllegalStateTransitionError):
        h.shard.end_transaction("tx", 101, 0, True)


# -- Describe, List ----------------------------------------------------------------------------


def test_describe(h):
    h.begin()
    description = h.shard.describe("tx")
    assert description.error is E.none
    assert description.state == "Ongoing"
    assert description.topics == {"t": [0, 1]}
    assert (description.producer_id, description.producer_epoch) == (101, 0)
    assert description.transaction_start_time_ms == 1_000
    assert description.transaction_timeout_ms == TIMEOUT
    assert h.shard.describe("nope").error is E.transactional_id_not_found
    assert h.shard.describe("").error is E.invalid_request


def test_list(h):
    h.begin("a")
    h.now = 5_000
    h.init("b")
    listings, unknown = h.shard.list_transactions()
    assert [(x.transactional_id, x.producer_id, x.transaction_state) for x in listings] == [
        ("a", 101, "Ongoing"),
        ("b", 102, "Empty"),
    ]
    assert unknown == []
    listings, unknown = h.shard.list_transactions(state_filters=["Empty", "Bogus"])
    assert [x.transactional_id for x in listings] == ["b"] and unknown == ["Bogus"]
    assert h.shard.list_transactions(state_filters=["Bogus"]) == ([], ["Bogus"])
    listings, _ = h.shard.list_transactions(producer_id_filters=[101])
    assert [x.transactional_id for x in listings] == ["a"]
    listings, _ = h.shard.list_transactions(duration_filter_ms=4_000)
    assert [x.transactional_id for x in listings] == ["a"]
    listings, _ = h.shard.list_transactions(duration_filter_ms=4_001)
    assert listings == []


def test_owns():
    h = Harness()
    owned = [tid for tid in ("a", "b", "c", "d", "e", "tx", "x1") if h.shard.owns(tid)]
    assert owned == [
        tid for tid in ("a", "b", "c", "d", "e", "tx", "x1") if partition_for(tid, 50) == 0
    ]
