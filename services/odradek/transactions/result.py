"""What the transaction coordinator's operations return (``shard``): records with what their
values do not hold, markers to write, answers, and Describe/List entries. Its own module so
handlers and a runtime use them without the shard. Pure data; any thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from odradek.coordinator.records import CoordinatorRecord
from odradek.errors import ErrorCode
from odradek.transactions.metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

__all__ = [
    "TransactionRecord",
    "TxnMarker",
    "Outcome",
    "InitProducerIdAnswer",
    "TransactionDescription",
    "TransactionListing",
    "fenced_error_for",
]

T = TypeVar("T")

# The first request version that may carry PRODUCER_FENCED (KIP-588); older ones get
# INVALID_PRODUCER_EPOCH (Kafka's KafkaApis does the same mapping).
_PRODUCER_FENCED_SINCE = {
    "InitProducerId": 4,
    "AddPartitionsToTxn": 2,
    "AddOffsetsToTxn": 2,
    "EndTxn": 2,
}


def fenced_error_for(api: str, version: int, error: ErrorCode) -> ErrorCode:
    """``error`` as a client of ``api`` at ``version`` knows it."""
    if error is ErrorCode.producer_fenced and version < _PRODUCER_FENCED_SINCE[api]:
        return ErrorCode.invalid_producer_epoch
    return error


@dataclass(frozen=True, slots=True)
class TransactionRecord(CoordinatorRecord):
    """A record an operation wrote, with what its value does not hold (never encoded)."""

    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One WriteTxnMarkers entry: the control record to append to each of ``partitions``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool  # Kafka's TransactionResult: COMMIT (True) or ABORT
    coordinator_epoch: int
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What an operation did: records to append (then replayed), the answer, and the markers
    to write once the records are replicated (then ``complete``)."""

    response: T
    records: tuple[CoordinatorRecord, ...] = ()
    markers: tuple[TxnMarker, ...] = ()


@dataclass(frozen=True, slots=True)
class InitProducerIdAnswer:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A DescribeTransactions entry."""

    error: ErrorCode
    transactional_id: str
    state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    topics: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """A ListTransactions entry."""

    transactional_id: str
    producer_id: int
    transaction_state: str
