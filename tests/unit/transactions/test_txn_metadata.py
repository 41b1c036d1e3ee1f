"""The transaction state machine: Kafka's legal previous states, invariants, record values."""

import itertools

import pytest

from odradek.transactions.metadata import (
    IllegalStateTransitionError,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
    log_value_version,
)
from odradek.transactions.records import TransactionLogValue, TransactionLogValueV0

S = TransactionState

LEGAL = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {
        S.ONGOING,
        S.PREPARE_EPOCH_FENCE,
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    },
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}
WITHOUT_PARTITIONS = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.DEAD}


def fitting(state: TransactionState) -> dict:
    """Partitions and a start time as ``state`` has them."""
    busy = state not in WITHOUT_PARTITIONS
    return {
        "partitions": frozenset({("t", 0)}) if busy else frozenset(),
        "transaction_start_timestamp_ms": -1 if state in (S.EMPTY, S.DEAD) else 5,
    }


def metadata_in(state: TransactionState) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id="tx",
        producer_id=1,
        producer_epoch=0,
        transaction_timeout_ms=1000,
        state=state,
        **fitting(state),
    )


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S, S)))
def test_every_transition_is_legal_exactly_as_in_kafka(source, target):
    current = metadata_in(source)
    if source in LEGAL[target]:
        following = current.transit(target, **fitting(target))
        assert following.state is target
        assert current.state is source  # immutable
    else:
        with pytest.raises(IllegalStateTransitionError):
            current.transit(target, **fitting(target))


def test_state_ids_and_names_are_kafkas():
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert S.from_kafka_name("Ongoing") is S.ONGOING and S.from_kafka_name("ongoing") is None


def test_invariants_are_checked_on_transit():
    with pytest.raises(IllegalStateTransitionError, match="with partitions"):
        metadata_in(S.PREPARE_COMMIT).transit(S.COMPLETE_COMMIT)  # partitions kept
    with pytest.raises(IllegalStateTransitionError, match="without a start time"):
        metadata_in(S.PREPARE_COMMIT).transit(
            S.COMPLETE_COMMIT, partitions=frozenset(), transaction_start_timestamp_ms=-1
        )
    with pytest.raises(IllegalStateTransitionError, match="without partitions"):
        metadata_in(S.EMPTY).transit(S.ONGOING)
    with pytest.raises(IllegalStateTransitionError, match="without a start time"):
        metadata_in(S.EMPTY).transit(S.PREPARE_ABORT)
    # transaction version 2 aborts a transaction without partitions
    aborting = metadata_in(S.EMPTY).transit(S.PREPARE_ABORT, transaction_start_timestamp_ms=9)
    assert aborting.partitions == frozenset()
    with pytest.raises(IllegalStateTransitionError, match="epoch"):
        metadata_in(S.EMPTY).transit(S.EMPTY, producer_epoch=32768)


def test_transit_remembers_the_producer_id_before():
    current = metadata_in(S.EMPTY)
    rotated = current.transit(S.EMPTY, producer_id=2, producer_epoch=0)
    assert rotated.previous_producer_id == 1
    assert rotated.transit(S.EMPTY).previous_producer_id == 2  # Kafka: at every transition


def test_log_value_version():
    assert [log_value_version(level) for level in (0, 1, 2)] == [0, 1, 1]


def test_epoch_exhaustion():
    assert not is_epoch_exhausted(32765)
    assert is_epoch_exhausted(32766) and is_epoch_exhausted(32767)


@pytest.mark.parametrize("state", [s for s in S if s not in (S.DEAD, S.PREPARE_EPOCH_FENCE)])
def test_value_round_trip(state):
    current = metadata_in(state)
    value = current.to_value()
    assert type(value) is TransactionLogValueV0
    assert (value.transaction_partitions is None) == (state is S.EMPTY)
    assert TransactionMetadata.from_value("tx", value) == current


def test_value_v1_from_transaction_version_1():
    current = TransactionMetadata(
        transactional_id="tx",
        producer_id=9,
        producer_epoch=3,
        transaction_timeout_ms=1000,
        previous_producer_id=8,
        client_transaction_version=2,
    )
    assert type(current.to_value(0)) is TransactionLogValueV0
    value = current.to_value(1)
    assert type(value) is TransactionLogValue and value.previous_producer_id == 8
    assert TransactionMetadata.from_value("tx", value) == current


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_never_written_states(state):
    with pytest.raises(IllegalStateTransitionError):
        metadata_in(state).to_value()
    value = metadata_in(S.EMPTY).to_value()
    bad = TransactionLogValueV0(
        producer_id=1,
        producer_epoch=0,
        transaction_timeout_ms=1,
        transaction_status=int(state),
        transaction_last_update_timestamp_ms=0,
        transaction_start_timestamp_ms=-1,
    )
    assert value.transaction_status == 0
    with pytest.raises(IllegalStateTransitionError):
        TransactionMetadata.from_value("tx", bad)


def test_unknown_status_is_refused():
    bad = TransactionLogValueV0(
        producer_id=1,
        producer_epoch=0,
        transaction_timeout_ms=1,
        transaction_status=42,
        transaction_last_update_timestamp_ms=0,
        transaction_start_timestamp_ms=-1,
    )
    with pytest.raises(IllegalStateTransitionError, match="status 42"):
        TransactionMetadata.from_value("tx", bad)
