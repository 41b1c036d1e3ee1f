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
- ``high_watermark`` is a hook for replication: the broker moves it (for now to the LEO after each
  append); consumers read below it and retention never deletes data above it.

Concurrency: appends, reads and truncation run on one thread (the broker's event loop).
Retention and flushes may run on the log manager's upkeep thread, and the cleaner's
``replace_segments`` on its own; each takes ``self._lock`` for what it changes. Mutations of the
segment list publish a new immutable ``_Segments`` value, so a reader takes one consistent
snapshot without locking. A segment removed from the list is renamed ``.deleted`` and closed
only after ``file.delete.delay.ms``, so a ``FileSlice`` handed to the network stays readable.
"""

from __future__ import annotations

import bisect
import logging
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from odradek.config.topic import TopicConfig
from odradek.errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
)
from odradek.storage.batch import BatchHeader
from odradek.storage.checkpoint import is_legal_topic
from odradek.storage.index import CorruptIndexError
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.records import decode_records
from odradek.storage.segment import (
    LOG_SUFFIX,
    FileSlice,
    LogSegment,
)
from odradek.storage.validator import AppendOrigin, ValidatedRecords, validate_records

log = logging.getLogger(__name__)

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
LONG_MAX = (1 << 63) - 1

# Rewritten in each appended batch: base_offset, batch_length, partition_leader_epoch.
_LOG_PREFIX = struct.Struct(">qii")

# Special timestamps of ListOffsets, as Kafka defines them.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def log_directory_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``; raises ``ValueError`` for a name Kafka's rules refuse or a
    negative partition, which would name a directory elsewhere (``../x``) or one that loading
    does not recognise (callers validate first: this is the last guard before ``mkdir``)."""
    if not is_legal_topic(topic) or partition < 0:
        raise ValueError(f"no log directory for topic {topic!r} partition {partition}")
    return f"{topic}-{partition}"


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
    ):
        self.directory = Path(directory)
        self.config = config
        self.clock = clock
        self.on_io_error = on_io_error
        self.offline = False
        self._lock = threading.RLock()
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
            self._flush_segments(self._view.segments)  # what was re-validated is now durable
            self.recovery_point = self.log_end_offset
        else:
            self.recovery_point = min(max(recovery_point, 0), self.log_end_offset)
        self.high_watermark = self.log_end_offset
        if high_watermark is not None:
            self.update_high_watermark(high_watermark)
        self.producer_state = ProducerStateManager(self.directory)
        self.producer_state.load(self.log_start_offset, self.log_end_offset, self._headers_from)

    # -- loading and recovery ------------------------------------------------------------

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
            truncated = segment.recover(self.config.max_message_bytes + 1024)
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
            swapped.recover(LONG_MAX)
            for other in self.directory.glob(f"*{LOG_SUFFIX}"):
                other_base = int(other.name[:20])
                if base <= other_base < swapped.next_offset:
                    for suffix in (".log", ".index", ".timeindex"):
                        (self.directory / f"{other_base:020d}{suffix}").unlink(missing_ok=True)
            swapped.rename_with_suffix("")
            swapped.close()

    def _remove_orphan_indexes(self, bases: set[int]) -> None:
        for path in self.directory.iterdir():
            stem = path.name.split(".", 1)[0]
            if (
                path.suffix in (".index", ".timeindex")
                and stem.isdigit()
                and int(stem) not in bases
            ):
                path.unlink()

    # -- appending -----------------------------------------------------------------------

    def validate(
        self, records: bytes | bytearray | memoryview, *, origin: str = AppendOrigin.CLIENT
    ) -> ValidatedRecords:
        """Validate a record set against this log's configuration (``validator``).

        Safe on any thread: it reads only the configuration and the clock, so a caller may run
        it off the thread that appends. Raises as ``validate_records`` does.
        """
        return validate_records(records, self.config, origin=origin, now_ms=self.clock())

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        origin: str = AppendOrigin.CLIENT,
        leader_epoch: int | None = None,
    ) -> LogAppendInfo:
        """Validate a record set (one or more batches) and append it whole, or not at all."""
        return self.append_validated(
            self.validate(records, origin=origin), leader_epoch=leader_epoch
        )

    def append_validated(
        self, validated: ValidatedRecords, *, leader_epoch: int | None = None
    ) -> LogAppendInfo:
        """Append a record set that ``validate`` accepted: producer checks, offsets, write.

        Raises ``KafkaStorageError`` if the disk fails, after cutting the segment back to where
        it was, and the producer-state errors of ``ProducerStateManager.check``; nothing is
        written then.
        """
        if not validated.batches:
            return LogAppendInfo(-1, -1, -1, -1, -1, self.log_start_offset, 0, 0)
        origin = validated.origin
        with self._lock:
            self._check_online()
            if origin != AppendOrigin.REPLICATION:
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
            return self._write(
                validated.records,
                validated.batches,
                origin,
                leader_epoch,
                validated.log_append_time_ms,
            )

    def _write(
        self,
        view: memoryview,
        batches: tuple[tuple[int, BatchHeader], ...],
        origin: str,
        leader_epoch: int | None,
        log_append_time_ms: int,
    ) -> LogAppendInfo:
        """Assign offsets, roll if needed, write. Caller holds the lock."""
        next_offset = self.log_end_offset
        assigned: list[tuple[int, BatchHeader]] = []
        buffers: list[bytes | memoryview] = []
        max_timestamp, offset_of_max_timestamp = -1, -1
        records_count = 0
        for position, header in batches:
            if origin == AppendOrigin.REPLICATION:
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
            buffers.append(_LOG_PREFIX.pack(base_offset, header.batch_length, epoch))
            buffers.append(view[position + _LOG_PREFIX.size : position + header.size_in_bytes])
            assigned.append((base_offset, header))
            records_count += header.records_count
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
                offset_of_max_timestamp = next_offset - 1
        segment = self._maybe_roll(len(view), max_timestamp, next_offset - 1)
        try:
            segment.append(buffers, assigned)
        except OSError as e:
            self._io_error(e)
        for base_offset, header in assigned:
            self.producer_state.update(base_offset, header)
        self.log_end_offset = next_offset
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()
        return LogAppendInfo(
            first_offset=assigned[0][0],
            last_offset=next_offset - 1,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max_timestamp,
            log_append_time_ms=log_append_time_ms,
            log_start_offset=self.log_start_offset,
            records_count=records_count,
            valid_bytes=len(view),
            batches=tuple(assigned),
        )

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
            active = self._view.active
            if active.size == 0:
                return active
            active.on_roll()
            new = self._new_segment(self.log_end_offset, active=True)
            self._view = _Segments.of(self._view.segments + (new,))
            try:
                self.producer_state.take_snapshot(durable=False)
            except OSError as e:
                self._io_error(e)
            return new

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

    # -- offsets moved by others ---------------------------------------------------------

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
            return self.log_start_offset

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (a follower diverging from its new leader)."""
        with self._lock:
            if offset >= self.log_end_offset:
                return
            if offset < self.log_start_offset:
                raise OffsetOutOfRangeError(f"cannot truncate below log start {offset}")
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
            self.producer_state.load(self.log_start_offset, offset, self._headers_from)

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
            return count

    def _schedule_delete(self, segment: LogSegment) -> None:
        """Rename a segment's files ``.deleted``; close and remove them after the delay."""
        try:
            segment.rename_with_suffix(DELETED_SUFFIX)
        except OSError as e:
            self._io_error(e)
        self._pending_deletes.append((self.clock() + self.config.file_delete_delay_ms, segment))
        self.delete_expired_files()

    def delete_expired_files(self, force: bool = False) -> None:
        """Remove ``.deleted`` segments whose ``file.delete.delay.ms`` has passed."""
        now = self.clock()
        with self._lock:
            due = [s for t, s in self._pending_deletes if force or t <= now]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if s not in due]
        for segment in due:
            segment.delete()

    # -- compaction support --------------------------------------------------------------

    def segments(self) -> tuple[LogSegment, ...]:
        """A snapshot of the segments, oldest first; the last is active."""
        return self._view.segments

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> bool:
        """Swap ``old`` (contiguous, inactive) for ``new``, crash-safely; False if they changed.

        ``new`` holds the same offsets minus what compaction removed and is named after
        ``old[0]``. Rename order makes a crash at any point recoverable (see ``_load``): new
        files to ``.swap``, old ones to ``.deleted``, then ``.swap`` to the final names.
        """
        with self._lock:
            segments = self._view.segments
            try:
                first = segments.index(old[0])
            except ValueError:
                return False
            if segments[first : first + len(old)] != tuple(old) or first + len(old) >= len(
                segments
            ):
                return False
            new.rename_with_suffix(SWAP_SUFFIX)
            for segment in old:
                self._schedule_delete(segment)
            new.rename_with_suffix("")
            self._view = _Segments.of(segments[:first] + (new,) + segments[first + len(old) :])
            self._position_cache = None
            return True

    # -- durability ----------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: the LEO)."""
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        if target <= self.recovery_point:
            return
        view = self._view
        first = view.floor_index(self.recovery_point)
        self._flush_segments([s for s in view.segments[first:] if s.base_offset < target])
        with self._lock:
            self.recovery_point = max(self.recovery_point, target)
            self.last_flush_ms = self.clock()

    def _flush_segments(self, segments: list[LogSegment] | tuple[LogSegment, ...]) -> None:
        try:
            for segment in segments:
                segment.flush()
        except OSError as e:
            self._io_error(e)

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
        if self.offline:
            raise KafkaStorageError(f"log {self.directory} is offline after an I/O error")

    def _io_error(self, error: OSError) -> None:
        """An I/O error takes the log offline and is reported to the log manager."""
        self.offline = True
        if self.on_io_error is not None:
            self.on_io_error(self, error)
        raise KafkaStorageError(f"I/O error in {self.directory}: {error}") from error

    def update_config(self, config: TopicConfig) -> None:
        """Apply a new topic configuration (AlterConfigs); takes effect for later appends."""
        self.config = config

    def close(self) -> None:
        """Flush and close every file (a clean shutdown)."""
        with self._lock:
            if not self.offline:
                self.flush()
                self.producer_state.take_snapshot()
            self.delete_expired_files(force=True)
            for segment in self._view.segments:
                segment.close()

    def delete(self) -> None:
        """Delete the partition: close and remove every file and the directory."""
        with self._lock:
            self.delete_expired_files(force=True)
            for segment in self._view.segments:
                segment.delete()
            for path in self.directory.iterdir():
                path.unlink()
            self.directory.rmdir()

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self._view.segments)})"
        )
