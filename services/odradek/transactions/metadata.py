"""One transactional id's state: Kafka's ``TransactionMetadata`` and ``TransactionState``.

**The state machine** (Kafka's ``TransactionState.validPreviousStates``; ``transit`` raises
``IllegalStateTransitionError`` for any other move, never an assert):

| state | id | legal previous states | written? |
|---|---:|---|---|
| Empty | 0 | Empty, CompleteCommit, CompleteAbort | yes |
| Ongoing | 1 | Ongoing, Empty, CompleteCommit, CompleteAbort | yes |
| PrepareCommit | 2 | Ongoing | yes |
| PrepareAbort | 3 | Ongoing, PrepareEpochFence; Empty, Complete* (transaction version 2) | yes |
| CompleteCommit | 4 | PrepareCommit | yes |
| CompleteAbort | 5 | PrepareAbort | yes |
| Dead | 6 | Empty, CompleteCommit, CompleteAbort | as a tombstone |
| PrepareEpochFence | 7 | Ongoing | never: a step of fencing, written as PrepareAbort |

The table is Kafka 4's: its abort of a transaction without partitions (Empty or Complete* to
PrepareAbort) is transaction version 2's, which Odradek's operations do not take yet.

**Invariants** of a ``TransactionMetadata`` (checked by ``transit`` and on replay):

- Empty, CompleteCommit, CompleteAbort and Dead hold no partitions (a completed transaction's
  markers are written; nothing is left to do for it);
- Ongoing and PrepareCommit hold at least one partition; Ongoing, Prepare* and Complete* have a
  start timestamp (PrepareAbort may hold none: version 2's abort of an empty transaction);
- ``producer_epoch`` is -1 (none yet) or in [0, 32767].

``previous_producer_id`` is the producer id before the last transition (Kafka sets it at every
one; it tells a retried InitProducerId after a producer id rotation from a zombie).
``last_producer_epoch`` is the epoch a producer held before a bump it asked for with its epoch
(KIP-360: a retry whose answer was lost gets the same epoch again); -1 after a bump a new
producer asked for without an epoch. Like Kafka, neither is in value v0 and
``last_producer_epoch`` in no value: a loaded transaction has -1 there, and a retry spanning a
coordinator change is fenced. Values are immutable; an operation builds the next one with
``transit``. Pure; any thread.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.common.limits import INT16_MAX
from odradek.transactions.records import (
    PartitionsSchema,
    PartitionsSchemaV0,
    TransactionLogValue,
    TransactionLogValueV0,
)

__all__ = [
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "MAX_PRODUCER_EPOCH",
    "TransactionState",
    "IllegalStateTransitionError",
    "TransactionMetadata",
    "is_epoch_exhausted",
    "log_value_version",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = INT16_MAX  # Short.MAX_VALUE


class TransactionState(enum.IntEnum):
    """Kafka's ``TransactionState``: the value is the id written in ``TransactionStatus``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use (``Ongoing``, ...)."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @property
    def is_completing(self) -> bool:
        """Prepare*: the markers are being written; the client must wait."""
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


S = TransactionState
_NAMES = {
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset(
        {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    ),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
_NO_PARTITIONS = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.DEAD})
_WRITTEN = frozenset(S) - {S.DEAD, S.PREPARE_EPOCH_FENCE}
_STARTED = frozenset(
    {S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
)


class IllegalStateTransitionError(RuntimeError):
    """A move the state machine forbids, or metadata breaking an invariant: a coordinator bug
    (or a corrupt log), never a client error."""


def log_value_version(transaction_version_level: int) -> int:
    """Kafka's ``TransactionVersion.transactionLogValueVersion``: v1 (flexible) from level 1."""
    return 1 if transaction_version_level >= 1 else 0


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's rule: at 32766 the next bump (to 32767, kept for fencing) needs a new id."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState = S.EMPTY
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    transaction_start_timestamp_ms: int = -1
    transaction_last_update_timestamp_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def transit(self, state: TransactionState, **changes: object) -> TransactionMetadata:
        """The next metadata, in ``state``, with ``changes``; raises if the move is illegal."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateTransitionError(
                f"transactional id {self.transactional_id!r}: "
                f"{self.state.kafka_name} -> {state.kafka_name} is not a legal transition"
            )
        changes.setdefault("previous_producer_id", self.producer_id)
        following = dataclasses.replace(self, state=state, **changes)  # type: ignore[arg-type]
        following.check()
        return following

    def check(self) -> None:
        """Raise ``IllegalStateTransitionError`` if an invariant is broken."""
        if self.state in _NO_PARTITIONS and self.partitions:
            raise IllegalStateTransitionError(
                f"transactional id {self.transactional_id!r}: "
                f"{self.state.kafka_name} with partitions {sorted(self.partitions)}"
            )
        with_partitions = self.state in (S.ONGOING, S.PREPARE_COMMIT)
        if with_partitions and not self.partitions:
            raise IllegalStateTransitionError(
                f"transactional id {self.transactional_id!r}: "
                f"{self.state.kafka_name} without partitions"
            )
        if self.state in _STARTED and self.transaction_start_timestamp_ms < 0:
            raise IllegalStateTransitionError(
                f"transactional id {self.transactional_id!r}: "
                f"{self.state.kafka_name} without a start time"
            )
        if not NO_PRODUCER_EPOCH <= self.producer_epoch <= MAX_PRODUCER_EPOCH:
            raise IllegalStateTransitionError(f"producer epoch {self.producer_epoch}")

    def topics(self) -> dict[str, list[int]]:
        """The partitions by topic, sorted (the order records and answers list them in)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return by_topic

    # -- records -------------------------------------------------------------------------------

    def to_value(self, version: int = 0) -> TransactionLogValueV0 | TransactionLogValue:
        """The record value of ``version``: Kafka writes v1 once the cluster's finalized
        ``transaction.version`` is 1 or more, else v0 (``log_value_version``).

        Partitions are null in Empty, as Kafka writes them."""
        if self.state not in _WRITTEN:
            raise IllegalStateTransitionError(f"{self.state.kafka_name} is never written")
        topics = self.topics()
        if version >= 1:
            return TransactionLogValue(
                producer_id=self.producer_id,
                previous_producer_id=self.previous_producer_id,
                next_producer_id=self.next_producer_id,
                producer_epoch=self.producer_epoch,
                transaction_timeout_ms=self.transaction_timeout_ms,
                transaction_status=int(self.state),
                transaction_partitions=None
                if self.state is S.EMPTY
                else tuple(PartitionsSchema(t, tuple(ps)) for t, ps in topics.items()),
                transaction_last_update_timestamp_ms=self.transaction_last_update_timestamp_ms,
                transaction_start_timestamp_ms=self.transaction_start_timestamp_ms,
                client_transaction_version=self.client_transaction_version,
            )
        return TransactionLogValueV0(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.transaction_timeout_ms,
            transaction_status=int(self.state),
            transaction_partitions=None
            if self.state is S.EMPTY
            else tuple(PartitionsSchemaV0(t, tuple(ps)) for t, ps in topics.items()),
            transaction_last_update_timestamp_ms=self.transaction_last_update_timestamp_ms,
            transaction_start_timestamp_ms=self.transaction_start_timestamp_ms,
        )

    @classmethod
    def from_value(
        cls, transactional_id: str, value: TransactionLogValueV0 | TransactionLogValue
    ) -> TransactionMetadata:
        """What a replayed record says (no transition check: compaction may have removed the
        records between two states). Raises ``IllegalStateTransitionError`` on an unknown or
        never-written status, or a broken invariant."""
        try:
            state = TransactionState(value.transaction_status)
        except ValueError:
            raise IllegalStateTransitionError(
                f"transactional id {transactional_id!r}: status {value.transaction_status}"
            ) from None
        if state not in _WRITTEN:
            raise IllegalStateTransitionError(f"{state.kafka_name} is never written")
        partitions = _partitions(value.transaction_partitions or ())
        v1 = isinstance(value, TransactionLogValue)
        metadata = cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            transaction_timeout_ms=value.transaction_timeout_ms,
            state=state,
            partitions=partitions,
            transaction_start_timestamp_ms=value.transaction_start_timestamp_ms,
            transaction_last_update_timestamp_ms=value.transaction_last_update_timestamp_ms,
            previous_producer_id=value.previous_producer_id if v1 else NO_PRODUCER_ID,
            next_producer_id=value.next_producer_id if v1 else NO_PRODUCER_ID,
            client_transaction_version=value.client_transaction_version if v1 else 0,
        )
        metadata.check()
        return metadata


def _partitions(
    schemas: Iterable[PartitionsSchemaV0 | PartitionsSchema],
) -> frozenset[tuple[str, int]]:
    return frozenset((s.topic, p) for s in schemas for p in s.partition_ids)
