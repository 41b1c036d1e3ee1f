"""The transaction coordinator's read-only views: DescribeTransactions and ListTransactions
over one shard's transactions (Kafka's ``handleDescribeTransactions``, ``listTransactionStates``).
Pure; the answers the handlers encode.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from odradek.errors import ErrorCode
from odradek.transactions.metadata import TransactionMetadata, TransactionState
from odradek.transactions.result import TransactionDescription, TransactionListing

__all__ = ["describe", "list_transactions"]

S = TransactionState


def describe(
    transactions: Mapping[str, TransactionMetadata], transactional_id: str
) -> TransactionDescription:
    """A DescribeTransactions entry: TRANSACTIONAL_ID_NOT_FOUND for an unknown (or expiring) id."""
    if not transactional_id:
        return TransactionDescription(ErrorCode.invalid_request, transactional_id)
    metadata = transactions.get(transactional_id)
    if metadata is None or metadata.state is S.DEAD:
        return TransactionDescription(ErrorCode.transactional_id_not_found, transactional_id)
    return TransactionDescription(
        ErrorCode.none,
        transactional_id,
        state=metadata.state.kafka_name,
        transaction_timeout_ms=metadata.transaction_timeout_ms,
        transaction_start_time_ms=metadata.transaction_start_timestamp_ms,
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        topics=metadata.topics(),
    )


def list_transactions(
    transactions: Mapping[str, TransactionMetadata],
    now_ms: int,
    state_filters: Iterable[str] = (),
    producer_id_filters: Iterable[int] = (),
    duration_filter_ms: int = -1,
) -> tuple[list[TransactionListing], list[str]]:
    """ListTransactions: the listings, and the state filters no state has (unknown).

    Kafka's filters: states by name (only unknown names: nothing matches), producer ids, and
    the duration (KIP-994: running at least ``duration_filter_ms``; -1 for any). Dead ids
    are left out."""
    states: set[TransactionState] = set()
    unknown: list[str] = []
    for name in state_filters:
        state = S.from_kafka_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.add(state)
    if unknown and not states:
        return [], unknown  # only unknown states asked for: none can match
    producer_ids = (
        producer_id_filters
        if isinstance(producer_id_filters, (set, frozenset))
        else set(producer_id_filters)
    )  # a set given is used as it is: the coordinator hands every shard the same one
    listings = []
    for tid, metadata in sorted(transactions.items()):
        if metadata.state is S.DEAD or (states and metadata.state not in states):
            continue
        if producer_ids and metadata.producer_id not in producer_ids:
            continue
        if duration_filter_ms >= 0 and (
            metadata.transaction_start_timestamp_ms < 0
            or now_ms - metadata.transaction_start_timestamp_ms < duration_filter_ms
        ):
            continue
        listings.append(TransactionListing(tid, metadata.producer_id, metadata.state.kafka_name))
    return listings, unknown
