"""The partitions one broker hosts, and the produce, fetch and offset operations on them.

Request handlers decode a request, call one method here with plain values, and encode what it
returns; the rules live here and in ``Partition``. Every per-partition failure becomes that
partition's Kafka error code in the result (never an exception out of a request), so one bad
partition does not fail the others.

Fetch long-polling follows Kafka: read every partition; answer at once if anything failed, if
``min_bytes`` are there or ``max_wait_ms`` is 0; otherwise wait until an append lands on one of
the partitions or the wait runs out, then read again. The response holds at most ``max_bytes``
across partitions, but the first partition with data always returns its first batch whole
(KIP-74), so a consumer can always make progress.

Runs on the broker's event loop only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from odradek.broker.partition import Partition, PartitionState, wait_for_any
from odradek.broker.workers import Workers
from odradek.config.topic import TopicConfig
from odradek.errors import (
    ErrorCode,
    InvalidRequiredAcksError,
    NotLeaderOrFollowerError,
    OdradekError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from odradek.observability.metrics import BrokerMetrics
from odradek.storage.log import LATEST_TIMESTAMP
from odradek.storage.manager import LogManager
from odradek.storage.segment import FileSlice

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
FETCH_ROUNDS_MAX = 1000  # bounds the long-poll loop even if wake-ups keep bringing no data


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
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
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
    # (epoch, end_offset): the fetcher's log diverges from ours after end_offset (KIP-320).
    diverging_epoch: tuple[int, int] | None = None

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


@dataclass(frozen=True, slots=True)
class OffsetResult:
    error: ErrorCode = ErrorCode.none
    timestamp: int = -1
    offset: int = -1


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
        workers: Workers | None = None,
    ):
        self.broker_id = broker_id
        self.workers = workers  # None: everything runs inline (tests)
        self.log_manager = log_manager
        self.monotonic = monotonic
        self.partitions: dict[TopicPartition, Partition] = {}

    # -- leadership, from the controller -------------------------------------------------

    def become_leader_or_follower(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        config: TopicConfig,
        *,
        is_new: bool = True,
    ) -> Partition:
        """Host the partition with ``state``; a stale leader epoch leaves ours in place."""
        existing = self.partitions.get((topic, partition))
        if existing is not None:
            existing.log.update_config(config)
            existing.apply_state(state)
            return existing
        partition_log = self.log_manager.get_or_create_log(topic, partition, config, is_new=is_new)
        hosted = Partition(topic, partition, self.broker_id, partition_log, state)
        hosted.apply_state(state)
        self.partitions[(topic, partition)] = hosted
        return hosted

    def stop_replica(self, topic: str, partition: int, *, delete: bool) -> None:
        """Stop hosting; with ``delete`` remove the log too (topic deletion, reassignment)."""
        self.partitions.pop((topic, partition), None)
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

    def update_gauges(self, metrics: BrokerMetrics | None) -> None:
        """Partition counts for the metrics: hosted, led, under-replicated, offline."""
        if metrics is None:
            return
        led = [p for p in self.partitions.values() if p.is_leader]
        metrics.partitions.set(len(self.partitions))
        metrics.leader_partitions.set(len(led))
        metrics.under_replicated_partitions.set(
            sum(1 for p in led if len(p.state.isr) < len(p.state.replicas))
        )
        metrics.offline_partitions.set(len(self.log_manager.offline_partitions()))
        metrics.offline_log_dirs.set(len(self.log_manager.offline_dirs))

    # -- produce -------------------------------------------------------------------------

    async def append_records(
        self, acks: int, entries: Mapping[TopicPartition, bytes | memoryview]
    ) -> dict[TopicPartition, ProduceResult]:
        """Append each partition's record set as leader; one result per partition.

        Partitions are appended one after the other, each awaited directly: most appends never
        yield (validation inline, a write to the page cache), and a task per partition would cost
        two more turns of the event loop per request, measured at a third of a small produce
        request's cost. A partition whose validation goes to a worker thread yields there.
        """
        if acks not in (0, 1, -1):
            error = InvalidRequiredAcksError(f"acks must be 0, 1 or -1, not {acks}")
            return {tp: ProduceResult(error.error_code, error_message=str(error)) for tp in entries}
        return {
            (topic, index): await self._append(topic, index, records, acks)
            for (topic, index), records in entries.items()
        }

    async def _append(
        self, topic: str, index: int, records: bytes | memoryview, acks: int
    ) -> ProduceResult:
        try:
            partition = self.get_partition(topic, index)
            info = await partition.append_as_leader(records, acks, self.workers)
        except Exception as e:  # each partition answers for itself
            code, message = _error_of(e, f"produce to {topic}-{index}")
            return ProduceResult(code, error_message=message)
        return ProduceResult(
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=info.log_start_offset,
            records_count=info.records_count,
            valid_bytes=info.valid_bytes,
        )

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

        ``replica_id`` is the fetching broker's id, -1 for a consumer.
        """
        deadline = self.monotonic() + max(max_wait_ms, 0) / 1000
        results = self._read_all(requests, max_bytes, isolation_level)
        for _ in range(FETCH_ROUNDS_MAX):
            remaining_s = deadline - self.monotonic()
            if (
                remaining_s <= 0
                or any(r.error != ErrorCode.none for r in results)
                or sum(r.size for r in results) >= max(min_bytes, 1)
            ):
                break
            waiting = [self.partitions[(r.topic, r.partition)] for r in requests]
            if not await wait_for_any(waiting, remaining_s):
                break
            results = self._read_all(requests, max_bytes, isolation_level)
        return results

    def _read_all(
        self, requests: list[FetchPartitionRequest], max_bytes: int, isolation_level: int
    ) -> list[FetchResult]:
        budget = max_bytes
        results = []
        for request in requests:
            result = self._read(request, budget, isolation_level, min_one=budget == max_bytes)
            budget = max(budget - result.size, 0)
            results.append(result)
        return results

    def _read(
        self, request: FetchPartitionRequest, budget: int, isolation_level: int, min_one: bool
    ) -> FetchResult:
        topic, index = request.topic, request.partition
        try:
            hosted = self.get_partition(topic, index)
            if not hosted.is_leader:
                raise NotLeaderOrFollowerError(
                    f"broker {self.broker_id} does not lead {topic}-{index}"
                )
            partition_log = hosted.log
            upper = partition_log.high_watermark  # = last stable offset until transactions
            info = partition_log.read(
                request.fetch_offset,
                min(request.max_bytes, budget),
                max_offset=upper,
                min_one_message=min_one,
            )
            return FetchResult(
                topic,
                index,
                high_watermark=info.high_watermark,
                last_stable_offset=info.high_watermark,
                log_start_offset=info.log_start_offset,
                records=info.records,
            )
        except Exception as e:
            code, _ = _error_of(e, f"fetch from {topic}-{index}")
            return FetchResult(topic, index, error=code)

    # -- offsets -------------------------------------------------------------------------

    def list_offsets(
        self, topic: str, partition: int, timestamp: int, isolation_level: int = READ_UNCOMMITTED
    ) -> OffsetResult:
        """ListOffsets for one partition: -2 earliest, -1 latest, -3 max timestamp, or a time."""
        try:
            hosted = self.get_partition(topic, partition)
            partition_log = hosted.log
            upper = partition_log.high_watermark
            found = partition_log.offset_for_timestamp(timestamp, max_offset=upper)
            if found is None:
                return OffsetResult(timestamp=-1, offset=-1)
            if timestamp == LATEST_TIMESTAMP:
                return OffsetResult(timestamp=-1, offset=upper)
            return OffsetResult(timestamp=found.timestamp, offset=found.offset)
        except Exception as e:
            code, _ = _error_of(e, f"list offsets of {topic}-{partition}")
            return OffsetResult(error=code)

    def delete_records(self, topic: str, partition: int, offset: int) -> OffsetResult:
        """DeleteRecords: move the log start offset (-1 means the high watermark)."""
        try:
            partition_log = self.get_partition(topic, partition).log
            target = partition_log.high_watermark if offset == -1 else offset
            if target < 0:
                raise OffsetOutOfRangeError(f"cannot delete records before offset {offset}")
            low_watermark = partition_log.advance_log_start_offset(target)
            partition_log.delete_old_segments()
            return OffsetResult(offset=low_watermark)
        except Exception as e:
            code, _ = _error_of(e, f"delete records of {topic}-{partition}")
            return OffsetResult(error=code)
