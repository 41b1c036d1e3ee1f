"""Moving replicas between this broker's log dirs while they serve (KIP-113).

AlterReplicaLogDirs names, per partition, the log dir its replica on this broker should live in.
``LogDirMover.alter_all`` applies Kafka's rules (``ReplicaManager.alterReplicaLogDirs``), in
order:

- a dir that is not in ``log.dirs``: LOG_DIR_NOT_FOUND; an offline one: KAFKA_STORAGE_ERROR;
- a partition hosted here on an offline dir: KAFKA_STORAGE_ERROR;
- a partition not hosted here: the dir is remembered for when it is created here (Kafka's
  preferred log dir), and the answer is REPLICA_NOT_AVAILABLE, or UNKNOWN_TOPIC_OR_PARTITION if
  the metadata does not know it;
- a move already under way to another dir is cancelled and its future log dropped; a replica
  already in the dir answers NONE and nothing moves; while any dir is offline no move starts
  (KAFKA_STORAGE_ERROR: a future log may be on it);
- otherwise a future log is created in the dir and a copier task starts: NONE.

A copier (Kafka's ReplicaAlterLogDirsThread) repeats rounds of: align the future log with the
current one (``log_dir_move.align``), read up to ``CHUNK_BYTES`` from the current log through its
read path (on the event loop: an index lookup, as a fetch), and append them to the future log on
a mover thread (``log_dir_move.copy_slice``: reading the bytes, validating and writing, off the
loop). Once a round finds less than a chunk to copy, the future log is fsynced (on a mover
thread), then the partition holds its appends (``Partition.replace_log``) while the last rounds
make the two logs equal and the future log replaces the current one
(``LogManager.replace_current_with_future``). Produces to the partition wait only for that last
bit; fetches go on throughout. A copier whose round fails (an offline dir, the partition gone)
stops, leaving its future log; StopReplica cancels it; a broker that starts with future logs
resumes each once it hosts the partition (``resume``).

Runs on the broker's event loop; the mover threads only run ``copy_slice`` and ``Log.flush`` on
future logs, one job per future log at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.partition import Partition
from odradek.common.partitions import TopicPartition
from odradek.errors import (
    ErrorCode,
    InvalidRecordError,
    KafkaStorageError,
    OdradekError,
    OffsetOutOfRangeError,
    ReplicaNotAvailableError,
    UnknownTopicOrPartitionError,
)
from odradek.observability.metrics import BrokerMetrics
from odradek.storage import log_dir_move
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from odradek.time_slices import TimeSlices, sliced

if TYPE_CHECKING:
    from odradek.broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

CHUNK_BYTES = 1024 * 1024  # per round, as replica.fetch.max.bytes's default
# Rounds of a copy before it swaps regardless (bounds a copy that a faster producer never lets
# finish: the last rounds then run with appends held), and rounds within the swap.
COPY_ROUNDS_MAX = 1_000_000
SWAP_ROUNDS_MAX = 100_000
# num.replica.alter.log.dirs.threads: Kafka's default is one per log dir.


class LogDirMover:
    """The moves of this broker's replicas between its log dirs; see the module docstring."""

    def __init__(
        self,
        log_manager: LogManager,
        *,
        threads: int | None = None,
        metrics: BrokerMetrics | None = None,
        chunk_bytes: int = CHUNK_BYTES,
    ):
        self.log_manager = log_manager
        self.metrics = metrics
        self.chunk_bytes = chunk_bytes
        self._executor = ThreadPoolExecutor(
            threads or len(log_manager.log_dirs), thread_name_prefix="odradek-alter-log-dirs"
        )
        self._moves: dict[TopicPartition, asyncio.Task[None]] = {}

    @property
    def moving(self) -> int:
        return len(self._moves)

    # -- requests ------------------------------------------------------------------------

    async def alter_all(
        self,
        replicas: ReplicaManager,
        metadata: MetadataCache,
        partition_dirs: Mapping[TopicPartition, str],
        slices: TimeSlices | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """AlterReplicaLogDirs: each partition's error code (module docstring), in time slices
        (``time_slices``). Each dir named is checked once: a request may name 250,000
        partitions of one dir that is no log dir, each refused alike (and logged once)."""
        checked: dict[str, Path | OdradekError] = {}
        refused: dict[str, int] = {}
        results: dict[TopicPartition, ErrorCode] = {}
        async for (topic, partition), path in sliced(partition_dirs.items(), slices):
            if path not in checked:
                try:
                    checked[path] = self.log_manager.check_log_dir(path)
                except OdradekError as e:
                    checked[path] = e
            log_dir = checked[path]
            if isinstance(log_dir, OdradekError):
                refused[path] = refused.get(path, 0) + 1
                results[(topic, partition)] = log_dir.error_code
            else:
                results[(topic, partition)] = await self.alter(
                    replicas, metadata, topic, partition, log_dir
                )
        for path, count in refused.items():
            log.info("AlterReplicaLogDirs of %d partitions to %s: %s", count, path, checked[path])
        return results

    async def alter(
        self,
        replicas: ReplicaManager,
        metadata: MetadataCache,
        topic: str,
        partition: int,
        log_dir: Path,
    ) -> ErrorCode:
        """One partition of AlterReplicaLogDirs, to ``log_dir`` (one of ``log.dirs``, online:
        ``LogManager.check_log_dir``); its error code (module docstring)."""
        try:
            hosted = replicas.partitions.get((topic, partition))
            if hosted is None:
                known = metadata.topic(topic)
                if known is None or partition not in known.partitions:
                    raise UnknownTopicOrPartitionError(f"{topic}-{partition} is unknown")
                self.log_manager.prefer_log_dir(topic, partition, log_dir)
                raise ReplicaNotAvailableError(f"no replica of {topic}-{partition} here yet")
            if hosted.log.offline:
                raise KafkaStorageError(f"{topic}-{partition} is on an offline log dir")
            heading = self.log_manager.future_log_dir_of(topic, partition)
            if heading is not None and heading != log_dir:
                await self.cancel(topic, partition)
            future = self.log_manager.create_future_log(topic, partition, log_dir)
            if future is None:
                await self.cancel(topic, partition)  # already there: a move elsewhere ends
                return ErrorCode.none
            self._start(hosted, future)
            return ErrorCode.none
        except OdradekError as e:
            log.info("AlterReplicaLogDirs of %s-%d to %s: %s", topic, partition, log_dir, e)
            return e.error_code

    def resume(self, partition: Partition) -> None:
        """The partition is hosted here now: continue a move a restart interrupted."""
        future = self.log_manager.future_log(partition.topic, partition.index)
        if future is not None and not future.offline:
            log.info("resuming the move of %s to %s", partition.name, future.directory.parent)
            self._start(partition, future)

    async def cancel(self, topic: str, partition: int, *, keep_future: bool = False) -> None:
        """Stop the partition's copier; its future log goes too unless ``keep_future``."""
        task = self._moves.pop((topic, partition), None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if not keep_future:
            await asyncio.wrap_future(self.log_manager.abandon_future_log(topic, partition))
        self._update_gauge()

    def stop(self, topic: str, partition: int) -> None:
        """StopReplica: the copier stops (its future log stays for a later resume, or goes
        with the partition's deletion); for the synchronous callers on the loop."""
        task = self._moves.pop((topic, partition), None)
        if task is not None:
            task.cancel()
        self._update_gauge()

    async def close(self) -> None:
        tasks = list(self._moves.values())
        self._moves.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._executor.shutdown(wait=True)

    # -- the copier ----------------------------------------------------------------------

    def _start(self, partition: Partition, future: Log) -> None:
        tp = (partition.topic, partition.index)
        running = self._moves.get(tp)
        if running is not None and not running.done():
            return
        task = asyncio.get_running_loop().create_task(
            self._move(partition, future), name=f"move-{partition.name}"
        )
        self._moves[tp] = task
        self._update_gauge()

    async def _move(self, partition: Partition, future: Log) -> None:
        tp = (partition.topic, partition.index)
        loop = asyncio.get_running_loop()
        try:
            for _ in range(COPY_ROUNDS_MAX):
                if await self._copy_round(partition, future) < self.chunk_bytes:
                    break
            # Most of the future log becomes durable before the swap, off the loop; what the
            # swap's last rounds add is flushed by the upkeep as for any log.
            await loop.run_in_executor(self._executor, future.flush)
            await partition.replace_log(
                lambda: self._catch_up(partition, future),
                lambda: self.log_manager.replace_current_with_future(*tp),
            )
            log.info("%s moved to %s", partition.name, future.directory.parent)
        except (OdradekError, OSError, RuntimeError) as e:
            log.error("the move of %s to %s stopped: %s", partition.name, future.directory, e)
        finally:
            if self._moves.get(tp) is asyncio.current_task():
                del self._moves[tp]
            self._update_gauge()

    async def _copy_round(self, partition: Partition, future: Log) -> int:
        """Align, then copy one chunk; the bytes copied (0: nothing was left to copy)."""
        current = partition.log
        log_dir_move.align(current, future)
        try:
            info = current.read(future.log_end_offset, self.chunk_bytes)
        except OffsetOutOfRangeError:
            return self.chunk_bytes  # retention moved the start meanwhile: align again
        if info.records is None:
            return 0
        try:
            copied = await asyncio.get_running_loop().run_in_executor(
                self._executor, log_dir_move.copy_slice, future, info.records
            )
        except InvalidRecordError as e:
            # The read began inside a batch the future log ends in the middle of (compaction
            # rewrote it): start the copy again rather than hold a partial batch.
            log.warning("restarting the copy of %s: %s", partition.name, e)
            future.truncate_fully_and_start_at(log_dir_move.start_offset(current))
            return self.chunk_bytes
        if self.metrics is not None:
            self.metrics.log_dir_move_bytes.inc(copied)
        return copied

    async def _catch_up(self, partition: Partition, future: Log) -> None:
        """With appends held: copy until the future log equals the current one."""
        for _ in range(SWAP_ROUNDS_MAX):
            current = partition.log
            log_dir_move.align(current, future)
            if future.log_end_offset == current.log_end_offset:
                log_dir_move.adopt_offsets(current, future)
                return
            await self._copy_round(partition, future)
        raise RuntimeError(f"{partition.name}: the future log did not catch up")

    def _update_gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.log_dir_moves.set(len(self._moves))
