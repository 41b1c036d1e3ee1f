"""Log compaction for ``cleanup.policy=compact``: keep the latest record of every key.

A compacted log has a clean head (already compacted) and a dirty tail (written since)::

    log_start  ...clean...  first_dirty  ...dirty...  first_uncleanable  ...active segment...

One pass over a log, as Kafka's cleaner does it:

1. Map every key in the dirty range to its latest offset (an in-memory ``OffsetMap``).
2. Rewrite the inactive segments from the log start up to where the map ends (at most
   ``first_uncleanable``) into new ones, dropping each record whose key has a later offset in
   the map, and tombstones (null values) in segments whose newest timestamp is older than
   ``delete.retention.ms``.
3. Swap each rewritten group of segments into the log (``Log.replace_segments``), crash-safely.

Invariants: offsets never change (compaction leaves gaps, readers step over them); a batch
keeps its base offset and its last offset (``last_offset_delta`` is preserved, as Kafka does,
so producer sequence numbers stay meaningful); a batch nothing was removed from is copied byte
for byte; the active segment and everything above the high watermark or newer than
``min.compaction.lag.ms`` is never touched.

Cleaning never blocks appends: it reads inactive segments and writes new files on its own
thread, and takes the log's lock only for the rename in ``replace_segments``. If retention or a
truncation changed the segments meanwhile, the swap is refused and the work thrown away.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.storage.batch import BatchHeader
from odradek.storage.log import CLEANED_SUFFIX, Log, wall_clock_ms
from odradek.storage.records import Record, decode_records, reencode_batch
from odradek.storage.segment import LogSegment

log = logging.getLogger(__name__)

# Soft bound on the keys held in memory in one pass (Kafka: log.cleaner.dedupe.buffer.size).
# The dirty range of a pass stops at the first segment that starts with the map this full.
OFFSET_MAP_MAX_ENTRIES = 2_000_000
CLEANER_BACKOFF_S = 15.0  # Kafka's log.cleaner.backoff.ms
TIME_ENTRY_BYTES = 12  # a .timeindex entry, the larger of the two: it bounds a cleaned segment


@dataclass(frozen=True, slots=True)
class CleanerStats:
    first_dirty_offset: int
    end_offset: int  # the new first dirty offset
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int


class LogCleaner:
    """Compacts logs; ``clean(log)`` does one pass, ``start()`` runs passes on a thread.

    ``logs`` returns the logs to consider (the log manager's); the cleaner keeps each log's
    first dirty offset in ``log.cleaner_checkpoint`` (the manager persists it, as Kafka's
    ``cleaner-offset-checkpoint``).
    """

    def __init__(
        self,
        logs: Callable[[], Iterable[Log]] = tuple,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        max_map_entries: int = OFFSET_MAP_MAX_ENTRIES,
        backoff_s: float = CLEANER_BACKOFF_S,
    ):
        self.logs = logs
        self.clock = clock
        self.max_map_entries = max_map_entries
        self.backoff_s = backoff_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one pass ------------------------------------------------------------------------

    def clean(self, target: Log) -> CleanerStats | None:
        """Compact ``target`` once; None if nothing is cleanable or the swap was refused."""
        if not target.config.compact or target.offline:
            return None
        segments = target.segments()[:-1]  # never the active segment
        first_uncleanable = self._first_uncleanable_offset(target, segments)
        first_dirty = first_dirty_offset(target)
        cleanable = [s for s in segments if s.next_offset <= first_uncleanable]
        if not cleanable or first_dirty >= cleanable[-1].next_offset:
            return None
        offset_map, end_offset = self._build_offset_map(cleanable, first_dirty)
        # Only what the map covers, as Kafka: past it a tombstone could go while an older value
        # of its key, unknown to the map, stays in the log.
        cleanable = [s for s in cleanable if s.next_offset <= end_offset]
        horizon_ms = self.clock() - target.config.delete_retention_ms
        stats_before = (len(cleanable), sum(s.size for s in cleanable))
        removed = 0
        after_count, after_bytes = 0, 0
        max_index_entries = target.config.segment_index_bytes // TIME_ENTRY_BYTES
        for group in _groups(cleanable, target.config.segment_bytes, max_index_entries):
            cleaned, group_removed = self._clean_group(target, group, offset_map, horizon_ms)
            if cleaned is None:  # nothing removed in this group: keep the originals
                after_count += len(group)
                after_bytes += sum(s.size for s in group)
                continue
            if not target.replace_segments(group, cleaned):
                cleaned.delete()
                log.info("cleaning of %s abandoned: its segments changed", target.directory)
                return None
            removed += group_removed
            after_count += 1
            after_bytes += cleaned.size
        target.cleaner_checkpoint = end_offset
        return CleanerStats(
            first_dirty_offset=first_dirty,
            end_offset=end_offset,
            segments_before=stats_before[0],
            segments_after=after_count,
            bytes_before=stats_before[1],
            bytes_after=after_bytes,
            records_removed=removed,
        )

    def _first_uncleanable_offset(self, target: Log, segments: tuple[LogSegment, ...]) -> int:
        """Below the active segment and the high watermark, and older than the compaction lag."""
        limit = min(target.segments()[-1].base_offset, target.high_watermark)
        lag_ms = target.config.min_compaction_lag_ms
        if lag_ms > 0:
            now = self.clock()
            for segment in segments:
                if now - segment.largest_timestamp < lag_ms:
                    limit = min(limit, segment.base_offset)
                    break
        return limit

    def _build_offset_map(
        self, segments: list[LogSegment], first_dirty: int
    ) -> tuple[dict[bytes, int], int]:
        """Latest offset of each key in the dirty range; returns the map and where it stops."""
        offset_map: dict[bytes, int] = {}
        end_offset = first_dirty
        for segment in segments:
            if segment.next_offset <= first_dirty:
                continue
            if len(offset_map) >= self.max_map_entries:
                break
            for record in _records(segment, first_dirty):
                if record.key is not None:
                    offset_map[record.key] = record.offset
            end_offset = segment.next_offset
        return offset_map, end_offset

    def _clean_group(
        self,
        target: Log,
        group: list[LogSegment],
        offset_map: dict[bytes, int],
        horizon_ms: int,
    ) -> tuple[LogSegment | None, int]:
        """Rewrite ``group`` into one ``.cleaned`` segment; (None, 0) if nothing would change."""
        cleaned = LogSegment(
            target.directory,
            group[0].base_offset,
            index_interval_bytes=target.config.index_interval_bytes,
            max_index_bytes=target.config.segment_index_bytes,
            active=True,
            created_ms=self.clock(),
            suffix=CLEANED_SUFFIX,
        )
        removed = 0
        try:
            for segment in group:
                drop_tombstones = segment.largest_timestamp < horizon_ms
                for position, header in segment.batches_from(0):
                    data = segment.read_batch_bytes(position, header)
                    kept, dropped = _retained(data, header, offset_map, drop_tombstones)
                    removed += dropped
                    if kept is not None:
                        cleaned.append([kept], [(header.base_offset, BatchHeader.parse(kept))])
            if removed == 0:
                cleaned.delete()
                return None, 0
            cleaned.on_roll()
            cleaned.flush()
            return cleaned, removed
        except BaseException:
            cleaned.delete()
            raise

    # -- the cleaner thread --------------------------------------------------------------

    def clean_dirtiest(self) -> CleanerStats | None:
        """Clean the compacted log with the highest dirty ratio above its threshold.

        A log whose dirty bytes cannot be cleaned yet (``min.compaction.lag.ms``, the high
        watermark) gives way to the next one instead of starving the others.
        """
        candidates = [
            (ratio, candidate)
            for candidate in self.logs()
            if candidate.config.compact and not candidate.offline
            if (ratio := dirty_ratio(candidate)) >= candidate.config.min_cleanable_dirty_ratio
        ]
        candidates.sort(key=lambda pair: pair[0], reverse=True)
        for _, candidate in candidates:
            stats = self.clean(candidate)
            if stats is not None:
                return stats
        return None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="log-cleaner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.clean_dirtiest() is None:
                    self._stop.wait(self.backoff_s)
            except Exception:  # a bad log must not stop cleaning of the others
                log.exception("log cleaner pass failed")
                self._stop.wait(self.backoff_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)


def dirty_ratio(target: Log) -> float:
    """Bytes written since the last cleaning over all inactive bytes, as Kafka measures it."""
    first_dirty = first_dirty_offset(target)
    inactive = target.segments()[:-1]
    total = sum(s.size for s in inactive)
    dirty = sum(s.size for s in inactive if s.base_offset >= first_dirty)
    return dirty / total if total else 0.0


def first_dirty_offset(target: Log) -> int:
    """Where cleaning resumes: the checkpoint, or the log start if it lies outside the log.

    As Kafka: a checkpoint beyond the log end (a truncation, a torn tail cut off by recovery)
    would leave the data written again below it uncleaned, so the whole log counts as dirty.
    """
    checkpoint = target.cleaner_checkpoint
    if checkpoint < target.log_start_offset or checkpoint > target.log_end_offset:
        return target.log_start_offset
    return checkpoint


def _groups(
    segments: list[LogSegment], max_bytes: int, max_index_entries: int
) -> Iterable[list[LogSegment]]:
    """Consecutive segments whose output fits one segment (at least one segment per group).

    Bounded by ``segment.bytes``, by 32-bit relative offsets, and by the index entries the
    cleaned segment may need: merged, each segment may need one entry more than it had alone.
    """
    group: list[LogSegment] = []
    size = 0
    entries = 0
    for segment in segments:
        fits_offsets = not group or segment.next_offset - group[0].base_offset <= (1 << 31) - 1
        needed = max(segment.offset_index.entries, segment.time_index.entries) + 1
        if group and (
            size + segment.size > max_bytes
            or entries + needed >= max_index_entries
            or not fits_offsets
        ):
            yield group
            group, size, entries = [], 0, 0
        group.append(segment)
        size += segment.size
        entries += needed
    if group:
        yield group


def _records(segment: LogSegment, from_offset: int) -> Iterable[Record]:
    for position, header in segment.batches_from(0):
        if header.last_offset < from_offset or header.is_control:
            continue
        for record in decode_records(segment.read_batch_bytes(position, header)):
            if record.offset >= from_offset:
                yield record


def _retained(
    data: bytes, header: BatchHeader, offset_map: dict[bytes, int], drop_tombstones: bool
) -> tuple[bytes | None, int]:
    """The batch with superseded records (and expired tombstones) removed; and how many went."""
    if header.is_control:
        return data, 0
    records = decode_records(data)
    kept = [
        r
        for r in records
        if (r.key is None or offset_map.get(r.key, -1) <= r.offset)
        and not (drop_tombstones and r.value is None)
    ]
    dropped = len(records) - len(kept)
    if dropped == 0:
        return data, 0
    if not kept:
        return None, dropped
    return reencode_batch(header, kept), dropped
