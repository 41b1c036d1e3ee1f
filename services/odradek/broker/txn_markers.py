"""The transaction coordinator's marker sender: WriteTxnMarkers to each partition's leader.

Kafka's ``TransactionMarkerChannelManager``. The coordinator ``submit``s a ``TxnMarker`` (one
producer's COMMIT or ABORT for every partition of its transaction) with ``on_written``; the
sender writes it to every partition and then awaits ``on_written(marker)``, after which the
coordinator writes CompleteCommit/CompleteAbort.

How:

- each partition of a pending marker is routed to its leader in the metadata cache, at that
  broker's address on the inter-broker listener. A destination broker has one queue, one
  connection and one sending task; the task drains the queue into one WriteTxnMarkers request
  of at most ``MARKERS_PER_REQUEST_MAX`` markers (never two of one producer id in a request: the
  response names results by producer id), sends it, waits for the answer (the leader answers
  once the ISR has the markers) and applies it. One request in flight per destination, as
  Kafka's marker channel (its client allows one per connection): markers submitted meanwhile
  wait and go together in the next request.
- a partition written (NONE) is done; a partition that no longer exists is done too (it is
  left out, as Kafka removes it from the transaction): the metadata names no such partition when
  it is routed (a leader's UNKNOWN_TOPIC_OR_PARTITION is routed again, and so dropped once the
  metadata has lost the topic). So is UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION, as in
  Kafka (no producer could have written transactional data there).
- NOT_LEADER_OR_FOLLOWER, an unknown leader, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, UNKNOWN_TOPIC_OR_PARTITION, a failed connection and
  any error Kafka deems unexpected: the partition is routed again (the leader looked up again)
  after a backoff doubling from
  ``RETRY_BACKOFF_S_FIRST`` to ``RETRY_BACKOFF_S_MAX``, at most ``SEND_ATTEMPTS_MAX`` times; then
  the whole marker is dropped without ``on_written``: the coordinator re-drives its unfinished
  transactions (``pending_completions``) on a timer.
- TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH: a newer coordinator (or producer
  epoch) has taken over; the whole marker is dropped, ``on_written`` is never called.
- ``cancel_owner(owner)``: the coordinator resigned its ``__transaction_state`` partition
  ``owner``; its pending markers are dropped, and answers still in flight for them are ignored.
- the same marker submitted again while pending (a coordinator's retry timer) is ignored.

Bounds: ``PENDING_MARKERS_MAX`` markers pending (one more is dropped with an error logged, and
re-driven by the coordinator's timer); markers per request; attempts per partition. The
connection is injected (``connect``), so tests drive the sender with fake brokers.

Runs on the broker's event loop only; ``submit`` and ``cancel_owner`` never block.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.write_txn_markers.v1 import request as wire

from odradek.broker.metadata_cache import MetadataCache
from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.common.partitions import TopicPartition
from odradek.config.endpoints import HostPort
from odradek.errors import ErrorCode
from odradek.observability.metrics import TxnMarkerMetrics
from odradek.transactions.result import TxnMarker

__all__ = [
    "MARKER_APPEND_TIMEOUT_MS",
    "MARKERS_PER_REQUEST_MAX",
    "PENDING_MARKERS_MAX",
    "OnWritten",
    "TxnMarkerSender",
]

log = logging.getLogger(__name__)

OnWritten = Callable[[TxnMarker], Awaitable[None]]

RETRY_BACKOFF_S_FIRST = 0.05
RETRY_BACKOFF_S_MAX = 2.0
SEND_ATTEMPTS_MAX = 1000  # per partition of a marker: about half an hour at the longest backoff
PENDING_MARKERS_MAX = 100_000
MARKERS_PER_REQUEST_MAX = 500
# How long a leader waits for its ISR to have a marker (Kafka: request.timeout.ms, 30 s by
# default), and so how long the sender waits for its answer, with a margin for the wire.
MARKER_APPEND_TIMEOUT_MS = 30_000
REQUEST_TIMEOUT_S = MARKER_APPEND_TIMEOUT_MS / 1000 + 5.0
CONNECT_TIMEOUT_S = 10.0

# A newer coordinator or producer epoch took over: the marker is no longer this sender's to write.
_FENCED = frozenset({ErrorCode.transaction_coordinator_fenced, ErrorCode.invalid_producer_epoch})
# The producer could not have written transactional data there: nothing to end (Kafka's rule).
_NOTHING_TO_END = frozenset(
    {ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version}
)


class MarkerConnection(Protocol):
    """What the sender uses of a ``BrokerConnection`` (tests pass fakes)."""

    @property
    def closed(self) -> bool: ...

    async def send(self, request: Any) -> Any: ...

    async def close(self) -> None: ...


Connect = Callable[[str, int], Awaitable[MarkerConnection]]


async def open_connection(
    host: str, port: int, *, tls: ssl.SSLContext | None = None
) -> MarkerConnection:
    return await BrokerConnection.open(
        host,
        port,
        client_id="odradek-txn-markers",
        connect_timeout_s=CONNECT_TIMEOUT_S,
        request_timeout_s=REQUEST_TIMEOUT_S,
        tls=tls,
    )


@dataclass(eq=False, slots=True)
class _Pending:
    """A submitted marker: the partitions still to write, and the attempts of each."""

    marker: TxnMarker
    on_written: OnWritten
    owner: int
    remaining: set[TopicPartition]
    attempts: dict[TopicPartition, int] = field(default_factory=dict)


class _Destination:
    """One broker's queue: pending markers and their partitions to send it, in order."""

    def __init__(self, sender: TxnMarkerSender, broker_id: int):
        self.sender = sender
        self.broker_id = broker_id
        self.queue: dict[_Pending, set[TopicPartition]] = {}
        self.wake = asyncio.Event()
        self.connection: MarkerConnection | None = None
        self.address: HostPort | None = None
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"txn-markers-to-{broker_id}"
        )

    def add(self, pending: _Pending, tp: TopicPartition) -> None:
        self.queue.setdefault(pending, set()).add(tp)
        self.wake.set()

    def _take_batch(self) -> list[tuple[_Pending, set[TopicPartition]]]:
        batch: list[tuple[_Pending, set[TopicPartition]]] = []
        producers: set[int] = set()
        for pending in list(self.queue):
            if len(batch) >= MARKERS_PER_REQUEST_MAX:
                break
            if pending.marker.producer_id in producers:
                continue
            partitions = self.queue.pop(pending)
            if not self.sender.is_pending(pending):
                continue  # cancelled or dropped meanwhile
            producers.add(pending.marker.producer_id)
            batch.append((pending, partitions))
        return batch

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            while self.queue:
                batch = self._take_batch()
                if not batch:
                    continue
                try:
                    await self._send(batch)
                except Exception:  # a bug must not stop this broker's queue for good
                    log.exception("WriteTxnMarkers to broker %d failed", self.broker_id)
                    await self._close_connection()
                    for pending, partitions in batch:
                        for tp in partitions:
                            self.sender.retry(pending, tp, ErrorCode.unknown_server_error)

    async def _send(self, batch: list[tuple[_Pending, set[TopicPartition]]]) -> None:
        sender = self.sender
        address = sender.address_of(self.broker_id)
        try:
            if address is None:
                raise ConnectionError(f"broker {self.broker_id} has no inter-broker address")
            if self.connection is None or self.connection.closed or address != self.address:
                await self._close_connection()
                self.address = address
                self.connection = await sender.connect(address.host, address.port)
            response = await self.connection.send(_request(batch))
        except (ClientError, OSError) as e:
            log.info("WriteTxnMarkers to broker %d failed (%s): retrying", self.broker_id, e)
            await self._close_connection()
            for pending, partitions in batch:
                for tp in partitions:
                    sender.retry(pending, tp, ErrorCode.network_exception)
            return
        errors = _errors_by_producer(response)
        for pending, partitions in batch:
            found = errors.get(pending.marker.producer_id, {})
            for tp in partitions:
                sender.settle(pending, tp, found.get(tp, ErrorCode.unknown_server_error))

    async def _close_connection(self) -> None:
        if self.connection is not None:
            connection, self.connection = self.connection, None
            with contextlib.suppress(Exception):
                await connection.close()

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self._close_connection()


def _request(batch: list[tuple[_Pending, set[TopicPartition]]]) -> wire.WriteTxnMarkersRequest:
    markers = []
    for pending, partitions in batch:
        topics: dict[str, list[int]] = {}
        for name, index in sorted(partitions):
            topics.setdefault(name, []).append(index)
        marker = pending.marker
        markers.append(
            wire.WritableTxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                transaction_result=marker.committed,
                topics=tuple(
                    wire.WritableTxnMarkerTopic(name=name, partition_indexes=tuple(indexes))
                    for name, indexes in topics.items()
                ),
                coordinator_epoch=marker.coordinator_epoch,
            )
        )
    return wire.WriteTxnMarkersRequest(markers=tuple(markers))


def _errors_by_producer(response: Any) -> dict[int, dict[TopicPartition, ErrorCode]]:
    errors: dict[int, dict[TopicPartition, ErrorCode]] = {}
    for result in response.markers:
        found = errors.setdefault(int(result.producer_id), {})
        for topic in result.topics:
            for partition in topic.partitions:
                found[(topic.name, int(partition.partition_index))] = ErrorCode(
                    partition.error_code
                )
    return errors


class TxnMarkerSender:
    """Writes transaction markers to partition leaders; see the module docstring."""

    def __init__(
        self,
        metadata: MetadataCache,
        inter_broker_listener: str,
        *,
        connect: Connect = open_connection,
        metrics: TxnMarkerMetrics | None = None,
    ):
        self.metadata = metadata
        self.inter_broker_listener = inter_broker_listener
        self.connect = connect
        self.metrics = metrics
        self._pending: dict[tuple[TxnMarker, int], _Pending] = {}
        self._destinations: dict[int, _Destination] = {}
        self._timers: set[asyncio.TimerHandle] = set()
        self._callbacks: set[asyncio.Task[None]] = set()
        self._closed = False
        if metrics is not None:
            metrics.pending.set_function(lambda: len(self._pending))

    # -- the coordinator's interface -------------------------------------------------------

    def submit(self, marker: TxnMarker, on_written: OnWritten, *, owner: int) -> None:
        """Write ``marker`` to each of its partitions, then await ``on_written(marker)``."""
        if self._closed:
            return
        key = (marker, owner)
        if key in self._pending:
            return  # re-driven by the coordinator while still pending: one write is enough
        if len(self._pending) >= PENDING_MARKERS_MAX:
            log.error(
                "dropping the %s marker of %s: %d markers already pending",
                "COMMIT" if marker.committed else "ABORT",
                marker.transactional_id,
                len(self._pending),
            )
            return
        pending = _Pending(marker, on_written, owner, set(marker.partitions))
        self._pending[key] = pending
        if not pending.remaining:
            self._written(pending)
            return
        for tp in sorted(pending.remaining):
            self._route(pending, tp)

    def cancel_owner(self, owner: int) -> None:
        """Drop every pending marker of ``__transaction_state`` partition ``owner``."""
        for key in [k for k, p in self._pending.items() if p.owner == owner]:
            del self._pending[key]

    async def close(self) -> None:
        self._closed = True
        self._pending.clear()
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        for destination in self._destinations.values():
            await destination.close()
        self._destinations.clear()
        for task in list(self._callbacks):
            task.cancel()
        if self._callbacks:
            await asyncio.wait(set(self._callbacks))

    # -- state, for destinations and tests -------------------------------------------------

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def is_pending(self, pending: _Pending) -> bool:
        return self._pending.get((pending.marker, pending.owner)) is pending

    def address_of(self, broker_id: int) -> HostPort | None:
        broker = self.metadata.brokers.get(broker_id)
        return broker.endpoint(self.inter_broker_listener) if broker is not None else None

    # -- routing and outcomes ----------------------------------------------------------------

    def _route(self, pending: _Pending, tp: TopicPartition) -> None:
        """Queue ``tp`` of ``pending`` for its leader now (or retry later: leader unknown)."""
        if not self.is_pending(pending) or tp not in pending.remaining:
            return
        topic = self.metadata.topic(tp[0])
        partition = None if topic is None else topic.partitions.get(tp[1])
        if partition is None:
            log.info(
                "%s-%d is not in the metadata (deleted?): no %s marker for %s there",
                tp[0],
                tp[1],
                "COMMIT" if pending.marker.committed else "ABORT",
                pending.marker.transactional_id,
            )
            self._done(pending, tp)
            return
        leader = partition.leader
        if leader < 0 or self.address_of(leader) is None:
            self.retry(pending, tp, ErrorCode.leader_not_available)
            return
        destination = self._destinations.get(leader)
        if destination is None:
            destination = self._destinations[leader] = _Destination(self, leader)
        destination.add(pending, tp)

    def settle(self, pending: _Pending, tp: TopicPartition, error: ErrorCode) -> None:
        """Apply a leader's answer for ``tp`` of ``pending``."""
        if not self.is_pending(pending):
            return  # cancelled or dropped while the request was in flight
        if error == ErrorCode.none or error in _NOTHING_TO_END:
            self._done(pending, tp)
        elif error in _FENCED:
            self._count(error)
            log.info(
                "dropping the %s marker of %s (producer %d epoch %d): %s from %s-%d",
                "COMMIT" if pending.marker.committed else "ABORT",
                pending.marker.transactional_id,
                pending.marker.producer_id,
                pending.marker.producer_epoch,
                error.name,
                tp[0],
                tp[1],
            )
            self._drop(pending)
        else:  # UNKNOWN_TOPIC_OR_PARTITION too: routed again, dropped if the topic is gone
            self.retry(pending, tp, error)

    def retry(self, pending: _Pending, tp: TopicPartition, error: ErrorCode) -> None:
        """Route ``tp`` again after a backoff, or drop the marker after too many attempts."""
        if not self.is_pending(pending) or self._closed:
            return
        self._count(error)
        attempts = pending.attempts[tp] = pending.attempts.get(tp, 0) + 1
        if attempts >= SEND_ATTEMPTS_MAX:
            log.error(
                "dropping the marker of %s after %d attempts at %s-%d (last: %s); the "
                "coordinator will send it again",
                pending.marker.transactional_id,
                attempts,
                tp[0],
                tp[1],
                error.name,
            )
            self._drop(pending)
            return
        delay_s = min(RETRY_BACKOFF_S_FIRST * 2 ** (attempts - 1), RETRY_BACKOFF_S_MAX)
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.discard(timer)
            self._route(pending, tp)

        timer = loop.call_later(delay_s, fire)
        self._timers.add(timer)

    def _done(self, pending: _Pending, tp: TopicPartition) -> None:
        pending.remaining.discard(tp)
        if not pending.remaining and self.is_pending(pending):
            self._written(pending)

    def _drop(self, pending: _Pending) -> None:
        if self.is_pending(pending):
            del self._pending[(pending.marker, pending.owner)]

    def _written(self, pending: _Pending) -> None:
        del self._pending[(pending.marker, pending.owner)]
        if self.metrics is not None:
            self.metrics.written.inc()
        task = asyncio.get_running_loop().create_task(self._call_on_written(pending))
        self._callbacks.add(task)
        task.add_done_callback(self._callbacks.discard)

    @staticmethod
    async def _call_on_written(pending: _Pending) -> None:
        try:
            await pending.on_written(pending.marker)
        except Exception:
            log.exception(
                "completing the transaction of %s after its markers failed",
                pending.marker.transactional_id,
            )

    def _count(self, error: ErrorCode) -> None:
        if self.metrics is not None:
            self.metrics.errors.labels(error=error.name).inc()
