"""One partition's log: an ordered sequence of segments in a directory ``<topic>-<partition>``.

``Log`` is appends, reads, truncation, leader epochs and the last stable offset; its other
parts live beside it, as Kafka keeps ``LogLoader``, ``LocalLog`` and ``UnifiedLog`` apart:
``loader`` builds a log's starting state from its directory (a value, ``LoadedLogOffsets``),
``log_segments`` is the snapshot of segments a reader sees, ``append`` the offsets and bytes of
an append being made, ``flusher`` (fsyncs, the recovery point), ``retention`` (old segments and
the delayed deletion of files) and ``log_compaction`` (the cleaner's side) are base classes of
``Log`` working on its lock and state, ``files`` names every file, ``file_ops`` makes every change
to them (injected, so tests fail the disk on purpose), and ``io_errors`` is what an I/O error
does (the log goes offline and raises ``KafkaStorageError``). What is left here (about
850 lines, past the ~700 aimed at) is the five paths above, which share the one lock discipline
below: split further, each part would restate it.

Offsets and their invariants, all enforced by ``Log`` and its parts:

- ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset``. The log start offset only
  grows (retention, ``DeleteRecords``); the log end offset (LEO) is the offset the next record
  gets and only shrinks by an explicit ``truncate_to`` (replication, later).
- Offsets strictly increase through the log and are assigned here, once: a produced batch gets
  the LEO as its base offset, written into its header in place (base offset sits outside the
  CRC); its other bytes, still compressed, go to disk untouched.
- Segment base offsets strictly increase; only the last segment (the active one) is written.
  Everything a reader can see lies in whole batches below ``log_end_offset``.
- ``recovery_point``: every byte below it is on disk (fsynced). After an unclean shutdown only
  segments from the one holding the recovery point are re-validated.
- ``high_watermark``: the broker's partition moves it (the smallest LEO in the ISR); consumers
  read below it and retention never deletes data above it. Restored at load from the log
  manager's ``replication-offset-checkpoint``; without an entry it starts at the log start
  offset, never at the LEO (a restarting follower must not claim its whole log committed).
- ``leader_epoch_cache`` (``leader_epoch``): where each leader epoch starts. Every published
  batch whose ``partition_leader_epoch`` (as written) is above the latest epoch adds an entry
  at its base offset; ``assign_epoch_start_offset`` adds a new leader's; ``truncate_to`` cuts it
  from the end, a moving log start (retention, ``DeleteRecords``) from the start; compaction
  leaves it alone. Changed under ``self._lock`` (memory only); its file
  ``leader-epoch-checkpoint`` is written on the housekeeping thread after each change and at
  ``close``, never under the lock or on the appending thread. So the file may lag the log after
  a crash, which ``loader`` checks against the batches.

Threads, and what each may run:

- the appending thread (the broker's event loop): ``append_validated`` (or its parts:
  ``prepare_append`` and ``publish_prepared``, with ``write_prepared`` on a writer thread in
  between for a large record set, the appending thread starting no other append meanwhile),
  ``read``, ``roll``,
  ``truncate_to``, ``advance_log_start_offset``, ``delete_old_segments`` (DeleteRecords),
  ``flush_in_background``, ``detach`` (a partition's deletion) and ``rename_dir`` (a future log
  taking over, KIP-113). ``validate`` runs on any thread (it is pure). A future log (a copy
  being made in another log dir, ``log_dir_move``) has its appends run on a mover thread and its
  truncations on the event loop, one at a time: the mover hands its appending over, never
  shares it.
- the log manager's upkeep thread: ``flush`` / ``flush_if_due``, ``delete_old_segments``,
  ``delete_expired_files``.
- the storage flush threads (``executors``): ``flush``, submitted by ``flush_in_background``.
- the storage housekeeping thread: producer-state snapshots taken at a roll,
  ``write_leader_epoch_checkpoint``, and ``delete_files`` of a detached log.
- the cleaner thread: ``segments``, ``segment_reader``, ``replace_segments``,
  ``report_io_error``.
- at shutdown, after all of the above stopped: ``close``.

The lock discipline that makes this safe:

1. ``self._lock`` guards the segment list, the offsets, the producer state, and every change to
   a segment's files or to the in-memory entries of its indexes (append, a roll's trim,
   truncation, renames). What runs under it touches the page cache only: never an fsync, never
   a wait on another thread. Appends take it, so anything slow under it would stall produces.
2. An fsync runs outside ``self._lock``, on descriptors of its own taken under it
   (``LogSegment.fsync_handles``, which first writes the indexes' new entries to the page
   cache). The flushing thread never reads an index's buffer while the appending thread trims
   or extends it, and a segment closed meanwhile (retention, truncation, deletion) leaves the
   fsync's descriptors valid: no bogus I/O error takes the directory offline.
3. A segment's own descriptors are used by the appending thread only, and closed only after
   the segment left the segment list (a ``.deleted`` rename, closed after
   ``file.delete.delay.ms``, so a ``FileSlice`` handed to the network stays readable), or once
   the whole log is detached or closed. Other threads read through duplicates
   (``segment_reader``), taken under the lock while the segment is still in the list.
4. The recovery point only moves forward after the fsync covering it returned, and not at all
   if the log was truncated while the fsync ran.
5. Lock order: ``Log._lock``, then ``LogManager._lock`` (``on_io_error``) or the producer
   state's file lock. The manager never takes a log's lock while holding its own.

Mutations of the segment list publish a new immutable ``LogSegments`` value, so a reader takes
one consistent snapshot without locking.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.common.clock import wall_clock_ms
from odradek.config.topic import TopicConfig
from odradek.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.append import LogAppendInfo, PreparedAppend, assign_offsets, marker_of
from odradek.storage.compression import MAX_DECOMPRESSED_BYTES
from odradek.storage.executors import StorageExecutors
from odradek.storage.file_ops import OS_FILE_OPS, FileOps
from odradek.storage.flusher import LogFlusher
from odradek.storage.io_errors import disk_errors
from odradek.storage.loader import load_log, rebuild_producer_state
from odradek.storage.log_compaction import LogCompaction
from odradek.storage.log_segments import LogSegments
from odradek.storage.producer_state import CompletedTxn, ProducerSnapshot
from odradek.storage.records import decode_records
from odradek.storage.retention import LogRetention
from odradek.storage.segment import FileSlice, LogSegment, write_past_end
from odradek.storage.txn_index import AbortedTxn
from odradek.storage.validator import AppendOrigin, ValidatedRecords, validate_records

log = logging.getLogger(__name__)

# Special timestamps of ListOffsets, as Kafka defines them.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class LogReadInfo:
    """A read: whole batches as a file range (or None), and the log's offsets at that time."""

    records: FileSlice | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int


class Log(LogCompaction, LogFlusher, LogRetention):
    """A partition's log; see the module docstring for offsets, invariants and threading."""

    def __init__(
        self,
        directory: Path,
        config: TopicConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        cleaner_checkpoint: int = 0,
        high_watermark: int | None = None,
        clean_shutdown: bool = False,
        clock: Callable[[], int] = wall_clock_ms,
        on_io_error: Callable[[Log, OSError], None] | None = None,
        executors: StorageExecutors | None = None,
        file_ops: FileOps = OS_FILE_OPS,
    ):
        self.directory = Path(directory)
        self.config = config
        self.clock = clock
        # Every change to the log's files, for it and for its segments, producer state and
        # leader-epoch checkpoint (``file_ops``); tests pass one that injects disk faults.
        self.file_ops = file_ops
        self.on_io_error = on_io_error
        self.executors = executors or StorageExecutors.inline()
        self.offline = False
        self.deleted = False  # detached for deletion: nothing may use its files any more
        self._lock = threading.RLock()
        self._truncations = 0  # a flush that started before a truncation moves nothing
        # The lowest offset truncated away since ``take_truncation_floor`` last asked (-1: the
        # whole log), for a future log copied from this one (KIP-113) to drop the same offsets.
        self._truncation_floor: int | None = None
        self._pending_deletes: list[tuple[int, LogSegment]] = []  # retention's
        self._position_cache: tuple[int, int, int] | None = None  # (offset, base, position)
        self._start_flusher()
        # The compaction cleaner's first dirty offset (cleaner-offset-checkpoint in Kafka).
        self.cleaner_checkpoint = cleaner_checkpoint
        self.directory.mkdir(parents=True, exist_ok=True)
        loaded = load_log(
            self.directory,
            config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            high_watermark=high_watermark,
            clean_shutdown=clean_shutdown,
            clock=clock,
            report_io_error=self.report_io_error,
            file_ops=file_ops,
        )
        self._view = loaded.segments
        self.log_end_offset = loaded.log_end_offset
        self.log_start_offset = loaded.log_start_offset
        self.recovery_point = loaded.recovery_point
        # Restored from replication-offset-checkpoint (``loader``); a leader alone in its ISR
        # moves it to its LEO itself.
        self.high_watermark = loaded.high_watermark
        self.producer_state = loaded.producer_state
        # Transactions whose marker is at or above the high watermark, in marker order: they
        # still hold the last stable offset (a new leader may not have the marker). A tuple
        # replaced whole under the lock; pruned as markers fall below the HW.
        self._unreplicated_txns: tuple[CompletedTxn, ...] = loaded.unreplicated_txns
        self.leader_epoch_cache = loaded.leader_epoch_cache

    def _new_segment(self, base_offset: int, *, active: bool, suffix: str = "") -> LogSegment:
        return LogSegment(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            active=active,
            created_ms=self.clock(),
            suffix=suffix,
            file_ops=self.file_ops,
        )

    def collect_aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start, end)`` (a read_committed fetch),
        from the txn indexes of the segment holding ``start`` onwards."""
        found: list[AbortedTxn] = []
        view = self._view
        for segment in view.segments[view.floor_index(start) :]:
            entries, complete = segment.txn_index.collect(start, end)
            found += entries
            if complete:
                break
        return found

    # -- appending -----------------------------------------------------------------------

    def validate(
        self,
        records: bytes | bytearray | memoryview,
        *,
        origin: str = AppendOrigin.CLIENT,
        max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
    ) -> ValidatedRecords:
        """Validate a record set against this log's configuration (``validator``).

        Safe on any thread: it reads only the configuration and the clock, so a caller may run
        it off the thread that appends. Raises as ``validate_records`` does.
        """
        return validate_records(
            records,
            self.config,
            origin=origin,
            now_ms=self.clock(),
            max_decompressed_bytes=max_decompressed_bytes,
        )

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        origin: str = AppendOrigin.CLIENT,
        leader_epoch: int | None = None,
    ) -> LogAppendInfo:
        """Validate a record set (one or more batches) and append it whole, or not at all.

        The synchronous form, for tools and tests: it also runs, on this thread, the fsync that
        ``flush.messages`` asks for. The broker uses ``validate``, ``append_validated`` and
        ``flush_in_background`` instead, so that no fsync runs on its event loop.
        """
        info = self.append_validated(
            self.validate(records, origin=origin), leader_epoch=leader_epoch
        )
        if info.flush_before_ack:
            self.flush()
        return info

    def append_validated(
        self, validated: ValidatedRecords, *, leader_epoch: int | None = None
    ) -> LogAppendInfo:
        """Append a record set that ``validate`` accepted: producer checks, offsets, write.

        ``prepare_append``, ``write_prepared`` and ``publish_prepared`` in a row, on this thread.
        Never fsyncs: when ``flush.messages`` is reached the result says ``flush_before_ack``,
        and the caller must flush (``flush_in_background``) before acknowledging the append.
        Raises ``KafkaStorageError`` if the disk fails, after cutting the segment back to where
        it was, and the producer-state errors of ``ProducerStateManager.check``; nothing is
        written then.
        """
        prepared = self.prepare_append(validated, leader_epoch=leader_epoch)
        if isinstance(prepared, LogAppendInfo):
            return prepared
        self.write_prepared(prepared)
        return self.publish_prepared(prepared)

    def prepare_append(
        self,
        validated: ValidatedRecords,
        *,
        leader_epoch: int | None = None,
        writer_thread: bool = False,
    ) -> PreparedAppend | LogAppendInfo:
        """Check and place an append: producer state, offsets, the segment (rolled if need be).

        Returns the ``LogAppendInfo`` at once when there is nothing to write (an empty record
        set, a producer's retry), else a ``PreparedAppend`` for ``write_prepared`` and then
        ``publish_prepared``. With ``writer_thread`` the bytes are to be written by another
        thread, through a duplicated descriptor. Between prepare and publish the caller must not
        start another append to this log.
        """
        if not validated.batches:
            return LogAppendInfo(-1, -1, -1, -1, -1, self.log_start_offset, 0, 0)
        origin = validated.origin
        with self._lock:
            self._check_online()
            markers = [
                marker_of(origin, header, validated.records, position)
                for position, header in validated.batches
            ]
            if origin != AppendOrigin.REPLICATION:
                for (_, header), marker in zip(validated.batches, markers, strict=True):
                    if marker is not None:
                        self.producer_state.check(header, marker)
                duplicate = self.producer_state.check(validated.batches[0][1])
                if duplicate is not None:
                    return LogAppendInfo(
                        first_offset=duplicate.first_offset,
                        last_offset=duplicate.last_offset,
                        max_timestamp=-1,
                        offset_of_max_timestamp=-1,
                        log_append_time_ms=-1,
                        log_start_offset=self.log_start_offset,
                        records_count=0,
                        valid_bytes=0,
                        duplicate=True,
                    )
            prepared = assign_offsets(validated, self.log_end_offset, leader_epoch)
            prepared.markers = markers
            segment = self._maybe_roll(
                prepared.valid_bytes, prepared.max_timestamp, prepared.next_offset - 1
            )
            prepared.segment, prepared.position = segment, segment.size
            if writer_thread:
                with self._disk_errors():
                    prepared.fd, prepared.owns_fd = os.dup(segment.fd), True
            else:
                prepared.fd = segment.fd
            return prepared

    def write_prepared(self, prepared: PreparedAppend) -> None:
        """Write a prepared append's bytes past the end of its segment's file (any thread).

        Nothing becomes visible: readers never look past a segment's published size. Raises
        ``KafkaStorageError`` after an I/O error (the file cut back, the log taken offline).
        """
        try:
            with self._disk_errors():
                write_past_end(self.file_ops, prepared.fd, prepared.buffers, prepared.position)
        finally:
            self.abandon(prepared)

    def abandon(self, prepared: PreparedAppend) -> None:
        """Give back what a prepared append holds (its descriptor), written or not."""
        if prepared.owns_fd:
            prepared.owns_fd = False
            os.close(prepared.fd)

    def publish_prepared(self, prepared: PreparedAppend) -> LogAppendInfo:
        """Make a written append visible: index it, record its producers, move the LEO."""
        with self._lock:
            self._check_online()
            if self._view.active is not prepared.segment:
                raise RuntimeError(
                    f"{self.directory.name}: the active segment changed under an append"
                )
            prepared.segment.publish(prepared.assigned, prepared.position, prepared.valid_bytes)
            for (base_offset, header), marker in zip(
                prepared.assigned, prepared.markers, strict=True
            ):
                completed = self.producer_state.update(base_offset, header, marker)
                if completed is not None:
                    self._unreplicated_txns = (
                        *(
                            t
                            for t in self._unreplicated_txns
                            if t.last_offset >= self.high_watermark
                        ),
                        completed,
                    )
                if completed is not None and completed.is_aborted:
                    prepared.segment.txn_index.append(
                        AbortedTxn(
                            completed.producer_id,
                            completed.first_offset,
                            completed.last_offset,
                            completed.last_stable_offset,
                        )
                    )
            epochs_changed = False
            for epoch, base_offset in prepared.epoch_starts:
                epochs_changed |= self.leader_epoch_cache.assign(epoch, base_offset)
            self.log_end_offset = prepared.next_offset
            info = LogAppendInfo(
                first_offset=prepared.assigned[0][0],
                last_offset=prepared.next_offset - 1,
                max_timestamp=prepared.max_timestamp,
                offset_of_max_timestamp=prepared.offset_of_max_timestamp,
                log_append_time_ms=prepared.log_append_time_ms,
                log_start_offset=self.log_start_offset,
                records_count=prepared.records_count,
                valid_bytes=prepared.valid_bytes,
                batches=tuple(prepared.assigned),
                flush_before_ack=(
                    prepared.next_offset - self.recovery_point >= self.config.flush_messages
                ),
            )
        if epochs_changed:
            self._write_leader_epoch_checkpoint_in_background()
        return info

    def _maybe_roll(self, size: int, max_timestamp: int, last_offset: int) -> LogSegment:
        active = self._view.active
        if active.size == 0:
            return active
        if (
            active.size > self.config.segment_bytes - size
            or active.indexes_full
            or not active.can_hold(last_offset)
            or self._time_to_roll(active, max_timestamp)
        ):
            return self.roll()
        return active

    def _time_to_roll(self, segment: LogSegment, max_timestamp: int) -> bool:
        """Roll by ``segment.ms`` the way Kafka does: on record time when records carry it."""
        first = segment.first_batch_timestamp
        if first is not None and first >= 0 and max_timestamp >= 0:
            waited_ms = max_timestamp - first
        else:
            waited_ms = self.clock() - segment.created_ms
        return waited_ms > self.config.segment_ms - self.config.segment_jitter_ms

    def roll(self) -> LogSegment:
        """Start a new active segment at the LEO (no-op if the active one is empty)."""
        with self._lock:
            self._check_online()
            active = self._view.active
            if active.size == 0:
                return active
            active.on_roll()
            new = self._new_segment(self.log_end_offset, active=True)
            self._view = LogSegments.of(self._view.segments + (new,))
            # Copied here, written on the housekeeping thread (see producer_state).
            snapshot = self.producer_state.capture_snapshot()
            self.executors.housekeeping.submit(self._write_producer_snapshot, snapshot)
            return new

    def _write_producer_snapshot(self, snapshot: ProducerSnapshot) -> None:
        """The housekeeping job of a roll; an I/O error takes the log offline."""
        # Not the disk's fault if the log went meanwhile (its directory with it).
        with disk_errors(
            self.report_io_error, counts=lambda _: self.producer_state.is_current(snapshot)
        ):
            self.producer_state.write_snapshot(snapshot, durable=False)

    # -- reading -------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> LogReadInfo:
        """Whole batches from the one holding ``offset``, below ``max_offset`` (default: LEO).

        Consumers pass the high watermark as ``max_offset``; followers read to the LEO. Raises
        ``OffsetOutOfRangeError`` for an offset below the log start or beyond the LEO.
        """
        self._check_online()
        view = self._view
        log_end_offset = self.log_end_offset
        upper = log_end_offset if max_offset is None else min(max_offset, log_end_offset)
        if offset < self.log_start_offset or offset > log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {log_end_offset}] "
                f"of {self.directory.name}"
            )
        records = None
        if offset < upper:
            for segment in view.segments[view.floor_index(offset) :]:
                if segment.base_offset >= upper:
                    break
                max_position = self._position_of(segment, upper)
                records = segment.read(offset, max_bytes, max_position, min_one_message)
                # A segment holding batches at/after ``offset`` answers even with nothing (its
                # first one is larger than max_bytes): the next segment's would skip that one.
                if records is not None or (segment.size > 0 and segment.next_offset > offset):
                    break
        return LogReadInfo(records, self.high_watermark, self.log_start_offset, log_end_offset)

    def _position_of(self, segment: LogSegment, offset: int) -> int:
        """File position in ``segment`` where reading must stop to stay below ``offset``."""
        if offset >= segment.next_offset:
            return segment.size
        cached = self._position_cache
        if cached is not None and cached[0] == offset and cached[1] == segment.base_offset:
            return cached[2]
        position = segment.position_of(offset)
        self._position_cache = (offset, segment.base_offset, position)
        return position

    def batches(self, start_offset: int = 0) -> Iterator[tuple[int, bytes]]:
        """Every batch from ``start_offset`` as ``(base_offset, bytes)``: tools and tests."""
        view = self._view
        for segment in view.segments[view.floor_index(start_offset) :]:
            for position, header in segment.batches_from(0):
                if header.last_offset >= start_offset:
                    yield header.base_offset, segment.read_batch_bytes(position, header)

    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose record timestamp is >= ``timestamp``.

        Also answers Kafka's special values: -2 (earliest), -1 (latest), -3 (the record with the
        largest timestamp). Offsets at or above ``max_offset`` (the high watermark, for
        consumers) are not returned.
        """
        upper = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(-1, self.log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, upper)
        view = self._view
        if timestamp == MAX_TIMESTAMP:
            best = max(view.segments, key=lambda s: s.max_timestamp)
            if best.max_timestamp < 0 or best.offset_of_max_timestamp >= upper:
                return None
            return self._first_record_at(best, best.max_timestamp, upper)
        for segment in view.segments:
            if segment.max_timestamp >= timestamp and segment.next_offset > self.log_start_offset:
                found = self._first_record_at(segment, timestamp, upper)
                if found is not None:
                    return found
        return None

    def _first_record_at(
        self, segment: LogSegment, timestamp: int, upper: int
    ) -> TimestampAndOffset | None:
        for position, header in segment.batches_from_timestamp(timestamp, self.log_start_offset):
            if header.base_offset >= upper:
                return None
            if header.max_timestamp < timestamp or header.is_control:
                continue
            for record in decode_records(segment.read_batch_bytes(position, header)):
                if record.offset >= upper:
                    return None
                if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                    return TimestampAndOffset(record.timestamp, record.offset)
        return None

    # -- leader epochs -------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int | None:
        """The newest leader epoch the log holds an entry for; None if none."""
        return self.leader_epoch_cache.latest_epoch()

    def assign_epoch_start_offset(self, epoch: int, offset: int) -> None:
        """A new leader's epoch starts at ``offset`` (its LEO), before it appends anything.

        Kafka's ``maybeAssignEpochStartOffset``: the leader answers OffsetForLeaderEpoch for its
        own epoch even before its first append. Ignored for an epoch not newer than the latest.
        """
        with self._lock:
            self._check_online()
            changed = self.leader_epoch_cache.assign(epoch, offset)
        if changed:
            self._write_leader_epoch_checkpoint_in_background()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: ``(epoch, end offset)`` as ``LeaderEpochFileCache.end_offset_for``
        answers it, against the current LEO."""
        with self._lock:
            self._check_online()
            return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def write_leader_epoch_checkpoint(self) -> None:
        """Write ``leader-epoch-checkpoint`` if the cache changed since it was last written.

        Blocks on the disk: storage threads only (housekeeping, upkeep, shutdown), never under
        the lock. An I/O error takes the log offline.
        """
        if self.deleted or self.offline:
            return
        # Not the disk's fault if the directory went with the partition meanwhile.
        with disk_errors(self.report_io_error, counts=lambda _: not self.deleted):
            self.leader_epoch_cache.flush()

    def _write_leader_epoch_checkpoint_in_background(self) -> None:
        """Kafka writes the file at each change; here the housekeeping thread does, after the
        lock is released (with inline executors, on this thread). The cache changes rarely:
        at a new leader epoch, a truncation, a move of the log start."""
        # RuntimeError: the executor is shut down (the broker is stopping); ``close`` writes it.
        with contextlib.suppress(RuntimeError):
            self.executors.housekeeping.submit(self.write_leader_epoch_checkpoint)

    # -- offsets moved by others ---------------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed consumers stop: the first unstable offset, or the high
        watermark when nothing is unstable below it (never above the HW), and never below the
        log start offset (records deleted under a transaction still open, as Kafka's)."""
        high_watermark = self.high_watermark
        unstable = self.first_unstable_offset()
        if unstable is None or unstable >= high_watermark:
            return high_watermark
        return max(unstable, self.log_start_offset)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction still open, or ended by a marker not yet
        below the high watermark (as Kafka's); None when there is none."""
        unstable = self.producer_state.first_unstable_offset()
        high_watermark = self.high_watermark
        for txn in self._unreplicated_txns:
            if txn.last_offset >= high_watermark and (
                unstable is None or txn.first_offset < unstable
            ):
                unstable = txn.first_offset
        return unstable

    def append_as_coordinator(
        self, records: bytes | bytearray | memoryview, *, leader_epoch: int
    ) -> LogAppendInfo:
        """Append a coordinator's record set as leader, typically a transaction marker
        (``control.encode_marker``): the only origin allowed to write control batches.
        The caller flushes when the result says ``flush_before_ack``."""
        return self.append_validated(
            self.validate(records, origin=AppendOrigin.COORDINATOR), leader_epoch=leader_epoch
        )

    def update_high_watermark(self, offset: int) -> int:
        """Move the high watermark, clamped to [log start, LEO]; returns the value set."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    def advance_log_start_offset(self, offset: int) -> int:
        """``DeleteRecords``: make ``offset`` the first readable offset (never moves back).

        Whole segments below it are deleted by the next ``delete_old_segments``.
        """
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: beyond the high watermark "
                f"{self.high_watermark} of {self.directory.name}"
            )
        with self._lock:
            self.log_start_offset = max(self.log_start_offset, offset)
            self.recovery_point = max(self.recovery_point, self.log_start_offset)
            changed = self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            log_start_offset = self.log_start_offset
        if changed:
            self._write_leader_epoch_checkpoint_in_background()
        return log_start_offset

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (a follower diverging from its new leader).

        An offset at or past the end removes no record, but still drops the leader epochs that
        start at or after the end, as Kafka does: a broker that became leader and was replaced
        before it appended anything holds an epoch its new leader never saw, and a follower that
        kept it would name it as its last fetched epoch, be told to diverge, and truncate to the
        same offset forever."""
        with self._lock:
            if offset >= self.log_end_offset:
                epochs_changed = self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            else:
                epochs_changed = self._truncate_records_to(offset)
        self._delete_due_files_in_background()
        if epochs_changed:
            self._write_leader_epoch_checkpoint_in_background()

    def _truncate_records_to(self, offset: int) -> bool:
        """``truncate_to`` below the end, under the lock; True if the leader epochs changed."""
        if offset < self.log_start_offset:
            raise OffsetOutOfRangeError(f"cannot truncate below log start {offset}")
        self._check_online()
        self._truncations += 1
        self._note_truncation(offset)
        segments = self._view.segments
        keep = [s for s in segments if s.base_offset < offset]
        if keep:
            # First, so an offset inside a batch raises before any segment is deleted.
            with self._disk_errors():
                keep[-1].truncate_to(offset)
        for segment in segments:
            if segment not in keep:
                self._schedule_delete(segment)
        if not keep:
            # Only after the renames: the new segment may take a deleted one's file names.
            keep = [self._new_segment(offset, active=True)]
        active = keep[-1]
        active.offset_index.make_writable()
        active.time_index.make_writable()
        self._view = LogSegments.of(keep)
        self._position_cache = None
        self.log_end_offset = offset
        self.high_watermark = min(self.high_watermark, offset)
        self.recovery_point = min(self.recovery_point, offset)
        self.producer_state.truncate(offset)
        self._unreplicated_txns = rebuild_producer_state(
            self.producer_state, self._view, self.log_start_offset, offset, self.high_watermark
        )
        return self.leader_epoch_cache.truncate_from_end(offset)

    def _note_truncation(self, offset: int) -> None:
        floor = self._truncation_floor
        self._truncation_floor = offset if floor is None else min(floor, offset)

    def take_truncation_floor(self) -> int | None:
        """The lowest offset truncated away since the last call (-1: the whole log was
        replaced), or None; resets it. A copy of this log drops what is at or above it."""
        with self._lock:
            floor, self._truncation_floor = self._truncation_floor, None
            return floor

    def batch_start_at_or_below(self, offset: int) -> int:
        """``offset``, or the base offset of the batch holding it if it is inside one: where a
        truncation to ``offset`` may cut (a replica keeps or drops whole batches)."""
        for base_offset, _ in self._view.headers_from(offset):
            return min(base_offset, offset)
        return offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and continue with an empty log at ``offset`` (a follower whose
        leader's log starts beyond this one's end: Kafka's ``truncateFullyAndStartAt``)."""
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot start a log at offset {offset}")
        with self._lock:
            self._check_online()
            self._truncations += 1
            self._note_truncation(-1)
            for segment in self._view.segments:
                self._schedule_delete(segment)
            # Only after the renames: the new segment may take a deleted one's file names.
            active = self._new_segment(offset, active=True)
            active.offset_index.make_writable()
            active.time_index.make_writable()
            self._view = LogSegments.of([active])
            self._position_cache = None
            self._unreplicated_txns = ()
            self.log_start_offset = self.log_end_offset = offset
            self.high_watermark = self.recovery_point = offset
            self.producer_state.truncate(-1)  # every snapshot: none describes the new log
            self._unreplicated_txns = rebuild_producer_state(
                self.producer_state, self._view, offset, offset, self.high_watermark
            )
            self.leader_epoch_cache.clear()
        self._delete_due_files_in_background()
        self._write_leader_epoch_checkpoint_in_background()

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._view.segments)

    # -- failure and life cycle ----------------------------------------------------------

    def _check_online(self) -> None:
        if self.deleted:
            raise UnknownTopicOrPartitionError(f"the log {self.directory.name} was deleted")
        if self.offline:
            raise KafkaStorageError(f"log {self.directory} is offline after an I/O error")

    def report_io_error(self, error: OSError) -> None:
        """An I/O error takes the log offline and is reported to the log manager (any thread)."""
        self.offline = True
        if self.on_io_error is not None:
            self.on_io_error(self, error)

    def _disk_errors(self, *, cleanup: Callable[[], object] | None = None) -> disk_errors:
        """The ``disk_errors`` block of this log: ``report_io_error``, then raise
        ``KafkaStorageError`` ("I/O error in <directory>: <error>")."""
        return disk_errors(self.report_io_error, raise_as=self._io_error_prefix, cleanup=cleanup)

    def _io_error_prefix(self) -> str:
        return f"I/O error in {self.directory}"

    def update_config(self, config: TopicConfig) -> None:
        """Apply a new topic configuration (AlterConfigs); takes effect for later appends."""
        self.config = config

    def close(self) -> None:
        """Flush and close every file (a clean shutdown, after the other threads stopped)."""
        if not self.offline and not self.deleted:
            self.flush()
            with self._lock:
                snapshot = self.producer_state.capture_snapshot()
            # Durable, so outside the lock (module docstring, rule 1).
            with self._disk_errors(cleanup=self.leader_epoch_cache.close):
                self.producer_state.write_snapshot(snapshot, durable=True)
                self.leader_epoch_cache.flush()
        self.leader_epoch_cache.close()
        with self._lock:
            self.delete_expired_files(force=True)
            for segment in self._view.segments:
                segment.close()

    def detach(self, directory: Path) -> None:
        """Take the log out of service and rename its directory to ``directory`` (deletion).

        Cheap, for the appending thread: afterwards appends and reads refuse the log, flushes,
        retention and the cleaner skip it, no producer-state snapshot is written for it any
        more, and nothing is left that ``delete_files`` (slow) could race with. Nothing is
        flushed: the data is going. Raises ``OSError`` if the rename fails.
        """
        with self._lock:
            self.deleted = True
            self.producer_state.close()
            self.file_ops.replace(self.directory, directory)
            self.directory = directory
            self.leader_epoch_cache.relocate(directory)

    def rename_dir(self, directory: Path) -> None:
        """Move the log's directory to ``directory`` with its files open (a future log becoming
        the current one, KIP-113). The appending thread, with no append in progress. Raises
        ``OSError`` if the rename fails, ``KafkaStorageError`` if the log is offline."""
        with self._lock:
            self._check_online()
            self.file_ops.replace(self.directory, directory)
            self.directory = directory
            for segment in (*self._view.segments, *(s for _, s in self._pending_deletes)):
                segment.relocate(directory)
            self.producer_state.relocate(directory)
            self.leader_epoch_cache.relocate(directory)

    def delete_files(self) -> None:
        """Close every file of a detached log and remove its directory (any thread).

        Closes by descriptor, never unlinks by a segment's own path: after ``detach`` that path
        may name a new log's file.
        """
        with self._lock:
            if not self.deleted:
                raise RuntimeError(f"{self.directory} must be detached before its files go")
            segments = list(self._view.segments) + [s for _, s in self._pending_deletes]
            self._pending_deletes = []
        self.leader_epoch_cache.close()  # waits for a write in progress into the directory
        for segment in segments:
            segment.close_handles()
        self.file_ops.rmtree(self.directory)

    def delete(self) -> None:
        """Delete the partition where it is, now: close and remove every file, no flush."""
        self.detach(self.directory)
        self.delete_files()

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self._view.segments)})"
        )
