"""The transaction coordinator as request handlers use it: which ``__transaction_state``
partition owns a transactional id, its shards on a ``CoordinatorRuntime``, the markers and the
timers. One per broker (``BrokerContext.transactions``); ``broker.transaction_coordinator``
wires it to the broker's replicas.

**Two-phase commit.** An operation of the shard returns an ``Outcome``; its records are written
(and replayed) by the runtime, and its markers are handed to the ``MarkerSender`` only once the
records are replicated (``Result.on_written`` without error): a marker is never written for a
Prepare* record a failover could lose. When the sender has written a marker to every partition
it calls back, and ``complete`` is written (CompleteCommit/CompleteAbort).

**One marker in flight per transaction.** A transaction's markers are submitted once, and
again only while the sender may still hold them (it ignores a marker it holds): never once its
callback has begun, until the Complete record is written or the partition resigned
(``cancel_owner``). A COMMIT written again after completion could land after the producer began
its next transaction (same producer id and epoch in transaction version 1) and commit that one
too. Whatever is in Prepare* and not in flight is re-driven from ``pending_completions()``
after a load and every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``, once what
the shard wrote is replicated (``runtime.read``): a Prepare record replicated late, a callback
that failed, a sender that was not there yet; and a submission older than
``RESUBMIT_AFTER_MS`` whose callback never came (a sender that gave up or was full) is
submitted again.

**Waiting for a completion** (not in Kafka, which answers at once). AddPartitionsToTxn,
AddOffsetsToTxn and InitProducerId on a transaction in PrepareCommit/PrepareAbort are answered
CONCURRENT_TRANSACTIONS by the shard; a client then retries after a pause of its own (librdkafka:
20 ms), while the markers take a few milliseconds. Here the request waits instead, outside the
shard's lock, for the transaction to leave Prepare* (its Complete record appended and replayed;
the operation's own record follows it in the log, so its answer, given once that record is
replicated, implies the Complete record is too), then runs the operation again: the same
operation the client's retry would run, earlier. At most ``completion_wait_ms``
(``COMPLETION_WAIT_MS``) in all; past it the client gets CONCURRENT_TRANSACTIONS as before. A
resign wakes the waiters and the retry answers NOT_COORDINATOR. An InitProducerId that fences an
Ongoing transaction waits likewise for the abort it started.

**Timers** (the runtime's, cancelled on resign): abort the transactions past their timeout
(``abort_timed_out``, which fences their producers) and re-drive completions every cleanup
interval; tombstone expired transactional ids every removal interval. A round handles at most
``TIMER_TRANSACTIONS_MAX`` transactions (one batch of records) and leaves the rest to a round a
second later.

**Producer ids.** The shard allocates synchronously inside an operation; the id comes from an
asynchronous source (ZooKeeper blocks). ``_ProducerIds`` awaits one id before an
InitProducerId and lends it to that operation only; an id it did not use is kept for the next
one. Each id from the source is given at most once.

Runs on the broker's event loop; one instance per broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

from odradek.coordinator.errors import CoordinatorLoadInProgressError, NotCoordinatorError
from odradek.coordinator.partitioner import partition_for
from odradek.coordinator.result import Result
from odradek.coordinator.runtime import CoordinatorLog, CoordinatorRuntime
from odradek.errors import ErrorCode
from odradek.time_slices import TimeSlices, distinct, sliced
from odradek.transactions import records
from odradek.transactions.config import TransactionCoordinatorConfig
from odradek.transactions.metadata import TransactionState
from odradek.transactions.result import (
    InitProducerIdAnswer,
    Outcome,
    TransactionDescription,
    TransactionListing,
    TxnMarker,
)
from odradek.transactions.shard import (
    TransactionCoordinatorShard,
    TransactionShardContext,
    check_init_producer_id,
)

__all__ = ["MarkerSender", "ProducerIdSource", "TransactionCoordinator"]

log = logging.getLogger(__name__)

T = TypeVar("T")
ABORT_TIMER = "abort-timed-out"
EXPIRE_TIMER = "expire-transactional-ids"
REDRIVE_TIMER = "complete-pending"
# Transactions one timer round aborts or expires: their records are one batch, well below
# max.message.bytes; more are left to a round soon after.
TIMER_TRANSACTIONS_MAX = 500
# A marker submitted this long ago without its callback is submitted again (see above).
RESUBMIT_AFTER_MS = 60_000
# How long AddPartitionsToTxn, AddOffsetsToTxn and InitProducerId wait for a transaction in
# Prepare* to complete before answering CONCURRENT_TRANSACTIONS (see above). Well below any
# client's request timeout (librdkafka, the Java client: 30 s or more).
COMPLETION_WAIT_MS = 1000
_COMPLETING = -1  # in flight: the callback has begun, never submit again


class MarkerSender(Protocol):
    """Writes a transaction's markers to its partitions (``broker.txn_markers``)."""

    def submit(
        self,
        marker: TxnMarker,
        on_written: Callable[[TxnMarker], Awaitable[None]],
        *,
        owner: int,
    ) -> None: ...

    def cancel_owner(self, owner: int) -> None: ...


class ProducerIdSource(Protocol):
    async def next_producer_id(self) -> int: ...


class ProducerIdNotReservedError(RuntimeError):
    """A shard allocated a producer id outside an operation that reserved one (a bug)."""


class _ProducerIds:
    """Producer ids for the shards' synchronous ``allocate_producer_id``; see the module doc."""

    def __init__(self, source: ProducerIdSource):
        self._source = source
        self._spare: list[int] = []
        self._lent: int | None = None

    async def reserve(self) -> int:
        return self._spare.pop() if self._spare else await self._source.next_producer_id()

    def give_back(self, producer_id: int) -> None:
        """``producer_id`` was reserved and never lent: the next operation gets it."""
        self._spare.append(producer_id)

    @contextlib.contextmanager
    def lend(self, producer_id: int) -> Iterator[None]:
        """``producer_id`` is what ``allocate`` gives while this runs (synchronously)."""
        self._lent = producer_id
        try:
            yield
        finally:
            if self._lent is not None:
                self.give_back(self._lent)  # unused by the operation
            self._lent = None

    def allocate(self) -> int:
        if self._lent is None:
            raise ProducerIdNotReservedError("no producer id was reserved for this operation")
        producer_id, self._lent = self._lent, None
        return producer_id


class _Shard(TransactionCoordinatorShard):
    """A shard that starts its timers once loaded (the runtime calls ``on_loaded``)."""

    def __init__(self, context: TransactionShardContext, timer: Any, owner: TransactionCoordinator):
        super().__init__(context)
        self.timer = timer
        self.owner = owner

    def on_loaded(self) -> None:
        self.owner._on_loaded(self)

    def replay(self, record: Any) -> None:
        super().replay(record)
        tid = record.key.transactional_id
        current = self.transactions.get(tid)
        if current is None or not current.state.is_completing:
            self.owner._settled(self.context.partition, tid)


class TransactionCoordinator:
    def __init__(
        self,
        coordinator_log: CoordinatorLog,
        config: TransactionCoordinatorConfig,
        producer_ids: ProducerIdSource,
        *,
        markers: Callable[[], MarkerSender | None] = lambda: None,
        clock_ms: Callable[[], int],
        completion_wait_ms: int = COMPLETION_WAIT_MS,
    ):
        self.config = config
        self.completion_wait_ms = completion_wait_ms
        self._markers = markers  # the broker's sender, looked up when needed
        self.clock_ms = clock_ms
        self._ids = _ProducerIds(producer_ids)
        self._leader_epochs: dict[int, int] = {}  # partitions elected here: their leader epoch
        self._contexts: dict[int, TransactionShardContext] = {}
        self._timers: dict[int, Any] = {}  # handed from new_context to new_shard
        # Per partition: (transactional id, producer id, epoch) -> when submitted, or _COMPLETING.
        self._in_flight: dict[int, dict[tuple[str, int, int], int]] = {}
        # Per partition: transactional id -> the requests waiting for it to leave Prepare*.
        self._waiters: dict[int, dict[str, list[asyncio.Future[None]]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._warned_no_sender = False
        self.runtime = CoordinatorRuntime(
            coordinator_log,
            self._new_context,  # type: ignore[arg-type]
            new_shard=self._new_shard,  # type: ignore[arg-type]
            record_format=records.FORMAT,
            write_timeout_ms=config.write_timeout_ms,
            clock_ms=clock_ms,
        )

    # -- ownership -------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def on_elected(self, partition: int, leader_epoch: int) -> None:
        """This broker leads ``partition`` of ``__transaction_state``: load it (coordinator
        epoch = the leader epoch; a later epoch while loaded is what new markers carry)."""
        self._leader_epochs[partition] = max(leader_epoch, self._leader_epochs.get(partition, 0))
        context = self._contexts.get(partition)
        if context is not None:  # loaded or loading: the runtime keeps it, with this epoch
            context.coordinator_epoch = max(context.coordinator_epoch, leader_epoch)
        self.runtime.on_elected(partition, leader_epoch)

    def on_resigned(self, partition: int) -> None:
        """Not the leader any more: unload, and drop the markers still waiting to be sent (the
        new coordinator sends them again, with its higher coordinator epoch)."""
        self._leader_epochs.pop(partition, None)
        self._contexts.pop(partition, None)
        self.runtime.on_resigned(partition)
        self._in_flight.pop(partition, None)
        for waiting in self._waiters.pop(partition, {}).values():
            _wake(waiting)  # their retry answers NOT_COORDINATOR
        sender = self._markers()
        if sender is not None:
            sender.cancel_owner(partition)

    def _new_context(self, partition: int, timer: Any) -> TransactionShardContext:
        context = TransactionShardContext(
            partition,
            self.config,
            self._ids.allocate,
            self.clock_ms,
            coordinator_epoch=self._leader_epochs.get(partition, 0),
        )
        self._contexts[partition] = context
        self._timers[partition] = timer
        return context

    def _new_shard(self, context: TransactionShardContext) -> _Shard:
        return _Shard(context, self._timers.pop(context.partition), self)

    # -- operations ------------------------------------------------------------------------------

    async def write(
        self, transactional_id: str, operation: Callable[[TransactionCoordinatorShard], Outcome[T]]
    ) -> T:
        """Run ``operation`` on the shard owning ``transactional_id``; raises NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (``groups.errors``)."""
        partition = self.partition_for(transactional_id)
        return await self.runtime.write(
            partition,
            lambda shard: self._result(partition, operation(shard)),  # type: ignore[arg-type]
        )

    async def read(
        self, transactional_id: str, operation: Callable[[TransactionCoordinatorShard], T]
    ) -> T:
        return await self.runtime.read(
            self.partition_for(transactional_id),
            operation,  # type: ignore[arg-type]
        )

    async def _init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
    ) -> InitProducerIdAnswer:
        refused = check_init_producer_id(self.config, transactional_id, transaction_timeout_ms)
        if refused is not ErrorCode.none:
            return InitProducerIdAnswer(refused)
        partition = self.partition_for(transactional_id)
        if not self.runtime.is_active(partition):
            # NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS before asking ZooKeeper for an id
            await self.runtime.write(partition, lambda _shard: Result())
        reserved = await self._ids.reserve()
        lent = False

        def operation(shard: TransactionCoordinatorShard) -> Outcome[InitProducerIdAnswer]:
            nonlocal lent
            lent = True
            with self._ids.lend(reserved):
                return shard.init_producer_id(
                    transactional_id, transaction_timeout_ms, producer_id, producer_epoch
                )

        try:
            return await self.write(transactional_id, operation)
        finally:
            if not lent:  # the shard went away before running it: the id is still unused
                self._ids.give_back(reserved)

    async def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> InitProducerIdAnswer:
        """InitProducerId with a transactional id. A producer id is reserved first (the shard
        may need a new one); raises as ``write``, and the source's errors (ZooKeeper). Waits for
        a completing transaction (see the module doc)."""
        return await self._waiting_for_completion(
            transactional_id,
            lambda: self._init_producer_id(
                transactional_id, transaction_timeout_ms, producer_id, producer_epoch
            ),
            lambda answer: answer.error is ErrorCode.concurrent_transactions,
        )

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> ErrorCode:
        wanted = tuple(partitions)
        return await self._waiting_for_completion(
            transactional_id,
            lambda: self.write(
                transactional_id,
                lambda s: s.add_partitions(transactional_id, producer_id, producer_epoch, wanted),
            ),
            _is_concurrent,
        )

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        return await self._waiting_for_completion(
            transactional_id,
            lambda: self.write(
                transactional_id,
                lambda s: s.add_offsets(transactional_id, producer_id, producer_epoch, group_id),
            ),
            _is_concurrent,
        )

    async def _waiting_for_completion(
        self,
        transactional_id: str,
        run: Callable[[], Awaitable[T]],
        busy: Callable[[T], bool],
    ) -> T:
        """``run()``, again each time the transaction leaves Prepare* while its answer is
        ``busy`` (CONCURRENT_TRANSACTIONS), for at most ``completion_wait_ms``. The waiter is
        registered before each run: a completion between the answer and the wait is seen."""
        partition = self.partition_for(transactional_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.completion_wait_ms / 1000
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            waiting = self._waiters.setdefault(partition, {}).setdefault(transactional_id, [])
            waiting.append(waiter)
            try:
                answer = await run()
                remaining = deadline - loop.time()
                if not busy(answer) or remaining <= 0:
                    return answer
                try:
                    await asyncio.wait_for(waiter, remaining)
                except TimeoutError:
                    return answer
            finally:
                self._unwait(partition, transactional_id, waiter)

    def _unwait(self, partition: int, transactional_id: str, waiter: asyncio.Future[None]) -> None:
        by_id = self._waiters.get(partition)
        waiting = None if by_id is None else by_id.get(transactional_id)
        if waiting is None:
            return
        with contextlib.suppress(ValueError):
            waiting.remove(waiter)
        if not waiting:
            del by_id[transactional_id]  # type: ignore[union-attr]

    def _settled(self, partition: int, transactional_id: str) -> None:
        """The shard replayed a record leaving ``transactional_id`` out of Prepare*."""
        by_id = self._waiters.get(partition)
        if by_id:
            waiting = by_id.pop(transactional_id, None)
            if waiting:
                _wake(waiting)

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode:
        return await self.write(
            transactional_id,
            lambda s: s.end_transaction(transactional_id, producer_id, producer_epoch, committed),
        )

    async def describe(self, transactional_id: str) -> TransactionDescription:
        return await self.read(transactional_id, lambda s: s.describe(transactional_id))

    async def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
    ) -> tuple[ErrorCode, list[TransactionListing], list[str]]:
        """ListTransactions over every partition led here; COORDINATOR_LOAD_IN_PROGRESS while
        one of them loads (Kafka's answer: a partial list would look complete)."""
        elected = sorted(self._leader_epochs)
        if any(self.runtime.is_loading(p) for p in elected):
            return ErrorCode.coordinator_load_in_progress, [], []
        # Each shard gets the distinct filters only (issue 23: a million repeats of one state
        # name were gone through again by each of the 50 shards, 15 s on the loop); what they
        # admit is the same. Every unknown name is listed back, each occurrence, as Kafka.
        slices = TimeSlices()
        names = list(state_filters)
        states = tuple(await distinct(names, slices))
        pids = frozenset(await distinct(producer_id_filters, slices))
        listings: list[TransactionListing] = []
        for partition in elected:
            await slices.tick(len(pids) + 1)  # each shard's look-up weighs its filters
            try:
                found, _ = await self.runtime.read(
                    partition,
                    lambda s: s.list_transactions(states, pids, duration_filter_ms),  # type: ignore[attr-defined]
                )
            except (NotCoordinatorError, CoordinatorLoadInProgressError):
                continue  # resigned meanwhile: its transactions are another broker's
            listings.extend(found)
        known = {name for name in states if TransactionState.from_kafka_name(name) is not None}
        unknown = [name async for name in sliced(names, slices) if name not in known]
        return ErrorCode.none, listings, unknown

    # -- markers ---------------------------------------------------------------------------------

    def _result(self, partition: int, outcome: Outcome[T]) -> Result[T]:
        """The runtime's ``Result``: the markers go once the records are replicated."""
        markers = outcome.markers
        if not markers:
            return Result(outcome.records, response=outcome.response)

        def on_written(error: BaseException | None) -> None:
            if error is None:
                for marker in markers:
                    self._send(partition, marker)
            # else: the records may still replicate; the timer re-drives what is in Prepare*.

        return Result(outcome.records, response=outcome.response, on_written=on_written)

    def _send(self, partition: int, marker: TxnMarker) -> None:
        key = (marker.transactional_id, marker.producer_id, marker.producer_epoch)
        in_flight = self._in_flight.setdefault(partition, {})
        now_ms = self.clock_ms()
        submitted_ms = in_flight.get(key)
        if submitted_ms is not None and (
            submitted_ms == _COMPLETING or now_ms - submitted_ms < RESUBMIT_AFTER_MS
        ):
            return
        sender = self._markers()
        if sender is None:
            if not self._warned_no_sender:
                log.warning("no transaction marker sender: transactions stay in Prepare*")
                self._warned_no_sender = True
            return
        in_flight[key] = now_ms
        sender.submit(marker, lambda m: self._complete(partition, m), owner=partition)

    async def _complete(self, partition: int, marker: TxnMarker) -> None:
        """Every marker of ``marker`` is written: CompleteCommit/CompleteAbort."""
        key = (marker.transactional_id, marker.producer_id, marker.producer_epoch)
        in_flight = self._in_flight.get(partition)
        if in_flight is not None:
            in_flight[key] = _COMPLETING
        try:
            await self.runtime.write(
                partition,
                lambda s: self._result(
                    partition,
                    s.complete(  # type: ignore[attr-defined]
                        marker.transactional_id, marker.producer_id, marker.producer_epoch
                    ),
                ),
            )
        except (NotCoordinatorError, CoordinatorLoadInProgressError):
            pass  # resigned: the next coordinator re-drives it
        except Exception as e:
            log.warning("completing %r failed (re-driven later): %s", marker.transactional_id, e)
        finally:
            if in_flight is not None and self._in_flight.get(partition) is in_flight:
                in_flight.pop(key, None)

    async def _redrive(self, partition: int) -> None:
        """Send the markers of every Prepare* transaction not in flight, once what the shard
        wrote is replicated."""
        try:
            pending = await self.runtime.read(partition, lambda s: s.pending_completions())  # type: ignore[attr-defined]
        except (NotCoordinatorError, CoordinatorLoadInProgressError):
            return
        except Exception as e:
            log.info("re-driving completions of partition %d later: %s", partition, e)
            return
        for marker in pending:
            self._send(partition, marker)

    # -- timers ----------------------------------------------------------------------------------

    def _on_loaded(self, shard: _Shard) -> None:
        partition = shard.context.partition
        config = self.config
        abort_ms = config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        expire_ms = config.transaction_remove_expired_transaction_cleanup_interval_ms

        def redrive() -> None:
            self._spawn(self._redrive(partition))

        def abort_timed_out() -> Result[Any]:
            aborted = shard.abort_timed_out(self.clock_ms(), TIMER_TRANSACTIONS_MAX)
            more = len(aborted.response) == TIMER_TRANSACTIONS_MAX
            shard.timer.schedule(
                ABORT_TIMER, _soon(abort_ms) if more else abort_ms, abort_timed_out
            )
            if aborted.response:
                log.info("aborting timed-out transactions %s", aborted.response)
            redrive()
            return self._result(partition, aborted)

        def expire() -> Result[Any]:
            expired = shard.expire_transactional_ids(self.clock_ms(), TIMER_TRANSACTIONS_MAX)
            more = len(expired.response) == TIMER_TRANSACTIONS_MAX
            shard.timer.schedule(EXPIRE_TIMER, _soon(expire_ms) if more else expire_ms, expire)
            return self._result(partition, expired)

        shard.timer.schedule(REDRIVE_TIMER, 0, redrive)
        shard.timer.schedule(ABORT_TIMER, abort_ms, abort_timed_out)
        shard.timer.schedule(EXPIRE_TIMER, expire_ms, expire)

    def _spawn(self, coroutine: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        await self.runtime.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _is_concurrent(error: ErrorCode) -> bool:
    return error is ErrorCode.concurrent_transactions


def _wake(waiting: list[asyncio.Future[None]]) -> None:
    for waiter in waiting:
        if not waiter.done():
            waiter.set_result(None)


def _soon(interval_ms: int) -> int:
    """The delay of the next round when one round could not do everything."""
    return min(interval_ms, 1000)
