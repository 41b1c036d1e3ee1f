"""The partitions one broker hosts: routing requests to them, and the delayed operations.

The replica rules live in ``Partition``; this module finds the partition a request names, turns
every per-partition failure into that partition's Kafka error code (never an exception out of a
request, so one bad partition does not fail the others) and runs what waits:

- **Delayed produce** (Kafka's produce purgatory). An ``acks=all`` request is appended to every
  partition first, then waits until each partition's high watermark passes its batch, for at
  most the request's ``timeout_ms``; a partition still waiting then answers REQUEST_TIMED_OUT
  (its records stay in the log: the producer retries, and idempotence drops the duplicate).
  Waiting never blocks anything else: it is an await on futures the partitions complete.
- **Delayed fetch** (long-polling, as Kafka): read every partition; answer at once if anything
  failed, if ``min_bytes`` are there or ``max_wait_ms`` is 0; otherwise wait until one of the
  partitions may have more (a consumer: its high watermark moved; a follower: its log grew) or
  the wait runs out, then read again. The response holds at most ``max_bytes`` across
  partitions, but the first partition with data always returns its first batch whole (KIP-74).
- **Leadership changes** from the controller go to the partition (``make_leader`` /
  ``make_follower``, which fence stale epochs) and then to the replica fetchers: a follower
  fetches from its new leader, a leader stops fetching.
- **Leader replication throttle** (KIP-73): a follower out of the ISR fetching a partition that
  ``leader.replication.throttled.replicas`` lists here gets no records for it while the leader
  quota is over ``leader.replication.throttled.rate`` (its offsets still go out); the bytes sent
  for listed partitions are recorded once the fetch is answered (``broker/replication_quota.py``).
- **ISR expiry**: ``run_isr_expiration`` asks every led partition, every half
  ``replica.lag.time.max.ms``, to drop followers that stopped catching up.

Runs on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.broker.log_dir_mover import LogDirMover
from odradek.broker.partition import (
    ACKS_ALL,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    IsrChangeSender,
    Partition,
    PartitionState,
    wait_for_any,
)
from odradek.broker.replication_quota import ReplicationQuota
from odradek.broker.workers import Workers
from odradek.common.clock import wall_clock_ms
from odradek.common.partitions import NO_EPOCH, TopicPartition
from odradek.config.topic import TopicConfig
from odradek.errors import (
    ErrorCode,
    InvalidRequiredAcksError,
    OdradekError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from odradek.observability.metrics import BrokerMetrics
from odradek.storage.log import LATEST_TIMESTAMP
from odradek.storage.manager import LogManager
from odradek.storage.segment import FileSlice
from odradek.storage.txn_index import AbortedTxn
from odradek.storage.validator import AppendOrigin
from odradek.time_slices import TimeSlices

__all__ = [
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "FetchPartitionRequest",
    "FetchResult",
    "OffsetResult",
    "ProduceResult",
    "ReplicaFetchers",
    "ReplicaManager",
]

log = logging.getLogger(__name__)

FETCH_ROUNDS_MAX = 1000  # bounds the long-poll loop even if wake-ups keep bringing no data
GAUGES_INTERVAL_S = 1.0
DEFAULT_PRODUCE_TIMEOUT_MS = 30_000  # request.timeout.ms's default, for callers without one


@dataclass(frozen=True, slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    records_count: int = 0
    valid_bytes: int = 0


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    """One partition of a Fetch: where to read, how much, and the fetcher's view (KIP-320).

    ``current_leader_epoch`` is the leader epoch the fetcher believes current (-1: unknown);
    ``last_fetched_epoch`` the epoch of the last batch it holds, for divergence (-1: none);
    ``log_start_offset`` a follower's own log start offset (-1 for consumers).
    """

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchResult:
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset), for a follower
    aborted_transactions: tuple[AbortedTxn, ...] = ()  # read_committed: to drop their records

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


@dataclass(frozen=True, slots=True)
class OffsetResult:
    error: ErrorCode = ErrorCode.none
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


class ReplicaFetchers(Protocol):
    """Where followers' partitions are fetched from (``replica_fetcher.ReplicaFetcherManager``)."""

    def add_partition(self, partition: Partition) -> None: ...

    def remove_partition(self, topic: str, index: int) -> None: ...


def _error_of(exc: Exception, what: str) -> tuple[ErrorCode, str]:
    if isinstance(exc, OdradekError):
        return exc.error_code, str(exc)
    log.exception("unexpected error in %s", what)
    return ErrorCode.unknown_server_error, f"{type(exc).__name__}: {exc}"


class ReplicaManager:
    """Hosts partitions (leader or follower) on top of the log manager."""

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        clock_ms: Callable[[], int] = wall_clock_ms,
        workers: Workers | None = None,
        replica_lag_time_max_ms: int = 30_000,
        isr_changes: IsrChangeSender | None = None,
        fetchers: ReplicaFetchers | None = None,
        metrics: BrokerMetrics | None = None,
        leader_quota: ReplicationQuota | None = None,
        log_dir_moves: LogDirMover | None = None,
    ):
        self.broker_id = broker_id
        self.leader_quota = leader_quota  # None: never throttled (tests)
        self.workers = workers  # None: everything runs inline (tests)
        self.log_manager = log_manager
        self.monotonic = monotonic
        self.clock_ms = clock_ms
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.isr_changes = isr_changes  # None: no controller to ask (tests without a cluster)
        self.fetchers = fetchers  # None: nothing to fetch from (tests without a cluster)
        self.metrics = metrics
        # Moves between log dirs (AlterReplicaLogDirs); None: refused (tests without one).
        self.log_dir_moves = log_dir_moves
        self.partitions: dict[TopicPartition, Partition] = {}
        self.waiting_fetches = 0
        # Told of every leadership change of a hosted partition, after it is applied: (topic,
        # partition, leader epoch when this broker now leads it, else None). The group
        # coordinator loads and unloads its shards of __consumer_offsets with it.
        self.leadership_listeners: list[Callable[[str, int, int | None], None]] = []

    # -- leadership, from the controller -------------------------------------------------

    def become_leader_or_follower(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        config: TopicConfig,
        *,
        is_new: bool = True,
    ) -> bool:
        """Lead or follow with ``state``; False if its leader epoch is stale (nothing changed).

        The log is created (or opened) first if this broker does not host the partition yet.
        """
        hosted = self.partitions.get((topic, partition))
        if hosted is None:
            partition_log = self.log_manager.get_or_create_log(
                topic, partition, config, is_new=is_new
            )
            hosted = Partition(
                topic,
                partition,
                self.broker_id,
                partition_log,
                replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                isr_changes=self.isr_changes,
                on_isr_change=self._count_isr_change,
                clock_ms=self.clock_ms,
            )
            self.partitions[(topic, partition)] = hosted
            if self.log_dir_moves is not None:
                self.log_dir_moves.resume(hosted)  # a move a restart interrupted
        else:
            hosted.log.update_config(config)
        if state.leader == self.broker_id:
            if not hosted.make_leader(state):
                return False
            if self.fetchers is not None:
                self.fetchers.remove_partition(topic, partition)
            self._tell_leadership(topic, partition, state.leader_epoch)
            return True
        if not hosted.make_follower(state):
            return False
        self._tell_leadership(topic, partition, None)
        log.info(
            "%s: following leader %d in epoch %d", hosted.name, state.leader, state.leader_epoch
        )
        if self.fetchers is not None:
            self.fetchers.remove_partition(topic, partition)
            if state.leader >= 0:
                self.fetchers.add_partition(hosted)
        return True

    def _tell_leadership(self, topic: str, partition: int, leader_epoch: int | None) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(topic, partition, leader_epoch)
            except Exception:
                log.exception("a leadership listener failed for %s-%d", topic, partition)

    def _count_isr_change(self, expanded: bool) -> None:
        if self.metrics is not None:
            (self.metrics.isr_expands if expanded else self.metrics.isr_shrinks).inc()

    def stop_replica(self, topic: str, partition: int, *, delete: bool) -> None:
        """Stop hosting; with ``delete`` remove the log too (topic deletion, reassignment)."""
        hosted = self.partitions.pop((topic, partition), None)
        if hosted is not None:
            self._tell_leadership(topic, partition, None)
        if self.fetchers is not None:
            self.fetchers.remove_partition(topic, partition)
        if self.log_dir_moves is not None:
            self.log_dir_moves.stop(topic, partition)
        if hosted is not None:
            hosted.stop()
        if delete:
            self.log_manager.delete_log(topic, partition)

    def get_partition(self, topic: str, partition: int) -> Partition:
        hosted = self.partitions.get((topic, partition))
        if hosted is None:
            raise UnknownTopicOrPartitionError(
                f"broker {self.broker_id} does not host {topic}-{partition}"
            )
        return hosted

    def leader_partitions(self) -> Iterable[Partition]:
        return (p for p in self.partitions.values() if p.is_leader)

    async def run_isr_expiration(
        self, stop: asyncio.Event, metrics: BrokerMetrics | None = None
    ) -> None:
        """Every half ``replica.lag.time.max.ms``, drop lagging followers from led ISRs; every
        ``GAUGES_INTERVAL_S``, refresh the partition gauges (ISRs and waiters change often)."""
        expiry_interval_s = self.replica_lag_time_max_ms / 2 / 1000
        next_expiry_s = self.monotonic() + expiry_interval_s
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), min(GAUGES_INTERVAL_S, expiry_interval_s))
            self.update_gauges(metrics)
            if self.monotonic() < next_expiry_s:
                continue
            next_expiry_s = self.monotonic() + expiry_interval_s
            for partition in list(self.leader_partitions()):
                try:
                    partition.maybe_shrink_isr()
                except Exception:
                    log.exception("ISR expiry of %s failed", partition.name)

    def update_gauges(self, metrics: BrokerMetrics | None) -> None:
        """Partition counts for the metrics: hosted, led, under-replicated, offline, ..."""
        if metrics is None:
            return
        led = list(self.leader_partitions())
        metrics.partitions.set(len(self.partitions))
        metrics.leader_partitions.set(len(led))
        metrics.under_replicated_partitions.set(
            sum(1 for p in led if len(p.state.isr) < len(p.state.replicas))
        )
        metrics.under_min_isr_partitions.set(
            sum(1 for p in led if len(p.state.isr) < p.log.config.min_insync_replicas)
        )
        metrics.offline_partitions.set(len(self.log_manager.offline_partitions()))
        metrics.offline_log_dirs.set(len(self.log_manager.offline_dirs))
        metrics.purgatory_size.labels("produce").set(sum(p.waiting_produces for p in led))
        metrics.purgatory_size.labels("fetch").set(self.waiting_fetches)

    # -- produce -------------------------------------------------------------------------

    async def append_records(
        self,
        acks: int,
        entries: Mapping[TopicPartition, bytes | memoryview],
        *,
        timeout_ms: int = DEFAULT_PRODUCE_TIMEOUT_MS,
        origin: str = AppendOrigin.CLIENT,
    ) -> dict[TopicPartition, ProduceResult]:
        """Append each partition's record set as leader; one result per partition.

        Partitions are appended one after the other, each awaited directly: most appends never
        yield (validation inline, a write to the page cache), and a task per partition would cost
        two more turns of the event loop per request, measured at a third of a small produce
        request's cost. With ``acks=all`` the answer then waits for replication (the module
        docstring); ``acks`` 0 and 1 are answered once the leader appended. ``origin``
        ``AppendOrigin.COORDINATOR`` is for the transaction coordinator's markers only
        (WriteTxnMarkers), never for a client's Produce.
        """
        results, replication = await self.append_records_then_wait(
            acks, entries, timeout_ms=timeout_ms, origin=origin
        )
        return results if replication is None else await replication

    async def append_records_then_wait(
        self,
        acks: int,
        entries: Mapping[TopicPartition, bytes | memoryview],
        *,
        timeout_ms: int = DEFAULT_PRODUCE_TIMEOUT_MS,
        origin: str = AppendOrigin.CLIENT,
    ) -> tuple[
        dict[TopicPartition, ProduceResult],
        Coroutine[Any, Any, dict[TopicPartition, ProduceResult]] | None,
    ]:
        """``append_records`` in two steps: append now, and (for ``acks=all`` with something
        appended) a coroutine that waits for replication and returns the final results. The
        Produce handler answers with it later, while its connection's next request is appended
        (``DeferredAnswer``)."""
        if acks not in (0, 1, ACKS_ALL):
            error = InvalidRequiredAcksError(f"acks must be 0, 1 or -1, not {acks}")
            refused = {
                tp: ProduceResult(error.error_code, error_message=str(error)) for tp in entries
            }
            return refused, None
        results: dict[TopicPartition, ProduceResult] = {}
        waiting: dict[TopicPartition, asyncio.Future[Exception | None]] = {}
        # In time slices: a partition refused (unknown, not led here) costs microseconds, and a
        # request may name 200,000 of them (issue 23: 1 MB of markers held the loop 1.3 s).
        slices = TimeSlices()
        appended: list[Partition] = []  # their followers' fetches are woken after the loop
        try:
            for (topic, index), records in entries.items():
                await slices.tick()
                result, partition, next_offset = await self._append(
                    topic, index, records, acks, origin
                )
                results[(topic, index)] = result
                if partition is not None:
                    appended.append(partition)
                if acks == ACKS_ALL and partition is not None and result.error == ErrorCode.none:
                    waiting[(topic, index)] = partition.wait_for_high_watermark(next_offset)
        finally:
            for partition in appended:
                partition.wake_follower_fetches()
        if not waiting:
            return results, None
        return results, self._await_replication(results, waiting, timeout_ms)

    async def _append(
        self, topic: str, index: int, records: bytes | memoryview, acks: int, origin: str
    ) -> tuple[ProduceResult, Partition | None, int]:
        """The partition's result, the partition, and the offset its HW must reach."""
        partition = None
        try:
            partition = self.get_partition(topic, index)
            info = await partition.append_as_leader(
                records, acks, self.workers, origin=origin, wake_fetches=False
            )
        except Exception as e:  # each partition answers for itself
            code, message = _error_of(e, f"produce to {topic}-{index}")
            return ProduceResult(code, error_message=message), None, -1
        result = ProduceResult(
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=info.log_start_offset,
            records_count=info.records_count,  # 0 for a producer's retry (a duplicate)
            valid_bytes=info.valid_bytes,
        )
        return result, partition, info.last_offset + 1

    async def _await_replication(
        self,
        results: dict[TopicPartition, ProduceResult],
        waiting: dict[TopicPartition, asyncio.Future[Exception | None]],
        timeout_ms: int,
    ) -> dict[TopicPartition, ProduceResult]:
        """The delayed produce: each waiting partition's outcome, or REQUEST_TIMED_OUT."""
        pending = [w for w in waiting.values() if not w.done()]
        try:
            if pending:
                await asyncio.wait(pending, timeout=max(timeout_ms, 0) / 1000)
        except asyncio.CancelledError:  # the producer went away: its waiters are dropped
            for waiter in pending:
                waiter.cancel()
            raise
        for tp, waiter in waiting.items():
            result = results[tp]
            if not waiter.done():
                waiter.cancel()
                error: Exception | None = RequestTimedOutError(
                    f"{tp[0]}-{tp[1]}: not replicated to the ISR within {timeout_ms} ms"
                )
            else:
                error = (
                    waiter.result()
                )  # the error is the result: Partition.wait_for_high_watermark
            if error is not None:
                code, message = _error_of(error, f"produce to {tp[0]}-{tp[1]}")
                results[tp] = ProduceResult(
                    code,
                    base_offset=result.base_offset,
                    log_start_offset=result.log_start_offset,
                    error_message=message,
                )
            else:
                results[tp] = result
        return results

    # -- fetch ---------------------------------------------------------------------------

    async def fetch(
        self,
        requests: list[FetchPartitionRequest],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation_level: int = READ_UNCOMMITTED,
        replica_id: int = -1,
    ) -> list[FetchResult]:
        """Read the partitions, long-polling up to ``max_wait_ms`` for ``min_bytes``.

        ``replica_id`` is the fetching broker's id, -1 for a consumer. After a wake-up only the
        partitions that woke the wait are read again; the others keep their first read (for a
        follower, a high watermark that moved meanwhile reaches it at its next fetch, as a
        follower's always lags one fetch in Kafka). Reading a follower's whole session at every
        wake-up made each round cost every partition it follows: with thousands of them and
        records arriving a few partitions at a time, that was most of a broker's time.
        """
        deadline = self.monotonic() + max(max_wait_ms, 0) / 1000
        results = await self._read_all(requests, max_bytes, isolation_level, replica_id)
        for _ in range(FETCH_ROUNDS_MAX):
            remaining_s = deadline - self.monotonic()
            if (
                remaining_s <= 0
                or any(r.error != ErrorCode.none or r.diverging_epoch for r in results)
                or sum(r.size for r in results) >= max(min_bytes, 1)
            ):
                break
            waiting = [
                hosted
                for r in requests
                if (hosted := self.partitions.get((r.topic, r.partition))) is not None
            ]
            self.waiting_fetches += 1  # the fetch purgatory: fetches that wait, not all
            try:
                woken = await wait_for_any(waiting, remaining_s, for_follower=replica_id >= 0)
            finally:
                self.waiting_fetches -= 1
            if not woken:
                break
            results = await self._read_again(
                requests, results, woken, max_bytes, isolation_level, replica_id
            )
        if replica_id >= 0 and self.leader_quota is not None:
            self._record_throttled(results, self.leader_quota)
        return results

    def _record_throttled(self, results: list[FetchResult], quota: ReplicationQuota) -> None:
        """Kafka counts every throttled partition's bytes sent to a follower, in sync or not."""
        sent = 0
        for result in results:
            hosted = self.partitions.get((result.topic, result.partition))
            if (
                result.size
                and hosted is not None
                and quota.is_throttled(hosted.log.config, result.partition)
            ):
                sent += result.size
        quota.record(sent)

    async def _read_all(
        self,
        requests: list[FetchPartitionRequest],
        max_bytes: int,
        isolation_level: int,
        replica_id: int,
    ) -> list[FetchResult]:
        """Each partition read in turn, in time slices (a fetch may name 30,000 partitions in
        1 MB; each read is independent of the others, as in Kafka)."""
        budget = max_bytes
        results = []
        slices = TimeSlices()
        for request in requests:
            await slices.tick()
            result = self._read(
                request, budget, isolation_level, replica_id, min_one=budget == max_bytes
            )
            budget = max(budget - result.size, 0)
            results.append(result)
        return results

    async def _read_again(
        self,
        requests: list[FetchPartitionRequest],
        results: list[FetchResult],
        woken: set[TopicPartition],
        max_bytes: int,
        isolation_level: int,
        replica_id: int,
    ) -> list[FetchResult]:
        """``results`` with the partitions in ``woken`` read again, within what the others
        already hold of ``max_bytes``."""
        budget = max(max_bytes - sum(r.size for r in results), 0)
        again = list(results)
        slices = TimeSlices()
        for n, request in enumerate(requests):
            if (request.topic, request.partition) not in woken:
                continue
            await slices.tick()
            budget += results[n].size
            again[n] = self._read(
                request, budget, isolation_level, replica_id, min_one=budget == max_bytes
            )
            budget = max(budget - again[n].size, 0)
        return again

    def _read(
        self,
        request: FetchPartitionRequest,
        budget: int,
        isolation_level: int,
        replica_id: int,
        min_one: bool,
    ) -> FetchResult:
        topic, index = request.topic, request.partition
        try:
            hosted = self.get_partition(topic, index)
            read = hosted.read(
                request.fetch_offset,
                min(request.max_bytes, budget),
                replica_id=replica_id,
                current_leader_epoch=request.current_leader_epoch,
                last_fetched_epoch=request.last_fetched_epoch,
                isolation_level=isolation_level,
                min_one_message=min_one,
            )
        except Exception as e:
            code, _ = _error_of(e, f"fetch from {topic}-{index}")
            return FetchResult(topic, index, error=code)
        records = read.records
        if (
            records is not None
            and replica_id >= 0
            and self.leader_quota is not None
            and self.leader_quota.should_throttle(
                hosted.log.config, index, in_sync=replica_id in hosted.state.isr
            )
        ):
            records = None  # read (the follower's fetch state moved), but not sent: throttled
        return FetchResult(
            topic,
            index,
            high_watermark=read.high_watermark,
            last_stable_offset=read.last_stable_offset,
            log_start_offset=read.log_start_offset,
            records=records,
            diverging_epoch=read.diverging_epoch,
            aborted_transactions=read.aborted_transactions if records is not None else (),
        )

    # -- offsets -------------------------------------------------------------------------

    def list_offsets(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        isolation_level: int = READ_UNCOMMITTED,
        *,
        replica_id: int = -1,
        current_leader_epoch: int = NO_EPOCH,
    ) -> OffsetResult:
        """ListOffsets for one partition: -2 earliest, -1 latest, -3 max timestamp, or a time.

        Consumers (``replica_id`` -1) ask the leader and see offsets below the high watermark
        (read_committed: below the last stable offset); a replica may ask any replica and sees
        its whole log.
        """
        try:
            hosted = self.get_partition(topic, partition)
            hosted.check_leader_epoch(current_leader_epoch)
            partition_log = hosted.log
            if replica_id < 0:
                hosted.check_leader()
                upper = (
                    partition_log.last_stable_offset
                    if isolation_level == READ_COMMITTED
                    else partition_log.high_watermark
                )
            else:
                upper = partition_log.log_end_offset
            found = partition_log.offset_for_timestamp(timestamp, max_offset=upper)
            if found is None:
                return OffsetResult(timestamp=-1, offset=-1)
            if timestamp == LATEST_TIMESTAMP:
                return OffsetResult(
                    timestamp=-1, offset=upper, leader_epoch=hosted.state.leader_epoch
                )
            epoch = partition_log.leader_epoch_cache.epoch_for_offset(found.offset)
            return OffsetResult(
                timestamp=found.timestamp,
                offset=found.offset,
                leader_epoch=-1 if epoch is None else epoch,
            )
        except Exception as e:
            code, _ = _error_of(e, f"list offsets of {topic}-{partition}")
            return OffsetResult(error=code)

    def last_offset_for_leader_epoch(
        self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int
    ) -> OffsetResult:
        """OffsetForLeaderEpoch: ``offset`` is the end offset of ``leader_epoch`` (or the
        largest epoch below it, then named in ``leader_epoch``)."""
        try:
            epoch, end_offset = self.get_partition(topic, partition).last_offset_for_leader_epoch(
                current_leader_epoch, leader_epoch
            )
        except Exception as e:
            code, _ = _error_of(e, f"offset for leader epoch of {topic}-{partition}")
            return OffsetResult(error=code)
        return OffsetResult(offset=end_offset, leader_epoch=epoch)

    def delete_records(self, topic: str, partition: int, offset: int) -> OffsetResult:
        """DeleteRecords: move the log start offset (-1 means the high watermark), on the
        leader; followers follow the leader's log start offset as they fetch."""
        try:
            hosted = self.get_partition(topic, partition)
            hosted.check_leader()
            partition_log = hosted.log
            target = partition_log.high_watermark if offset == -1 else offset
            if target < 0:
                raise OffsetOutOfRangeError(f"cannot delete records before offset {offset}")
            low_watermark = partition_log.advance_log_start_offset(target)
            partition_log.delete_old_segments()
            return OffsetResult(offset=low_watermark)
        except Exception as e:
            code, _ = _error_of(e, f"delete records of {topic}-{partition}")
            return OffsetResult(error=code)
