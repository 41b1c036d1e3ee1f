"""One partition's log: an ordered sequence of segments in a directory ``<topic>-<partition>``.

Offsets and their invariants, all enforced here:

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
  a crash: loading checks each entry against the batch holding its start offset (any mismatch:
  rebuilt from every batch header, as with a missing or corrupt file), then finds newer epochs
  by bisecting the log after the latest entry (epochs never decrease along a log).

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
2. An fsync runs outside ``self._lock``, on duplicated descriptors taken under it
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

Mutations of the segment list publish a new immutable ``_Segments`` value, so a reader takes one
consistent snapshot without locking.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import shutil
import struct
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path

from odradek.common.clock import wall_clock_ms
from odradek.config.topic import TopicConfig
from odradek.errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.batch import BatchHeader
from odradek.storage.checkpoint import CorruptCheckpointError
from odradek.storage.compression import MAX_DECOMPRESSED_BYTES
from odradek.storage.control import EndTxnMarker, marker_or_none, read_marker
from odradek.storage.executors import StorageExecutors
from odradek.storage.index import CorruptIndexError
from odradek.storage.leader_epoch import LeaderEpochCheckpointFile, LeaderEpochFileCache
from odradek.storage.producer_state import (
    ActiveProducer,
    CompletedTxn,
    ProducerSnapshot,
    ProducerStateManager,
)
from odradek.storage.records import decode_records
from odradek.storage.segment import (
    LOG_SUFFIX,
    FileSlice,
    LogSegment,
    SegmentReader,
    close_all,
    write_past_end,
)
from odradek.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from odradek.storage.validator import AppendOrigin, ValidatedRecords, validate_records

log = logging.getLogger(__name__)

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# Segments whose descriptors a flush duplicates at a time (three each): bounds the files a
# flush of a long unflushed range holds open.
FSYNC_BATCH_SEGMENTS = 64

# Rewritten in each appended batch: base_offset, batch_length, partition_leader_epoch.
_LOG_PREFIX = struct.Struct(">qii")

# Special timestamps of ListOffsets, as Kafka defines them.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """What an append did: offsets assigned, timestamps seen, and each batch it wrote."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    records_count: int
    valid_bytes: int
    batches: tuple[tuple[int, BatchHeader], ...] = ()  # (assigned base offset, header)
    duplicate: bool = False  # a producer's retry of a batch already in the log: nothing written
    # flush.messages was reached: the append is acknowledged only once it is fsynced (Kafka
    # flushes in its append path). ``append_validated`` leaves the fsync to the caller.
    flush_before_ack: bool = False


@dataclass(slots=True, eq=False)
class PreparedAppend:
    """An append with its offsets assigned and its place chosen, not yet written or visible.

    ``Log.prepare_append`` makes one; ``Log.write_prepared`` writes its bytes past the end of
    ``segment``'s file (on another thread for a large record set, through a duplicated
    descriptor it owns and closes); ``Log.publish_prepared`` indexes them and moves the LEO.
    """

    valid_bytes: int
    log_append_time_ms: int
    buffers: list[bytes | memoryview] = field(default_factory=list)
    assigned: list[tuple[int, BatchHeader]] = field(default_factory=list)
    markers: list[EndTxnMarker | None] = field(default_factory=list)  # each batch's marker
    # (partition_leader_epoch written, base offset) of each batch starting a higher epoch.
    epoch_starts: list[tuple[int, int]] = field(default_factory=list)
    next_offset: int = -1
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    records_count: int = 0
    segment: LogSegment | None = None
    position: int = 0  # where the bytes go in the segment's file: its published end
    fd: int = -1
    owns_fd: bool = False


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


@dataclass(frozen=True, slots=True)
class _Segments:
    """An immutable snapshot of the segment list, with base offsets for bisecting."""

    segments: tuple[LogSegment, ...]
    base_offsets: tuple[int, ...] = field(default=())

    @classmethod
    def of(cls, segments: list[LogSegment] | tuple[LogSegment, ...]) -> _Segments:
        ordered = tuple(segments)
        return cls(ordered, tuple(s.base_offset for s in ordered))

    def floor_index(self, offset: int) -> int:
        """Index of the segment that would hold ``offset`` (the first one if none does)."""
        return max(bisect.bisect_right(self.base_offsets, offset) - 1, 0)

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]


class Log:
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
    ):
        self.directory = Path(directory)
        self.config = config
        self.clock = clock
        self.on_io_error = on_io_error
        self.executors = executors or StorageExecutors.inline()
        self.offline = False
        self.deleted = False  # detached for deletion: nothing may use its files any more
        self._lock = threading.RLock()
        self._truncations = 0  # a flush that started before a truncation moves nothing
        # The lowest offset truncated away since ``take_truncation_floor`` last asked (-1: the
        # whole log), for a future log copied from this one (KIP-113) to drop the same offsets.
        self._truncation_floor: int | None = None
        # The callers waiting for the flush queued and not yet started; later appends join it.
        self._queued_flush_waiters: list[Future[None]] | None = None
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._position_cache: tuple[int, int, int] | None = None  # (offset, base, position)
        self.last_flush_ms = clock()
        # The compaction cleaner's first dirty offset (cleaner-offset-checkpoint in Kafka).
        self.cleaner_checkpoint = cleaner_checkpoint
        self.directory.mkdir(parents=True, exist_ok=True)
        segments, recovered = self._load(recovery_point, clean_shutdown)
        self._view = _Segments.of(segments)
        self.log_end_offset = self._view.active.next_offset
        self.log_start_offset = min(
            max(log_start_offset, self._view.segments[0].base_offset), self.log_end_offset
        )
        if recovered:
            # What was re-validated (and the renames and truncations that did it) is now durable.
            self._fsync_segments(self._view.segments, directory=True)
            self.recovery_point = self.log_end_offset
        else:
            self.recovery_point = min(max(recovery_point, 0), self.log_end_offset)
        # Restored from replication-offset-checkpoint; without it nothing is known to be
        # committed (a follower must not claim its whole log). A leader alone in its ISR moves
        # it to its LEO itself.
        self.high_watermark = self.log_start_offset
        if high_watermark is not None:
            self.update_high_watermark(high_watermark)
        self.producer_state = ProducerStateManager(self.directory)
        # Transactions whose marker is at or above the high watermark, in marker order: they
        # still hold the last stable offset (a new leader may not have the marker). A tuple
        # replaced whole under the lock; pruned as markers fall below the HW.
        self._unreplicated_txns: tuple[CompletedTxn, ...] = ()
        # After an unclean shutdown the replay starts at or below the recovery point, so that it
        # rebuilds every aborted-transaction entry that may not have reached the disk.
        self._load_producer_state(
            self.log_start_offset,
            self.log_end_offset,
            max_snapshot_offset=None if clean_shutdown else self.recovery_point,
        )
        self.leader_epoch_cache = self._load_leader_epoch_cache()

    # -- loading and recovery ------------------------------------------------------------

    def _load_producer_state(
        self, log_start_offset: int, log_end_offset: int, *, max_snapshot_offset: int | None = None
    ) -> None:
        """Rebuild the producer state, and the aborted-transaction entries of what it replays:
        those of markers at or above the replay's start are dropped and written again."""
        completed: list[CompletedTxn] = []
        start = self.producer_state.load(
            log_start_offset,
            log_end_offset,
            self._replay_from,
            max_snapshot_offset=max_snapshot_offset,
            on_completed=completed.append,
        )
        view = self._view
        for segment in view.segments[view.floor_index(start) :]:
            segment.txn_index.truncate_to(start)
        self._unreplicated_txns = tuple(
            t for t in completed if t.last_offset >= min(self.high_watermark, log_end_offset)
        )
        for txn in completed:
            if txn.is_aborted:
                view.segments[view.floor_index(txn.last_offset)].txn_index.append(
                    AbortedTxn(
                        txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
                    )
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

    def _load_leader_epoch_cache(self) -> LeaderEpochFileCache:
        """The leader-epoch cache, from ``leader-epoch-checkpoint`` checked against the batches.

        The file is written off the appending thread, so a crash can leave it behind the log:
        entries past the LEO (truncated away by recovery, or by a replica's truncation the file
        had not seen), or epochs appended since. So each entry must match the batch holding its
        start offset, else the cache is rebuilt from every batch header; then the log after the
        latest entry is searched for newer epochs. A missing or corrupt file means a rebuild.
        Writes the file at once (on the loading thread) if it had to change.
        """
        checkpoint = LeaderEpochCheckpointFile(self.directory)
        try:
            entries = checkpoint.read()
            corrupt = False
        except CorruptCheckpointError as e:
            log.warning("rebuilding the leader epoch cache from the log: %s", e)
            entries, corrupt = None, True
        # A missing file with no epoch in the log stays missing: a new log writes nothing.
        cache = LeaderEpochFileCache(checkpoint, entries or (), written=not corrupt)
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)
        if entries is not None and not all(
            self._epoch_starts_at(e.epoch, e.start_offset) for e in cache.entries()
        ):
            log.warning(
                "%s: leader-epoch-checkpoint disagrees with the log's batches: rebuilding it",
                self.directory.name,
            )
            entries = None
        if entries is None:
            cache.clear()
            for base_offset, header in self._headers_from(self.log_start_offset):
                _assign_epoch(cache, header.partition_leader_epoch, base_offset)
        else:
            self._find_newer_epochs(cache)
        try:
            cache.flush()
        except OSError as e:
            checkpoint.close()
            self._io_error(e)
        return cache

    def _batch_holding(self, offset: int) -> BatchHeader | None:
        """The header of the batch holding ``offset`` (or the next one, past a gap)."""
        return next((header for _, header in self._headers_from(offset)), None)

    def _epoch_starts_at(self, epoch: int, start_offset: int) -> bool:
        """Whether the batch holding ``start_offset`` was written in ``epoch``."""
        holding = self._batch_holding(start_offset)
        return holding is not None and holding.partition_leader_epoch == epoch

    def _find_newer_epochs(self, cache: LeaderEpochFileCache) -> None:
        """Assign the epochs after the cache's latest entry, found by bisecting the log.

        Batches' epochs never decrease along a log (each leader stamps its own, newer, epoch;
        followers copy them), so where the next higher epoch starts is a binary search over
        offsets: a few index lookups per epoch, not a scan of every header since the latest
        entry (an epoch may have lasted the whole log).
        """
        latest = cache.latest_entry()
        low = self.log_start_offset if latest is None else latest.start_offset
        epoch = -1 if latest is None else latest.epoch
        while low < self.log_end_offset:
            # The smallest offset whose batch is newer than ``epoch`` lies in [low, high].
            high = self.log_end_offset
            while low < high:
                middle = (low + high) // 2
                holding = self._batch_holding(middle)
                if holding is None:
                    high = middle
                elif holding.partition_leader_epoch > epoch:
                    high = min(middle, holding.base_offset)
                else:
                    low = holding.last_offset + 1
            first = self._batch_holding(low)
            if first is None or first.partition_leader_epoch <= epoch:
                return
            _assign_epoch(cache, first.partition_leader_epoch, first.base_offset)
            epoch, low = first.partition_leader_epoch, first.last_offset + 1

    def _new_segment(self, base_offset: int, *, active: bool, suffix: str = "") -> LogSegment:
        return LogSegment(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            active=active,
            created_ms=self.clock(),
            suffix=suffix,
        )

    def _load(self, recovery_point: int, clean_shutdown: bool) -> tuple[list[LogSegment], bool]:
        """Open the segments on disk, recovering what an unclean shutdown may have torn.

        Returns the segments and whether any were re-validated. Leftovers of interrupted work
        are settled first: ``.deleted`` and ``.cleaned`` files go, and a ``.swap`` (a cleaner's
        finished output) replaces the segments it covers, as Kafka does.
        """
        for path in self.directory.iterdir():
            if path.name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
                path.unlink()
        self._complete_swaps()
        bases = sorted(
            int(p.name[: -len(LOG_SUFFIX)])
            for p in self.directory.iterdir()
            if p.name.endswith(LOG_SUFFIX) and p.name[: -len(LOG_SUFFIX)].isdigit()
        )
        self._remove_orphan_indexes(set(bases))
        if not bases:
            return [self._new_segment(0, active=True)], False
        segments = [self._new_segment(b, active=(b == bases[-1])) for b in bases]
        recover_from = (
            len(segments) if clean_shutdown else _Segments.of(segments).floor_index(recovery_point)
        )
        recovered = False
        kept: list[LogSegment] = []
        for n, segment in enumerate(segments):
            if n < recover_from:
                try:
                    segment.load_from_indexes()
                    kept.append(segment)
                    continue
                except CorruptIndexError as e:
                    log.warning("rebuilding indexes of %s: %s", segment.log_path, e)
            truncated = segment.recover()
            recovered = True
            kept.append(segment)
            if truncated:
                log.warning(
                    "%s: truncated %d bytes of torn or invalid data at position %d",
                    segment.log_path,
                    truncated,
                    segment.size,
                )
                for later in segments[n + 1 :]:
                    log.warning("deleting %s, which followed invalid data", later.log_path)
                    later.delete()
                break
        # An empty segment before the last stays, as in Kafka: compaction leaves one when a
        # whole group of records was superseded, and dropping it would move the log start
        # offset forward at the next start (consumers' offsets there would be out of range).
        kept[-1].offset_index.make_writable()
        kept[-1].time_index.make_writable()
        return kept, recovered

    def _complete_swaps(self) -> None:
        for path in sorted(self.directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
            base = int(path.name[:20])
            swapped = self._new_segment(base, active=False, suffix=SWAP_SUFFIX)
            swapped.recover()
            for other in self.directory.glob(f"*{LOG_SUFFIX}"):
                other_base = int(other.name[:20])
                if base <= other_base < swapped.next_offset:
                    for suffix in (".log", ".index", ".timeindex", TXN_INDEX_SUFFIX):
                        (self.directory / f"{other_base:020d}{suffix}").unlink(missing_ok=True)
            swapped.rename_with_suffix("")
            swapped.close()

    def _remove_orphan_indexes(self, bases: set[int]) -> None:
        for path in self.directory.iterdir():
            stem = path.name.split(".", 1)[0]
            if (
                path.suffix in (".index", ".timeindex", TXN_INDEX_SUFFIX)
                and stem.isdigit()
                and int(stem) not in bases
            ):
                path.unlink()

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
                _marker_of(origin, header, validated.records, position)
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
            prepared = self._assign_offsets(validated, leader_epoch)
            prepared.markers = markers
            segment = self._maybe_roll(
                prepared.valid_bytes, prepared.max_timestamp, prepared.next_offset - 1
            )
            prepared.segment, prepared.position = segment, segment.size
            if writer_thread:
                try:
                    prepared.fd, prepared.owns_fd = os.dup(segment.fd), True
                except OSError as e:
                    self._io_error(e)
            else:
                prepared.fd = segment.fd
            return prepared

    def write_prepared(self, prepared: PreparedAppend) -> None:
        """Write a prepared append's bytes past the end of its segment's file (any thread).

        Nothing becomes visible: readers never look past a segment's published size. Raises
        ``KafkaStorageError`` after an I/O error (the file cut back, the log taken offline).
        """
        try:
            write_past_end(prepared.fd, prepared.buffers, prepared.position)
        except OSError as e:
            self._io_error(e)
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

    def _assign_offsets(
        self, validated: ValidatedRecords, leader_epoch: int | None
    ) -> PreparedAppend:
        """Each batch's base offset and the bytes to write. Caller holds the lock."""
        view = validated.records
        next_offset = self.log_end_offset
        prepared = PreparedAppend(
            valid_bytes=len(view), log_append_time_ms=validated.log_append_time_ms
        )
        for position, header in validated.batches:
            if validated.origin == AppendOrigin.REPLICATION:
                if header.base_offset < next_offset:
                    raise InvalidRecordError(
                        f"replicated batch at offset {header.base_offset} does not follow "
                        f"the log end offset {next_offset}"
                    )
                base_offset = header.base_offset
            else:
                base_offset = next_offset
            next_offset = base_offset + header.last_offset_delta + 1
            epoch = header.partition_leader_epoch if leader_epoch is None else leader_epoch
            if epoch >= 0 and (not prepared.epoch_starts or epoch > prepared.epoch_starts[-1][0]):
                prepared.epoch_starts.append((epoch, base_offset))
            prepared.buffers.append(_LOG_PREFIX.pack(base_offset, header.batch_length, epoch))
            prepared.buffers.append(
                view[position + _LOG_PREFIX.size : position + header.size_in_bytes]
            )
            prepared.assigned.append((base_offset, header))
            prepared.records_count += header.records_count
            if header.max_timestamp > prepared.max_timestamp:
                prepared.max_timestamp = header.max_timestamp
                prepared.offset_of_max_timestamp = next_offset - 1
        prepared.next_offset = next_offset
        return prepared

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
            self._view = _Segments.of(self._view.segments + (new,))
            # Copied here, written on the housekeeping thread (see producer_state).
            snapshot = self.producer_state.capture_snapshot()
            self.executors.housekeeping.submit(self._write_producer_snapshot, snapshot)
            return new

    def _write_producer_snapshot(self, snapshot: ProducerSnapshot) -> None:
        """The housekeeping job of a roll; an I/O error takes the log offline."""
        try:
            self.producer_state.write_snapshot(snapshot, durable=False)
        except OSError as e:
            if self.producer_state.is_current(snapshot):  # else the log went meanwhile
                self.report_io_error(e)

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

    def _headers_from(self, offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """``(base_offset, header)`` of every batch holding offsets >= ``offset``."""
        view = self._view
        for segment in view.segments[view.floor_index(offset) :]:
            found = segment.translate_offset(offset)
            if found is not None:
                for _, header in segment.batches_from(found[0]):
                    yield header.base_offset, header

    def _replay_from(self, offset: int) -> Iterator[tuple[int, BatchHeader, EndTxnMarker | None]]:
        """``_headers_from`` with each control batch's marker, for the producer state."""
        view = self._view
        for segment in view.segments[view.floor_index(offset) :]:
            found = segment.translate_offset(offset)
            if found is not None:
                for position, header in segment.batches_from(found[0]):
                    marker = None
                    if header.is_control:
                        marker = marker_or_none(header, segment.read_batch_bytes(position, header))
                    yield header.base_offset, header, marker

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
        try:
            self.leader_epoch_cache.flush()
        except OSError as e:
            if not self.deleted:  # else the directory went with the partition
                self.report_io_error(e)

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
            try:
                keep[-1].truncate_to(offset)
            except OSError as e:
                self._io_error(e)
        for segment in segments:
            if segment not in keep:
                self._schedule_delete(segment)
        if not keep:
            # Only after the renames: the new segment may take a deleted one's file names.
            keep = [self._new_segment(offset, active=True)]
        active = keep[-1]
        active.offset_index.make_writable()
        active.time_index.make_writable()
        self._view = _Segments.of(keep)
        self._position_cache = None
        self.log_end_offset = offset
        self.high_watermark = min(self.high_watermark, offset)
        self.recovery_point = min(self.recovery_point, offset)
        self.producer_state.truncate(offset)
        self._load_producer_state(self.log_start_offset, offset)
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
        for base_offset, _ in self._headers_from(offset):
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
            self._view = _Segments.of([active])
            self._position_cache = None
            self._unreplicated_txns = ()
            self.log_start_offset = self.log_end_offset = offset
            self.high_watermark = self.recovery_point = offset
            self.producer_state.truncate(-1)  # every snapshot: none describes the new log
            self._load_producer_state(offset, offset)
            self.leader_epoch_cache.clear()
        self._delete_due_files_in_background()
        self._write_leader_epoch_checkpoint_in_background()

    # -- retention -----------------------------------------------------------------------

    def delete_old_segments(self) -> int:
        """Retention: delete whole old segments; returns how many.

        A segment goes when it lies wholly below the log start offset, or (with
        ``cleanup.policy`` delete) is older than ``retention.ms`` or not needed to keep the log
        within ``retention.bytes``. Never the active segment, never data above the high
        watermark; always the oldest first, so the log stays contiguous.
        """
        config = self.config
        now = self.clock()
        with self._lock:
            if self.deleted:
                return 0
            segments = self._view.segments
            excess_bytes = self.size_in_bytes - config.retention_bytes
            count = 0
            for segment, following in zip(segments, segments[1:], strict=False):
                if following.base_offset > self.high_watermark:
                    break
                below_start = following.base_offset <= self.log_start_offset
                expired = (
                    config.delete
                    and config.retention_ms >= 0
                    and now - segment.largest_timestamp > config.retention_ms
                )
                too_big = (
                    config.delete
                    and config.retention_bytes >= 0
                    and excess_bytes - segment.size >= 0
                )
                if not (below_start or expired or too_big):
                    break
                excess_bytes -= segment.size
                count += 1
            if count:
                for segment in segments[:count]:
                    self._schedule_delete(segment)
                self._view = _Segments.of(segments[count:])
                self.log_start_offset = max(self.log_start_offset, segments[count].base_offset)
                self.producer_state.delete_snapshots_below(self.log_start_offset)
            epochs_changed = self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        if count:
            self._delete_due_files_in_background()
        if epochs_changed:
            self._write_leader_epoch_checkpoint_in_background()
        return count

    def _schedule_delete(self, segment: LogSegment) -> None:
        """Rename a segment's files ``.deleted``; close and remove them after the delay.

        Caller holds the lock, and calls ``_delete_due_files_in_background`` after it.
        """
        try:
            segment.rename_with_suffix(DELETED_SUFFIX)
        except OSError as e:
            self._io_error(e)
        self._pending_deletes.append((self.clock() + self.config.file_delete_delay_ms, segment))

    def _delete_due_files_in_background(self) -> None:
        """With ``file.delete.delay.ms`` 0, the files go now, on the housekeeping thread."""
        now = self.clock()
        with self._lock:
            due = any(t <= now for t, _ in self._pending_deletes)
        if due:
            self.executors.housekeeping.submit(self.delete_expired_files)

    def delete_expired_files(self, force: bool = False) -> None:
        """Remove ``.deleted`` segments whose ``file.delete.delay.ms`` has passed (not on the
        appending thread: closing and unlinking big files takes time)."""
        now = self.clock()
        with self._lock:
            if self.deleted:
                return  # ``delete_files`` closes them; their paths may name a new log's files
            due = [s for t, s in self._pending_deletes if force or t <= now]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if s not in due]
        for segment in due:
            segment.delete()

    # -- compaction support --------------------------------------------------------------

    def segments(self) -> tuple[LogSegment, ...]:
        """A snapshot of the segments, oldest first; the last is active."""
        return self._view.segments

    def active_producers(self) -> dict[int, ActiveProducer]:
        """The producers the log knows, copied under the lock (for other threads: the
        cleaner keeps the batches that hold their state; DescribeProducers shows them)."""
        with self._lock:
            return self.producer_state.active_producers()

    def segment_reader(self, segment: LogSegment) -> SegmentReader | None:
        """A reader of ``segment`` for a thread other than the appending one (the cleaner).

        None if the segment left the log (retention, truncation, a swap) or the log is
        detached or offline: the caller's view of the segments is stale, its work void.
        """
        with self._lock:
            if self.deleted or self.offline or segment not in self._view.segments:
                return None
            try:
                return segment.reader()
            except OSError as e:
                self._io_error(e)
                raise  # unreachable: _io_error raises

    def new_cleaned_segment(self, base_offset: int, created_ms: int) -> LogSegment | None:
        """A private ``.cleaned`` segment for the cleaner's output; None once detached.

        Created under the lock, so no file appears in the directory of a detached log (its
        removal would race with it).
        """
        with self._lock:
            if self.deleted:
                return None
            try:
                return LogSegment(
                    self.directory,
                    base_offset,
                    index_interval_bytes=self.config.index_interval_bytes,
                    max_index_bytes=self.config.segment_index_bytes,
                    active=True,
                    created_ms=created_ms,
                    suffix=CLEANED_SUFFIX,
                )
            except OSError as e:
                self._io_error(e)
                raise  # unreachable: _io_error raises

    def discard_cleaned_segment(self, cleaned: LogSegment) -> None:
        """Throw away the cleaner's unused output (a detached log's goes with its directory)."""
        with self._lock:
            if self.deleted:
                cleaned.close_handles()
            else:
                cleaned.delete()

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> bool:
        """Swap ``old`` (contiguous, inactive) for ``new``, crash-safely; False if they changed.

        ``new`` holds the same offsets minus what compaction removed and is named after
        ``old[0]``. Rename order makes a crash at any point recoverable (see ``_load``): new
        files to ``.swap``, old ones to ``.deleted``, then ``.swap`` to the final names. The
        directory is fsynced after the renames (outside the lock), so a swap the caller sees
        succeed survives a power cut.
        """
        with self._lock:
            if self.deleted or self.offline:
                return False
            segments = self._view.segments
            try:
                first = segments.index(old[0])
            except ValueError:
                return False
            if segments[first : first + len(old)] != tuple(old) or first + len(old) >= len(
                segments
            ):
                return False
            try:
                # ``new`` carries the aborted-transaction entries the cleaner kept (those of
                # the ABORT markers still needed), written before the swap.
                new.txn_index.sync()
                new.rename_with_suffix(SWAP_SUFFIX)
                for segment in old:
                    self._schedule_delete(segment)
                new.rename_with_suffix("")
            except OSError as e:
                self._io_error(e)
            self._view = _Segments.of(segments[:first] + (new,) + segments[first + len(old) :])
            self._position_cache = None
            handles = self._fsync_handles((), directory=True)
        self._fsync(handles)
        self._delete_due_files_in_background()
        return True

    # -- durability ----------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: the LEO).

        Blocks on the disk, so never on the appending thread (``flush_in_background``). The
        descriptors are duplicated under the lock and fsynced outside it (module docstring,
        rule 2); the directory too when segments were created since the last flush, as Kafka
        does. Raises ``KafkaStorageError`` if the log is offline or the disk fails.
        """
        with self._lock:
            if self.deleted:
                return  # nothing of it is kept: nothing to make durable
            self._check_online()
            target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
            if target <= self.recovery_point:
                return
            view = self._view
            first = view.floor_index(self.recovery_point)
            segments = [s for s in view.segments[first:] if s.base_offset < target]
            created = any(s.base_offset >= self.recovery_point for s in segments)
            truncations = self._truncations
        self._fsync_segments(segments, directory=created)
        with self._lock:
            if self._truncations == truncations:  # else ``target`` may be data written since
                self.recovery_point = max(self.recovery_point, target)
            self.last_flush_ms = self.clock()

    def flush_in_background(self) -> Future[None]:
        """Flush everything appended so far on a storage flush thread; the future says when.

        For the appending thread after an append that says ``flush_before_ack``: acknowledge
        it once the future is done (it raises ``KafkaStorageError`` if the disk failed). A
        flush queued and not yet started covers this append too, so it is joined rather than
        another queued. Each caller gets its own future: cancelling one cancels no other.
        """
        waiter: Future[None] = Future()
        with self._lock:
            if self._queued_flush_waiters is not None:
                self._queued_flush_waiters.append(waiter)
                return waiter
            waiters = self._queued_flush_waiters = [waiter]
        try:
            self.executors.flush.submit(self._run_queued_flush, waiters)
        except RuntimeError as e:  # the executor is shut down: the broker is stopping
            with self._lock:
                self._queued_flush_waiters = None
            _settle(waiters, KafkaStorageError(f"cannot flush {self.directory.name}: {e}"))
        return waiter

    def _run_queued_flush(self, waiters: list[Future[None]]) -> None:
        with self._lock:
            if self._queued_flush_waiters is waiters:
                # From here on, appends queue a new flush: this one may start before their
                # write (the LEO it flushes to is read under the lock in ``flush``).
                self._queued_flush_waiters = None
        try:
            self.flush()
        except Exception as e:
            _settle(waiters, e)
        else:
            _settle(waiters, None)

    def _fsync_segments(
        self, segments: list[LogSegment] | tuple[LogSegment, ...], *, directory: bool
    ) -> None:
        """fsync ``segments`` (and the directory) without the lock, a few segments at a time.

        A segment that left the log meanwhile is skipped: retention made it irrelevant, a
        truncation keeps the recovery point from counting it, and a cleaner's swap replaced it
        with a segment the cleaner fsynced itself.
        """
        for first in range(0, len(segments), FSYNC_BATCH_SEGMENTS):
            chunk = segments[first : first + FSYNC_BATCH_SEGMENTS]
            last = first + FSYNC_BATCH_SEGMENTS >= len(segments)
            with self._lock:
                if self.deleted:
                    return
                current = set(self._view.segments)
                handles = self._fsync_handles(
                    [s for s in chunk if s in current], directory=directory and last
                )
            self._fsync(handles)
        if directory and not segments:
            with self._lock:
                handles = self._fsync_handles((), directory=True)
            self._fsync(handles)

    def _fsync_handles(
        self, segments: list[LogSegment] | tuple[LogSegment, ...], *, directory: bool
    ) -> list[int]:
        """Duplicated descriptors to fsync; the caller holds the lock (module docstring, 2)."""
        handles: list[int] = []
        try:
            for segment in segments:
                handles += segment.fsync_handles()
            if directory:
                handles.append(os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY))
        except OSError as e:
            close_all(handles)
            self._io_error(e)
        return handles

    def _fsync(self, handles: list[int]) -> None:
        """fsync and close ``handles``, without the lock; an error takes the log offline."""
        try:
            for fd in handles:
                os.fsync(fd)
        except OSError as e:
            self._io_error(e)
        finally:
            close_all(handles)

    def flush_if_due(self) -> None:
        """The flush scheduler's tick: ``flush.ms``, and segments rolled since the last flush."""
        if self.clock() - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
        elif self.recovery_point < self._view.active.base_offset:
            self.flush(self._view.active.base_offset)

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

    def _io_error(self, error: OSError) -> None:
        """``report_io_error``, then raise ``KafkaStorageError``."""
        self.report_io_error(error)
        raise KafkaStorageError(f"I/O error in {self.directory}: {error}") from error

    def update_config(self, config: TopicConfig) -> None:
        """Apply a new topic configuration (AlterConfigs); takes effect for later appends."""
        self.config = config

    def close(self) -> None:
        """Flush and close every file (a clean shutdown, after the other threads stopped)."""
        if not self.offline and not self.deleted:
            self.flush()
            with self._lock:
                snapshot = self.producer_state.capture_snapshot()
            try:  # durable, so outside the lock (module docstring, rule 1)
                self.producer_state.write_snapshot(snapshot, durable=True)
                self.leader_epoch_cache.flush()
            except OSError as e:
                self.leader_epoch_cache.close()
                self._io_error(e)
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
            os.replace(self.directory, directory)
            self.directory = directory

    def rename_dir(self, directory: Path) -> None:
        """Move the log's directory to ``directory`` with its files open (a future log becoming
        the current one, KIP-113). The appending thread, with no append in progress. Raises
        ``OSError`` if the rename fails, ``KafkaStorageError`` if the log is offline."""
        with self._lock:
            self._check_online()
            os.replace(self.directory, directory)
            self.directory = directory
            for segment in (*self._view.segments, *(s for _, s in self._pending_deletes)):
                segment.relocate(directory)
            self.producer_state.relocate(directory)

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
        shutil.rmtree(self.directory)

    def delete(self) -> None:
        """Delete the partition where it is, now: close and remove every file, no flush."""
        self.detach(self.directory)
        self.delete_files()

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self._view.segments)})"
        )


def _marker_of(
    origin: str, header: BatchHeader, records: memoryview, position: int
) -> EndTxnMarker | None:
    """A control batch's marker: a coordinator's must be a known marker (else
    ``InvalidRecordError``); a replicated one is copied whatever it holds."""
    if not header.is_control:
        return None
    batch = records[position : position + header.size_in_bytes]
    if origin == AppendOrigin.REPLICATION:
        return marker_or_none(header, batch)
    return read_marker(header, batch)


def _assign_epoch(cache: LeaderEpochFileCache, epoch: int, start_offset: int) -> None:
    """A batch written in ``epoch`` starts at ``start_offset``: a new epoch if it is newer
    (batches without an epoch, -1, as written before leader epochs, count for none)."""
    if epoch >= 0:
        cache.assign(epoch, start_offset)


def _settle(waiters: list[Future[None]], outcome: BaseException | None) -> None:
    """Complete every waiter not cancelled meanwhile, with ``outcome`` (an error, or None)."""
    for waiter in waiters:
        with contextlib.suppress(InvalidStateError):  # cancelled by its caller
            if outcome is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(outcome)
