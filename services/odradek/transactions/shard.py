"""One partition of ``__transaction_state`` as state, and the coordinator's pure operations.

Kafka's ``TransactionCoordinator`` + ``TransactionStateManager`` for the transactional ids that
hash to one partition (``partition_for``: ``abs(hashCode) % transaction.state.log.num.partitions``),
shaped as the group coordinator's shards (``groups.shard``).

**One code path for recovery and live traffic.** ``transactions`` is what ``replay`` made of the
partition's records. An operation never changes it: it returns an ``Outcome`` (records to append,
the answer, and the markers to write once the records are replicated); the runtime appends the
records and replays them through the same ``replay`` a loading coordinator uses. Hence the state
after live operations equals the state a new coordinator loads from the same records.

What no value holds (``last_producer_epoch``; ``previous_producer_id`` in value v0) an
operation's records carry in memory (``TransactionRecord``): live replay takes it from there,
a reload has -1, as Kafka's coordinator loses it on a coordinator change. Everything else is
equal between live state and a reload of the same records.

**The life of a transaction** (transaction version 1; version 2's epoch bump per transaction
and value v1 writes are not done here):

1. ``init_producer_id``: a new id gets a producer id from the injected allocator and epoch 0;
   a known id in Empty/Complete* has its epoch bumped (a new producer id once the epoch is
   exhausted); in Ongoing the old producer is fenced (epoch bumped, the transaction aborted:
   PrepareAbort written, abort markers listed) and the client told CONCURRENT_TRANSACTIONS until
   the abort completes; in Prepare* CONCURRENT_TRANSACTIONS.
2. ``add_partitions`` / ``add_offsets``: Ongoing, with the partitions (AddOffsetsToTxn adds the
   group's ``__consumer_offsets`` partition).
3. ``end_transaction``: PrepareCommit/PrepareAbort written, then the client is answered and the
   markers (``TxnMarker``) go to the partitions' leaders.
4. ``complete``: once every marker is written, CompleteCommit/CompleteAbort (no partitions).

``abort_timed_out(now)`` fences and aborts Ongoing transactions past their timeout;
``expire_transactional_ids(now)`` tombstones ids idle longer than
``transactional.id.expiration.ms``; ``pending_completions()`` is what a new coordinator must
finish after loading (every Prepare*: write the markers, then ``complete``).

**Markers go only once the Prepare* record is replicated** (the runtime's ``on_written``): a
record written but not replicated in time is still the shard's state (the runtime replays at
append, unlike Kafka, which reverts a pending transition whose write failed), so whoever sends
markers must also re-drive ``pending_completions()`` on a timer, not only after loading, or a
transaction whose Prepare record replicated late stays in Prepare* (the client's retries get
CONCURRENT_TRANSACTIONS) until the next failover.

Errors: a fenced producer gets PRODUCER_FENCED; handlers of request versions older than KIP-588
answer INVALID_PRODUCER_EPOCH instead (``fenced_error_for``). Pure; one operation at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TypeVar

from odradek.common.topics import OFFSETS_TOPIC
from odradek.coordinator.partitioner import partition_for
from odradek.coordinator.records import CoordinatorRecord
from odradek.errors import ErrorCode
from odradek.transactions import views
from odradek.transactions.config import TransactionCoordinatorConfig
from odradek.transactions.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalStateTransitionError,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
    log_value_version,
)
from odradek.transactions.records import TransactionLogKey
from odradek.transactions.result import (
    InitProducerIdAnswer,
    Outcome,
    TransactionDescription,
    TransactionListing,
    TransactionRecord,
    TxnMarker,
)

__all__ = ["TransactionShardContext", "TransactionCoordinatorShard", "check_init_producer_id"]

S = TransactionState
T = TypeVar("T")


@dataclass(slots=True)
class TransactionShardContext:
    partition: int
    config: TransactionCoordinatorConfig
    # A new producer id, never given before (the controller's or ZooKeeper's id blocks).
    allocate_producer_id: Callable[[], int]
    clock_ms: Callable[[], int]
    # The leader epoch of the partition: the coordinator epoch markers carry.
    coordinator_epoch: int = 0
    # The offset the next written record gets (what a runtime advances; as groups' shards).
    log_end_offset: int = 0


class TransactionCoordinatorShard:
    def __init__(self, context: TransactionShardContext):
        self.context = context
        self.transactions: dict[str, TransactionMetadata] = {}

    # -- replay ----------------------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord) -> None:
        """Apply one record of the partition, in log order (live or loading)."""
        key = record.key
        if not isinstance(key, TransactionLogKey):
            raise RuntimeError(f"not a __transaction_state key: {type(key).__name__}")
        tid = key.transactional_id
        if record.value is None:
            self.transactions.pop(tid, None)
            return
        loaded = TransactionMetadata.from_value(tid, record.value)
        if isinstance(record, TransactionRecord):
            loaded = replace(
                loaded,
                last_producer_epoch=record.last_producer_epoch,
                previous_producer_id=record.previous_producer_id,
            )
        self.transactions[tid] = loaded

    def on_loaded(self) -> None:
        """The whole log was replayed (the shard interface ``coordinator.runtime`` calls). What must
        then be finished is ``pending_completions``; the timers are the runtime's."""

    def on_unloaded(self) -> None:
        """The shard goes away: nothing waits in it (the markers' sender holds no state here)."""

    def owns(self, transactional_id: str) -> bool:
        config = self.context.config
        return (
            partition_for(transactional_id, config.transaction_state_log_num_partitions)
            == self.context.partition
        )

    # -- InitProducerId --------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> Outcome[InitProducerIdAnswer]:
        """InitProducerId with a transactional id (Kafka's ``handleInitProducerId``).

        ``expected_*`` (KIP-360, InitProducerId v3+): the id and epoch the producer holds, -1
        when it holds none."""
        refused = check_init_producer_id(
            self.context.config, transactional_id, transaction_timeout_ms
        )
        if refused is not ErrorCode.none:
            return Outcome(InitProducerIdAnswer(refused))
        now = self.context.clock_ms()
        current = self.transactions.get(transactional_id)
        if current is None:
            current = TransactionMetadata(
                transactional_id=transactional_id,
                producer_id=self.context.allocate_producer_id(),
                producer_epoch=NO_PRODUCER_EPOCH,
                transaction_timeout_ms=transaction_timeout_ms,
                transaction_last_update_timestamp_ms=now,
            )
        expected = expected_producer_id != NO_PRODUCER_ID
        if expected and not _is_valid_producer_id(
            current, expected_producer_id, expected_producer_epoch
        ):
            return Outcome(InitProducerIdAnswer(ErrorCode.producer_fenced))
        state = current.state
        if state.is_completing:
            return Outcome(InitProducerIdAnswer(ErrorCode.concurrent_transactions))
        if state is S.ONGOING:
            # Fence the producer of the running transaction and abort it; the client retries.
            return self._fence_and_abort(
                current, now, InitProducerIdAnswer(ErrorCode.concurrent_transactions)
            )
        if state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            raise IllegalStateTransitionError(
                f"InitProducerId of {transactional_id!r} in {state.kafka_name}"
            )
        # Empty, CompleteCommit, CompleteAbort
        if is_epoch_exhausted(current.producer_epoch) and (
            not expected or expected_producer_epoch == current.producer_epoch
        ):
            following = current.transit(
                S.EMPTY,
                producer_id=self.context.allocate_producer_id(),
                producer_epoch=0,
                last_producer_epoch=current.producer_epoch if expected else NO_PRODUCER_EPOCH,
                transaction_timeout_ms=transaction_timeout_ms,
                partitions=frozenset(),
                transaction_start_timestamp_ms=-1,
                transaction_last_update_timestamp_ms=now,
            )
        else:
            epochs = _incremented_epoch(current, expected, expected_producer_epoch)
            if epochs is None:
                return Outcome(InitProducerIdAnswer(ErrorCode.producer_fenced))
            epoch, last_epoch = epochs
            following = current.transit(
                S.EMPTY,
                producer_epoch=epoch,
                last_producer_epoch=last_epoch,
                transaction_timeout_ms=transaction_timeout_ms,
                partitions=frozenset(),
                transaction_start_timestamp_ms=-1,
                transaction_last_update_timestamp_ms=now,
            )
        return Outcome(
            InitProducerIdAnswer(ErrorCode.none, following.producer_id, following.producer_epoch),
            (self._record(following),),
        )

    # -- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------------

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> Outcome[ErrorCode]:
        """AddPartitionsToTxn (v0 to v3, one transaction): one error for every partition.

        Checking that the topics exist is the handler's (UNKNOWN_TOPIC_OR_PARTITION, the others
        OPERATION_NOT_ATTEMPTED), before it calls this."""
        wanted = frozenset(partitions)
        current, error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if current is None:
            return Outcome(error)
        state = current.state
        if state.is_completing:
            return Outcome(ErrorCode.concurrent_transactions)
        if state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            raise IllegalStateTransitionError(
                f"AddPartitionsToTxn of {transactional_id!r} in {state.kafka_name}"
            )
        if state is S.ONGOING and wanted <= current.partitions:
            return Outcome(ErrorCode.none)  # nothing new: no write
        if not wanted:
            return Outcome(ErrorCode.none)
        now = self.context.clock_ms()
        start = current.transaction_start_timestamp_ms if state is S.ONGOING else now
        following = current.transit(
            S.ONGOING,
            partitions=current.partitions | wanted,
            transaction_start_timestamp_ms=start,
            transaction_last_update_timestamp_ms=now,
        )
        return Outcome(ErrorCode.none, (self._record(following),))

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        """The ``__consumer_offsets`` partition that owns ``group_id``."""
        return OFFSETS_TOPIC, partition_for(
            group_id, self.context.config.offsets_topic_num_partitions
        )

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> Outcome[ErrorCode]:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction
        (its offsets are committed by TxnOffsetCommit, and settled by the markers)."""
        return self.add_partitions(
            transactional_id, producer_id, producer_epoch, (self.offsets_partition(group_id),)
        )

    # -- EndTxn and completion ---------------------------------------------------------------------

    def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
    ) -> Outcome[ErrorCode]:
        """EndTxn (transaction version 1): Ongoing -> PrepareCommit/PrepareAbort and the markers
        to write; a retry of a completed or completing end is NONE or CONCURRENT_TRANSACTIONS;
        any other end is INVALID_TXN_STATE."""
        current, error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if current is None:
            return Outcome(error)
        state = current.state
        if state is S.ONGOING:
            return self._prepare_end(current, committed, self.context.clock_ms(), ErrorCode.none)
        if state is S.COMPLETE_COMMIT or state is S.COMPLETE_ABORT:
            done = state is S.COMPLETE_COMMIT
            return Outcome(ErrorCode.none if done == committed else ErrorCode.invalid_txn_state)
        if state.is_completing:
            done = state is S.PREPARE_COMMIT
            return Outcome(
                ErrorCode.concurrent_transactions
                if done == committed
                else ErrorCode.invalid_txn_state
            )
        if state is S.EMPTY:
            return Outcome(ErrorCode.invalid_txn_state)
        raise IllegalStateTransitionError(f"EndTxn of {transactional_id!r} in {state.kafka_name}")

    def complete(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> Outcome[ErrorCode]:
        """Every marker of the Prepare* transaction is written: CompleteCommit/CompleteAbort.

        NONE with no record when the transaction is no longer the one the markers were for
        (another producer id or epoch, or no longer Prepare*): a stale completion."""
        current = self.transactions.get(transactional_id)
        if (
            current is None
            or not current.state.is_completing
            or current.producer_id != producer_id
            or current.producer_epoch != producer_epoch
        ):
            return Outcome(ErrorCode.none)
        final = S.COMPLETE_COMMIT if current.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        following = current.transit(
            final,
            partitions=frozenset(),
            transaction_last_update_timestamp_ms=self.context.clock_ms(),
        )
        return Outcome(ErrorCode.none, (self._record(following),))

    def pending_completions(self) -> list[TxnMarker]:
        """After loading: the markers of every Prepare* transaction, to (re)write before
        ``complete`` (a coordinator may have died between the Prepare* record and the end)."""
        return [
            self._markers(metadata)
            for _, metadata in sorted(self.transactions.items())
            if metadata.state.is_completing
        ]

    # -- time --------------------------------------------------------------------------------------

    def timed_out_transactions(self, now_ms: int) -> list[str]:
        """Ongoing transactions started more than their timeout before ``now_ms``."""
        return sorted(
            tid
            for tid, metadata in self.transactions.items()
            if metadata.state is S.ONGOING
            and metadata.transaction_start_timestamp_ms + metadata.transaction_timeout_ms < now_ms
        )

    def abort_timed_out(self, now_ms: int, limit: int | None = None) -> Outcome[list[str]]:
        """Fence and abort every timed-out transaction (Kafka's ``abortTimedOutTransactions``):
        its producer's epoch is bumped, so the producer learns of it as PRODUCER_FENCED. At most
        ``limit`` of them (the first by id), so that the records fit one batch."""
        aborted = self.timed_out_transactions(now_ms)[:limit]
        records: list[CoordinatorRecord] = []
        markers: list[TxnMarker] = []
        for tid in aborted:
            outcome = self._fence_and_abort(self.transactions[tid], now_ms, None)
            records.extend(outcome.records)
            markers.extend(outcome.markers)
        return Outcome(aborted, tuple(records), tuple(markers))

    def expire_transactional_ids(self, now_ms: int, limit: int | None = None) -> Outcome[list[str]]:
        """Tombstones for ids idle (Empty, Complete*) for ``transactional.id.expiration.ms``;
        at most ``limit`` of them (the first by id)."""
        horizon = now_ms - self.context.config.transactional_id_expiration_ms
        expired = sorted(
            tid
            for tid, metadata in self.transactions.items()
            if metadata.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            and metadata.transaction_last_update_timestamp_ms <= horizon
        )[:limit]
        for tid in expired:
            self.transactions[tid].transit(S.DEAD, partitions=frozenset())  # legality
        records = tuple(CoordinatorRecord(TransactionLogKey(tid), None) for tid in expired)
        return Outcome(expired, records)

    # -- Describe, List ----------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionDescription:
        return views.describe(self.transactions, transactional_id)

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
    ) -> tuple[list[TransactionListing], list[str]]:
        return views.list_transactions(
            self.transactions,
            self.context.clock_ms(),
            state_filters,
            producer_id_filters,
            duration_filter_ms,
        )

    # -- helpers -----------------------------------------------------------------------------------

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[TransactionMetadata | None, ErrorCode]:
        """The producer's transaction, or why the request may not touch it: an empty id is
        INVALID_REQUEST, another producer id INVALID_PRODUCER_ID_MAPPING, an old epoch fenced."""
        if not transactional_id:
            return None, ErrorCode.invalid_request
        current = self.transactions.get(transactional_id)
        if current is None or current.producer_id != producer_id:
            return None, ErrorCode.invalid_producer_id_mapping
        if current.producer_epoch != producer_epoch:
            return None, ErrorCode.producer_fenced
        return current, ErrorCode.none

    def _fence_and_abort(self, current: TransactionMetadata, now: int, response: T) -> Outcome[T]:
        epoch = current.producer_epoch
        bumped = epoch if epoch >= MAX_PRODUCER_EPOCH else epoch + 1
        # Kafka's prepareFenceProducerEpoch then its abort: the epoch bumped (unless at its
        # maximum) and never answered to a producer; the last epoch forgotten, so no producer
        # may claim the bumped epoch as the retry of a bump it asked for.
        fenced = current.transit(
            S.PREPARE_EPOCH_FENCE, producer_epoch=bumped, last_producer_epoch=NO_PRODUCER_EPOCH
        )
        return self._prepare_end(fenced, False, now, response)

    def _prepare_end(
        self, current: TransactionMetadata, committed: bool, now: int, response: T
    ) -> Outcome[T]:
        following = current.transit(
            S.PREPARE_COMMIT if committed else S.PREPARE_ABORT,
            transaction_last_update_timestamp_ms=now,
        )
        return Outcome(response, (self._record(following),), (self._markers(following),))

    def _record(self, metadata: TransactionMetadata) -> TransactionRecord:
        version = log_value_version(self.context.config.transaction_version_level)
        return TransactionRecord(
            TransactionLogKey(metadata.transactional_id),
            metadata.to_value(version),
            last_producer_epoch=metadata.last_producer_epoch,
            previous_producer_id=metadata.previous_producer_id,
        )

    def _markers(self, metadata: TransactionMetadata) -> TxnMarker:
        return TxnMarker(
            transactional_id=metadata.transactional_id,
            producer_id=metadata.producer_id,
            producer_epoch=metadata.producer_epoch,
            committed=metadata.state is S.PREPARE_COMMIT,
            coordinator_epoch=self.context.coordinator_epoch,
            partitions=tuple(sorted(metadata.partitions)),
        )


def check_init_producer_id(
    config: TransactionCoordinatorConfig, transactional_id: str, transaction_timeout_ms: int
) -> ErrorCode:
    """What Kafka answers an InitProducerId before looking for its transaction (on any broker,
    coordinator or not): INVALID_REQUEST for an empty id, INVALID_TRANSACTION_TIMEOUT outside
    ``(0, transaction.max.timeout.ms]``; NONE otherwise."""
    if not transactional_id:
        return ErrorCode.invalid_request
    if not 0 < transaction_timeout_ms <= config.transaction_max_timeout_ms:
        return ErrorCode.invalid_transaction_timeout
    return ErrorCode.none


def _is_valid_producer_id(current: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """Kafka's ``isValidProducerId`` (KIP-360): a new id (epoch -1); the current producer id
    (its epoch is checked by the bump); or the previous one with an exhausted epoch (a retry
    after a producer id rotation whose answer was lost)."""
    return (
        current.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == current.producer_id
        or (producer_id == current.previous_producer_id and is_epoch_exhausted(epoch))
    )


def _incremented_epoch(
    current: TransactionMetadata, expected: bool, expected_epoch: int
) -> tuple[int, int] | None:
    """Kafka's ``prepareIncrementProducerEpoch``: (epoch, last epoch), None if fenced.

    Without an expected epoch (a new producer), bump and forget the epoch before: no retry may
    claim it. With one: bump if it is the current epoch (or the id is new), remembering it;
    answer the current epoch again if it is the one before the last bump (a retry whose answer
    was lost); otherwise the producer is a zombie."""
    bumped = current.producer_epoch + 1
    if not expected:
        return bumped, NO_PRODUCER_EPOCH
    if current.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == current.producer_epoch:
        return bumped, current.producer_epoch
    if expected_epoch == current.last_producer_epoch:
        return current.producer_epoch, current.last_producer_epoch
    return None
