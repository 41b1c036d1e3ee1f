"""Transactions as a library: list, describe, abort, find hanging; what kafka-transactions.sh
does, over the wire protocol.

- ``list_transactions``: ListTransactions to every broker (each lists the transactional ids it
  coordinates), merged; filters by state and producer id (v0), and by duration (v1+: only the
  transactions running longer than that). A filter the cluster cannot apply is
  ``UnsupportedByClusterError``, never a silently unfiltered list; state names the
  coordinators do not know come back as ``UnknownStateFilterError``.
- ``describe_transaction``: FindCoordinator (key type 1, TRANSACTION), then
  DescribeTransactions at that coordinator: state, producer id and epoch, timeout, start time,
  and the partitions in the transaction.
- ``abort_transaction``: as the tool's ``abort --topic --partition --start-offset``:
  DescribeProducers at the partition's leader finds the producer whose open transaction starts
  at that offset; then WriteTxnMarkers (ABORT, that producer id and epoch, its last marker's
  coordinator epoch or 0) to the same leader. It is the operator's last resort for a hanging
  transaction (one the coordinator no longer knows: a marker that never came): the partition's
  last stable offset moves on. ``abort_producer`` does the second step alone, for an operator
  who already knows the producer (``--producer-id --producer-epoch --coordinator-epoch``).
- ``find_hanging``: DescribeProducers for every partition with a replica on a broker, at each
  partition's leader; a transaction open longer than ``transaction.max.timeout.ms`` (the
  coordinator would have aborted it by then) is a candidate; it is hanging unless a coordinator
  still lists the producer with a transaction in progress that includes the partition
  (ListTransactions by producer id, then DescribeTransactions), as Kafka's tool decides.

The functions named ``*_on`` take an open client (and, where needed, the cluster view) so that
they can be tested against doubles; the others open a ``ClusterClient`` per call. Async.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from odradek.client.admin import ClusterClient, build, element_type
from odradek.client.coordinators import TRANSACTION_KEY_TYPE, find_coordinator
from odradek.client.errors import ClusterRequestError, UnsupportedByClusterError
from odradek.client.security import ClientSecurity
from odradek.common.partitions import TopicPartition
from odradek.errors import ErrorCode
from odradek.ops.cluster import read_cluster
from odradek.ops.errors import OpsError
from odradek.ops.model import ClusterView
from odradek.ops.reassign import REQUEST_TIMEOUT_S

__all__ = [
    "TransactionListing",
    "TransactionDescription",
    "OpenTransaction",
    "AbortResult",
    "NoSuchTransactionError",
    "UnknownStateFilterError",
    "list_transactions",
    "describe_transaction",
    "abort_transaction",
    "abort_producer",
    "find_hanging",
]

WRITE_TXN_MARKERS = 27
DESCRIBE_PRODUCERS = 61
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66

WRITE_TXN_MARKERS_MAX_VERSION = 1
DESCRIBE_PRODUCERS_MAX_VERSION = 0
DESCRIBE_TRANSACTIONS_MAX_VERSION = 0
LIST_TRANSACTIONS_MAX_VERSION = 1  # v1: duration filter (KIP-994); v2's id pattern is unused

# Kafka's default transaction.max.timeout.ms: an open transaction older than this is one its
# coordinator would have aborted already (the tool's --max-transaction-timeout).
MAX_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000
NO_COORDINATOR_EPOCH = 0  # what the tool writes when the producer's marker epoch is unknown
_IN_PROGRESS_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


class Client(Protocol):
    """What these operations need of ``ClusterClient`` (tests pass a double)."""

    broker_addresses: dict[int, tuple[str, int]]

    async def send_any(self, api_key: int, max_version: int, make: Any) -> Any: ...

    async def send_to(self, broker_id: int, api_key: int, max_version: int, make: Any) -> Any: ...


class NoSuchTransactionError(OpsError):
    """No open transaction where the operator said (the tool's "could not find")."""

    error_code = ErrorCode.invalid_txn_state


class UnknownStateFilterError(OpsError):
    """A --state the coordinators do not know (Kafka's answer lists them)."""

    error_code = ErrorCode.invalid_request


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1: no transaction started
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A transaction a partition's leader holds open (from DescribeProducers)."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class AbortResult:
    tp: TopicPartition
    leader: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


# -- list -------------------------------------------------------------------------------------


async def list_transactions(
    bootstrap: str,
    *,
    states: Sequence[str] = (),
    producer_ids: Sequence[int] = (),
    duration_ms: int | None = None,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> list[TransactionListing]:
    """Every transactional id of the cluster, as each coordinator lists its own."""
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        view = await read_cluster(client)
        return await list_transactions_on(
            client, view.brokers, states=states, producer_ids=producer_ids, duration_ms=duration_ms
        )


async def list_transactions_on(
    client: Client,
    broker_ids: Iterable[int],
    *,
    states: Sequence[str] = (),
    producer_ids: Sequence[int] = (),
    duration_ms: int | None = None,
) -> list[TransactionListing]:
    if duration_ms is not None and duration_ms < 0:
        raise ValueError(f"a duration is never negative: {duration_ms}")
    listed: dict[str, TransactionListing] = {}
    for broker_id in sorted(broker_ids):
        response = await client.send_to(
            broker_id,
            LIST_TRANSACTIONS,
            LIST_TRANSACTIONS_MAX_VERSION,
            lambda t: _list_request(t, states, producer_ids, duration_ms),
        )
        error = ErrorCode(response.error_code)
        if error != ErrorCode.none:
            raise ClusterRequestError(
                f"ListTransactions at broker {broker_id}: {error.name}", error
            )
        unknown = tuple(str(s) for s in response.unknown_state_filters)
        if unknown:
            raise UnknownStateFilterError(
                f"unknown transaction state(s) {', '.join(unknown)}; known: Empty, Ongoing, "
                "PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, "
                "PrepareEpochFence"
            )
        for t in response.transaction_states:
            listed[str(t.transactional_id)] = TransactionListing(
                str(t.transactional_id), int(t.producer_id), str(t.transaction_state), broker_id
            )
    return [listed[t] for t in sorted(listed)]


def _list_request(
    request_type: type, states: Sequence[str], producer_ids: Sequence[int], duration_ms: int | None
) -> Any:
    if duration_ms is not None and "duration_filter" not in request_type.__dataclass_fields__:
        raise UnsupportedByClusterError(
            "the cluster cannot filter transactions by duration (ListTransactions v1)"
        )
    return build(
        request_type,
        state_filters=tuple(states),
        producer_id_filters=tuple(producer_ids),
        duration_filter=-1 if duration_ms is None else duration_ms,
    )


# -- describe ---------------------------------------------------------------------------------


async def describe_transaction(
    bootstrap: str,
    transactional_id: str,
    *,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> TransactionDescription:
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        await read_cluster(client)
        return await describe_transaction_on(client, transactional_id)


async def describe_transaction_on(client: Client, transactional_id: str) -> TransactionDescription:
    """FindCoordinator (TRANSACTION), then DescribeTransactions at the coordinator."""
    coordinator = await find_coordinator(client, transactional_id, TRANSACTION_KEY_TYPE)
    response = await client.send_to(
        coordinator,
        DESCRIBE_TRANSACTIONS,
        DESCRIBE_TRANSACTIONS_MAX_VERSION,
        lambda t: build(t, transactional_ids=(transactional_id,)),
    )
    if len(response.transaction_states) != 1:
        raise ClusterRequestError(
            f"DescribeTransactions answered {len(response.transaction_states)} states for one id"
        )
    state = response.transaction_states[0]
    error = ErrorCode(state.error_code)
    if error != ErrorCode.none:
        raise ClusterRequestError(
            f"DescribeTransactions {transactional_id!r} at broker {coordinator}: {error.name}",
            error,
        )
    return TransactionDescription(
        transactional_id=str(state.transactional_id),
        coordinator=coordinator,
        state=str(state.transaction_state),
        producer_id=int(state.producer_id),
        producer_epoch=int(state.producer_epoch),
        timeout_ms=_millis(state.transaction_timeout),
        start_time_ms=_epoch_millis(state.transaction_start_time),
        partitions=tuple(
            sorted(
                TopicPartition(str(topic.topic), int(p))
                for topic in state.topics
                for p in topic.partitions
            )
        ),
    )


def _millis(value: Any) -> int:
    return int(value / timedelta(milliseconds=1)) if isinstance(value, timedelta) else int(value)


def _epoch_millis(value: Any) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return -1 if value is None else int(value)


# -- abort ------------------------------------------------------------------------------------


async def abort_transaction(
    bootstrap: str,
    tp: TopicPartition,
    start_offset: int,
    *,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> AbortResult:
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        view = await read_cluster(client)
        return await abort_transaction_on(client, view, tp, start_offset)


async def abort_transaction_on(
    client: Client, view: ClusterView, tp: TopicPartition, start_offset: int
) -> AbortResult:
    """Find the producer whose open transaction in ``tp`` starts at ``start_offset``; abort it."""
    leader = _leader_of(view, tp)
    open_txns = await describe_open_transactions_on(client, view, [tp])
    matching = [t for t in open_txns if t.start_offset == start_offset]
    if not matching:
        starts = ", ".join(str(t.start_offset) for t in open_txns) or "none"
        raise NoSuchTransactionError(
            f"no open transaction starts at offset {start_offset} in {tp.topic}-{tp.partition} "
            f"(open transactions start at: {starts})"
        )
    found = matching[0]
    return await abort_producer_on(
        client,
        view,
        tp,
        producer_id=found.producer_id,
        producer_epoch=found.producer_epoch,
        coordinator_epoch=max(found.coordinator_epoch, NO_COORDINATOR_EPOCH),
        leader=leader,
    )


async def abort_producer(
    bootstrap: str,
    tp: TopicPartition,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> AbortResult:
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        view = await read_cluster(client)
        return await abort_producer_on(
            client,
            view,
            tp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
        )


async def abort_producer_on(
    client: Client,
    view: ClusterView,
    tp: TopicPartition,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    leader: int | None = None,
) -> AbortResult:
    """WriteTxnMarkers (ABORT) for ``producer_id`` in ``tp``, to the partition's leader."""
    leader = _leader_of(view, tp) if leader is None else leader

    def make(request_type: type) -> Any:
        marker_type = element_type(request_type, "markers")
        topic_type = element_type(marker_type, "topics")
        return build(
            request_type,
            markers=(
                build(
                    marker_type,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transaction_result=False,  # ABORT
                    topics=(build(topic_type, name=tp.topic, partition_indexes=(tp.partition,)),),
                    coordinator_epoch=coordinator_epoch,
                ),
            ),
        )

    response = await client.send_to(leader, WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_MAX_VERSION, make)
    errors = [
        ErrorCode(p.error_code)
        for marker in response.markers
        for topic in marker.topics
        for p in topic.partitions
    ]
    if not errors:
        raise ClusterRequestError(f"WriteTxnMarkers at broker {leader} answered no partition")
    if errors[0] != ErrorCode.none:
        raise ClusterRequestError(
            f"WriteTxnMarkers (ABORT producer {producer_id} epoch {producer_epoch}) to "
            f"{tp.topic}-{tp.partition} at broker {leader}: {errors[0].name}",
            errors[0],
        )
    return AbortResult(tp, leader, producer_id, producer_epoch, coordinator_epoch)


def _leader_of(view: ClusterView, tp: TopicPartition) -> int:
    info = view.partitions.get(tp)
    if info is None:
        raise ClusterRequestError(
            f"{tp.topic}-{tp.partition} does not exist", ErrorCode.unknown_topic_or_partition
        )
    if info.leader < 0:
        raise ClusterRequestError(
            f"{tp.topic}-{tp.partition} has no leader", ErrorCode.leader_not_available
        )
    return info.leader


# -- producers and hanging transactions -------------------------------------------------------


async def describe_open_transactions_on(
    client: Client, view: ClusterView, partitions: Iterable[TopicPartition]
) -> list[OpenTransaction]:
    """The open transactions of ``partitions``: DescribeProducers at each partition's leader.

    A partition the leader answers with an error is ``ClusterRequestError`` (a leader that
    moved: run the command again)."""
    by_leader: dict[int, dict[str, list[int]]] = {}
    for tp in partitions:
        by_leader.setdefault(_leader_of(view, tp), {}).setdefault(tp.topic, []).append(tp.partition)
    found: list[OpenTransaction] = []
    for leader, topics in sorted(by_leader.items()):

        def make(request_type: type, topics: Mapping[str, list[int]] = topics) -> Any:
            topic_type = element_type(request_type, "topics")
            return build(
                request_type,
                topics=tuple(
                    build(topic_type, name=name, partition_indexes=tuple(indexes))
                    for name, indexes in topics.items()
                ),
            )

        response = await client.send_to(
            leader, DESCRIBE_PRODUCERS, DESCRIBE_PRODUCERS_MAX_VERSION, make
        )
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(str(topic.name), int(p.partition_index))
                error = ErrorCode(p.error_code)
                if error != ErrorCode.none:
                    raise ClusterRequestError(
                        f"DescribeProducers {tp.topic}-{tp.partition} at broker {leader}: "
                        f"{error.name}" + (f" ({p.error_message})" if p.error_message else ""),
                        error,
                    )
                found += [
                    OpenTransaction(
                        tp,
                        int(s.producer_id),
                        int(s.producer_epoch),
                        int(s.coordinator_epoch),
                        int(s.current_txn_start_offset),
                        int(s.last_timestamp),
                    )
                    for s in p.active_producers
                    if s.current_txn_start_offset >= 0
                ]
    return found


async def find_hanging(
    bootstrap: str,
    broker_id: int,
    *,
    max_transaction_timeout_ms: int = MAX_TRANSACTION_TIMEOUT_MS,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> list[OpenTransaction]:
    async with ClusterClient(
        bootstrap, request_timeout_s=request_timeout_s, security=security
    ) as client:
        view = await read_cluster(client)
        return await find_hanging_on(
            client, view, broker_id, max_transaction_timeout_ms=max_transaction_timeout_ms
        )


async def find_hanging_on(
    client: Client,
    view: ClusterView,
    broker_id: int,
    *,
    max_transaction_timeout_ms: int = MAX_TRANSACTION_TIMEOUT_MS,
    now_ms: int | None = None,
) -> list[OpenTransaction]:
    """Open transactions of ``broker_id``'s partitions that no coordinator is completing."""
    if broker_id not in view.brokers:
        raise ClusterRequestError(
            f"broker {broker_id} is not in the cluster", ErrorCode.broker_not_available
        )
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    partitions = sorted(
        tp
        for tp, info in view.partitions.items()
        if broker_id in info.replicas and info.leader >= 0
    )
    open_txns = await describe_open_transactions_on(client, view, partitions)
    candidates = [t for t in open_txns if now_ms - t.last_timestamp_ms > max_transaction_timeout_ms]
    if not candidates:
        return []
    listed = await list_transactions_on(
        client, view.brokers, producer_ids=sorted({t.producer_id for t in candidates})
    )
    in_progress: dict[int, set[tuple[TopicPartition, int]]] = {}
    for listing in listed:
        if listing.state not in _IN_PROGRESS_STATES:
            continue
        try:
            described = await describe_transaction_on(client, listing.transactional_id)
        except ClusterRequestError:
            continue  # gone meanwhile: its producers' open transactions stay candidates
        in_progress.setdefault(described.producer_id, set()).update(
            (tp, described.producer_epoch) for tp in described.partitions
        )
    return [
        t
        for t in candidates
        if (t.tp, t.producer_epoch) not in in_progress.get(t.producer_id, set())
    ]
