"""Log compaction for ``cleanup.policy=compact``: keep the latest record of every key.

A compacted log has a clean head (already compacted) and a dirty tail (written since)::

    log_start  ...clean...  first_dirty  ...dirty...  first_uncleanable  ...active segment...

One pass over a log, as Kafka's cleaner does it:

1. Map every key in the dirty range to its latest offset (an in-memory ``OffsetMap``).
2. Rewrite the inactive segments from the log start up to where the map ends (at most
   ``first_uncleanable``) into new ones, dropping each record whose key has a later offset in
   the map, and tombstones (null values) whose delete horizon has passed.
3. Swap each rewritten group of segments into the log (``Log.replace_segments``), crash-safely.

Tombstones follow KIP-534's delete horizon: a tombstone's age counts from when the cleaner
first kept it (by then every older record of its key is gone), not from the record's
CreateTime, which a producer sets as it likes. The first pass that keeps a batch holding
tombstones rewrites it with the delete-horizon attribute bit (``DELETE_HORIZON_MASK``) set and
``base_timestamp = now + delete.retention.ms``; record timestamp deltas are taken from that base,
so every record keeps its timestamp for consumers. A later pass drops the batch's tombstones
once ``now >= base_timestamp``. To make that later pass happen on a log nobody writes to, the
cleaner remembers each log's earliest pending horizon and treats the log as cleanable once it
has passed, whatever its dirty ratio. After a restart it reads the horizons back from the batch
headers. Unlike Kafka (which keeps the bit once set), a batch rewritten with no tombstone left
loses the bit, so that a header with the bit always means tombstones are waiting.

Transactions, as Kafka's cleaner (``cleaned_txns.CleanedTransactions``): the batches of ABORTED
transactions (known from the ``.txnindex`` entries) never enter the offset map, since they
supersede nothing, and are dropped; committed transactional data is compacted like any data.
A marker is kept while a pass still sees data of its transaction (a pass that removes the
last of it counts the log as due again, so the next pass comes by itself); once a pass sees
none, the marker gets a delete horizon as a tombstone does (the same attribute bit and base
timestamp) and a later pass past the horizon drops it, ``delete.retention.ms`` later at least.
A marker that is the last batch of a producer still active is kept whatever its age (it holds
the producer's epoch, as Kafka's ``isBatchLastRecordOfProducer``). A cleaned segment's
``.txnindex`` holds only the entries of the ABORT markers it keeps whose data the pass removed
(the next pass drops them with the marker's horizon: nothing is left for a read_committed
fetch to filter). Cleaning stops at the last stable offset: no open transaction is judged.

Invariants: offsets never change (compaction leaves gaps, readers step over them); a batch
keeps its base offset and its last offset (``last_offset_delta`` is preserved, as Kafka does,
so producer sequence numbers stay meaningful); a batch nothing was removed from and that needs
no delete horizon is copied byte for byte; the active segment and everything above the last
stable offset or newer than ``min.compaction.lag.ms`` is never touched.

Cleaning never blocks appends: it reads inactive segments through descriptors of its own
(``Log.segment_reader``) and writes new files on its own thread, and takes the log's lock only
for the renames in ``replace_segments``. If retention, a truncation or a deletion changed the
segments meanwhile, the pass is abandoned and its work thrown away. An ``OSError`` while
cleaning takes the log's directory offline, as in Kafka, unless the log was deleted under the
pass (its files are going anyway).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from odradek.common.clock import wall_clock_ms
from odradek.errors import KafkaStorageError
from odradek.storage.batch import DELETE_HORIZON_MASK, BatchHeader, with_delete_horizon
from odradek.storage.cleaned_txns import CleanedTransactions
from odradek.storage.control import marker_or_none
from odradek.storage.log import Log
from odradek.storage.producer_state import ActiveProducer
from odradek.storage.records import Record, decode_records, reencode_batch
from odradek.storage.segment import LogSegment, SegmentReader
from odradek.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

# Soft bound on the keys held in memory in one pass (Kafka: log.cleaner.dedupe.buffer.size).
# The dirty range of a pass stops at the first segment that starts with the map this full.
OFFSET_MAP_MAX_ENTRIES = 2_000_000
CLEANER_BACKOFF_S = 15.0  # Kafka's log.cleaner.backoff.ms
TIME_ENTRY_BYTES = 12  # a .timeindex entry, the larger of the two: it bounds a cleaned segment
NO_HORIZON = (1 << 63) - 1  # a log with no tombstone waiting for its delete horizon


@dataclass(frozen=True, slots=True)
class CleanerStats:
    first_dirty_offset: int
    end_offset: int  # the new first dirty offset
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int


class _Abandoned(Exception):
    """The log's segments changed under the pass (retention, truncation, deletion)."""


class LogCleaner:
    """Compacts logs; ``clean(log)`` does one pass, ``start()`` runs passes on a thread.

    ``logs`` returns the logs to consider (the log manager's); the cleaner keeps each log's
    first dirty offset in ``log.cleaner_checkpoint`` (the manager persists it, as Kafka's
    ``cleaner-offset-checkpoint``), and each log's earliest pending delete horizon in memory.
    One thread at a time: the cleaner thread, or a test calling ``clean``.
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
        # The earliest delete horizon of a tombstone kept in each log (NO_HORIZON: none).
        self._horizons: weakref.WeakKeyDictionary[Log, int] = weakref.WeakKeyDictionary()

    # -- one pass ------------------------------------------------------------------------

    def clean(self, target: Log) -> CleanerStats | None:
        """Compact ``target`` once; None if nothing is cleanable or the pass was abandoned."""
        if not target.config.compact or target.offline or target.deleted:
            return None
        try:
            return self._clean(target)
        except _Abandoned:
            log.info("cleaning of %s abandoned: its segments changed", target.directory)
        except KafkaStorageError as e:  # the log already took its directory offline
            log.error("cleaning of %s failed: %s", target.directory, e)
        except OSError as e:
            # EBADF is a descriptor closed under the pass, a race and not the disk's fault;
            # so is anything that goes wrong in a log deleted under it.
            if target.deleted or e.errno == errno.EBADF:
                log.info("cleaning of %s abandoned: %s", target.directory, e)
            else:
                log.error("I/O error while cleaning %s: %s", target.directory, e)
                target.report_io_error(e)
        return None

    def _clean(self, target: Log) -> CleanerStats | None:
        now_ms = self.clock()
        segments = target.segments()[:-1]  # never the active segment
        first_uncleanable = self._first_uncleanable_offset(target, segments, now_ms)
        first_dirty = first_dirty_offset(target)
        cleanable = [s for s in segments if s.next_offset <= first_uncleanable]
        if not cleanable:
            return None
        if first_dirty >= cleanable[-1].next_offset and not self.tombstones_due(target, now_ms):
            return None
        offset_map, end_offset = self._build_offset_map(target, cleanable, first_dirty)
        # Only what the map covers, as Kafka: past it a tombstone could go while an older value
        # of its key, unknown to the map, stays in the log. With no dirty range (a pass for
        # tombstones whose horizon passed) that is the clean head.
        cleanable = [s for s in cleanable if s.next_offset <= end_offset]
        txns = CleanedTransactions(
            target.collect_aborted_transactions(cleanable[0].base_offset, end_offset)
            if cleanable
            else []
        )
        producers = target.active_producers()
        new_horizon_ms = min(now_ms + target.config.delete_retention_ms, NO_HORIZON)
        stats_before = (len(cleanable), sum(s.size for s in cleanable))
        removed = 0
        after_count, after_bytes = 0, 0
        pending_horizons: list[int] = []
        max_index_entries = target.config.segment_index_bytes // TIME_ENTRY_BYTES
        for group in _groups(cleanable, target.config.segment_bytes, max_index_entries):
            cleaned, group_removed, horizons = self._clean_group(
                target, group, _Pass(offset_map, now_ms, new_horizon_ms, txns, producers)
            )
            pending_horizons += horizons
            if cleaned is None:  # nothing changed in this group: keep the originals
                after_count += len(group)
                after_bytes += sum(s.size for s in group)
                continue
            if not target.replace_segments(group, cleaned):
                target.discard_cleaned_segment(cleaned)
                raise _Abandoned
            removed += group_removed
            after_count += 1
            after_bytes += cleaned.size
        target.cleaner_checkpoint = end_offset
        if txns.markers_pending:  # the next pass gives those markers their horizon
            pending_horizons.append(now_ms)
        self._horizons[target] = min(pending_horizons, default=NO_HORIZON)
        return CleanerStats(
            first_dirty_offset=first_dirty,
            end_offset=end_offset,
            segments_before=stats_before[0],
            segments_after=after_count,
            bytes_before=stats_before[1],
            bytes_after=after_bytes,
            records_removed=removed,
        )

    def tombstones_due(self, target: Log, now_ms: int) -> bool:
        """Whether a tombstone or marker kept in ``target`` reached its delete horizon
        (KIP-534), or a marker kept by the last pass awaits its horizon.

        Keeps a log cleanable while it holds tombstones waiting for their horizon, as Kafka
        does: otherwise a log nobody writes to would keep them for ever.
        """
        horizon = self._horizons.get(target)
        if horizon is None:  # first sight of this log since the start: read the headers
            found = self._scan_horizons(target)
            if found is None:
                return False
            horizon = self._horizons[target] = found
        return now_ms >= horizon

    def _scan_horizons(self, target: Log) -> int | None:
        """The earliest delete horizon in the inactive segments' batch headers (None: the
        segments changed while reading)."""
        earliest = NO_HORIZON
        for segment in target.segments()[:-1]:
            with _reading(target, segment) as reader:
                for _, header in reader.batches_from(0):
                    if header.attributes & DELETE_HORIZON_MASK:
                        earliest = min(earliest, header.base_timestamp)
        return earliest

    def _first_uncleanable_offset(
        self, target: Log, segments: tuple[LogSegment, ...], now_ms: int
    ) -> int:
        """Below the active segment and the last stable offset (so at most the high watermark:
        no record of a transaction still open is judged), older than the compaction lag."""
        limit = min(target.segments()[-1].base_offset, target.last_stable_offset)
        lag_ms = target.config.min_compaction_lag_ms
        if lag_ms > 0:
            for segment in segments:
                if now_ms - segment.largest_timestamp < lag_ms:
                    limit = min(limit, segment.base_offset)
                    break
        return limit

    def _build_offset_map(
        self, target: Log, segments: list[LogSegment], first_dirty: int
    ) -> tuple[dict[bytes, int], int]:
        """Latest offset of each key in the dirty range; returns the map and where it stops."""
        offset_map: dict[bytes, int] = {}
        end_offset = first_dirty
        # Records of aborted transactions never supersede anything: read_committed consumers
        # skip them, so a committed value they replaced in the map would be lost.
        aborted = _aborted_by_producer(
            target.collect_aborted_transactions(first_dirty, segments[-1].next_offset)
            if segments
            else []
        )
        for segment in segments:
            if segment.next_offset <= first_dirty:
                continue
            if len(offset_map) >= self.max_map_entries:
                break
            with _reading(target, segment) as reader:
                for record in _records(reader, first_dirty, aborted):
                    if record.key is not None:
                        offset_map[record.key] = record.offset
            end_offset = segment.next_offset
        return offset_map, end_offset

    def _clean_group(
        self, target: Log, group: list[LogSegment], state: _Pass
    ) -> tuple[LogSegment | None, int, list[int]]:
        """Rewrite ``group`` into one ``.cleaned`` segment.

        Returns it (None if nothing would change), the records removed, and the delete
        horizons of the batches it keeps with tombstones or discardable markers. The cleaned
        segment's ``.txnindex`` holds the entries of the ABORT markers kept by this pass.
        """
        cleaned = target.new_cleaned_segment(group[0].base_offset, self.clock())
        if cleaned is None:
            raise _Abandoned
        removed = 0
        changed = False
        horizons: list[int] = []
        entries_before = len(state.txns.retained_entries)
        try:
            for segment in group:
                with _reading(target, segment) as reader:
                    for position, header in reader.batches_from(0):
                        data = reader.read_batch_bytes(position, header)
                        kept = _retained(data, header, state)
                        removed += kept.dropped
                        changed |= kept.rewritten or kept.data is None
                        if kept.horizon_ms is not None:
                            horizons.append(kept.horizon_ms)
                        if kept.data is not None:
                            cleaned.append(
                                [kept.data], [(header.base_offset, BatchHeader.parse(kept.data))]
                            )
            entries = state.txns.retained_entries[entries_before:]
            changed |= entries != [e for s in group for e in s.txn_index.entries]
            if not changed:
                target.discard_cleaned_segment(cleaned)
                return None, 0, horizons
            for entry in entries:
                cleaned.txn_index.append(entry)
            cleaned.on_roll()
            cleaned.flush()
            return cleaned, removed, horizons
        except BaseException:
            target.discard_cleaned_segment(cleaned)
            raise

    # -- the cleaner thread --------------------------------------------------------------

    def clean_dirtiest(self) -> CleanerStats | None:
        """Clean the compacted log with the highest dirty ratio above its threshold.

        A log below its threshold whose tombstones reached their delete horizon is cleaned
        too, after the others. A log whose dirty bytes cannot be cleaned yet
        (``min.compaction.lag.ms``, the high watermark) gives way to the next one instead of
        starving the others.
        """
        now_ms = self.clock()
        candidates = [
            (ratio, candidate)
            for candidate in self.logs()
            if candidate.config.compact and not candidate.offline and not candidate.deleted
            if (ratio := dirty_ratio(candidate)) >= candidate.config.min_cleanable_dirty_ratio
            or self._tombstones_due_quietly(candidate, now_ms)
        ]
        candidates.sort(key=lambda pair: pair[0], reverse=True)
        for _, candidate in candidates:
            stats = self.clean(candidate)
            if stats is not None:
                return stats
        return None

    def _tombstones_due_quietly(self, target: Log, now_ms: int) -> bool:
        """``tombstones_due``, with a log that cannot be read counted as not due (``clean``
        reports its errors when it gets to it)."""
        try:
            return self.tombstones_due(target, now_ms)
        except (_Abandoned, KafkaStorageError, OSError):
            return False

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


@contextlib.contextmanager
def _reading(target: Log, segment: LogSegment) -> Iterator[SegmentReader]:
    """``segment`` read through the cleaner's own descriptor; ``_Abandoned`` if it left the log."""
    reader = target.segment_reader(segment)
    if reader is None:
        raise _Abandoned
    with reader:
        yield reader


def _aborted_by_producer(txns: list[AbortedTxn]) -> dict[int, list[tuple[int, int]]]:
    ranges: dict[int, list[tuple[int, int]]] = {}
    for txn in txns:
        ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return ranges


def _is_aborted(header: BatchHeader, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    if not header.is_transactional or header.producer_id not in aborted:
        return False
    return any(first <= header.base_offset <= last for first, last in aborted[header.producer_id])


def _records(
    reader: SegmentReader, from_offset: int, aborted: dict[int, list[tuple[int, int]]]
) -> Iterator[Record]:
    for position, header in reader.batches_from(0):
        if header.last_offset < from_offset or header.is_control or _is_aborted(header, aborted):
            continue
        for record in decode_records(reader.read_batch_bytes(position, header)):
            if record.offset >= from_offset:
                yield record


class Retained(NamedTuple):
    """What a pass keeps of one batch."""

    data: bytes | None  # the batch to write, or None if nothing of it is kept
    dropped: int  # records removed
    rewritten: bool  # ``data`` differs from the original bytes
    horizon_ms: int | None  # the kept batch's delete horizon (tombstones or a marker waiting)


class _Pass(NamedTuple):
    """What every batch of a pass is judged against."""

    offset_map: dict[bytes, int]
    now_ms: int
    new_horizon_ms: int
    txns: CleanedTransactions
    producers: dict[int, ActiveProducer]


def _retained(data: bytes, header: BatchHeader, state: _Pass) -> Retained:
    """The batch without superseded records, aborted data, tombstones or markers past their
    horizon.

    A batch that keeps tombstones and had no delete horizon gets one (``new_horizon_ms``);
    one that keeps its horizon keeps it; one left without tombstones loses it.
    """
    if header.is_control:
        return _retained_marker(data, header, state)
    records = decode_records(data)
    if state.txns.on_data_batch(header):  # an aborted transaction's: never read_committed
        return Retained(None, len(records), True, None)
    horizon_ms = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
    tombstones_expired = horizon_ms is not None and state.now_ms >= horizon_ms
    offset_map = state.offset_map
    kept = [
        r
        for r in records
        if (r.key is None or offset_map.get(r.key, -1) <= r.offset)
        and not (tombstones_expired and r.value is None)
    ]
    dropped = len(records) - len(kept)
    if not kept:
        return Retained(None, dropped, True, None)
    state.txns.on_data_kept(header)
    if any(r.value is None for r in kept):
        kept_horizon_ms = state.new_horizon_ms if horizon_ms is None else horizon_ms
    else:
        kept_horizon_ms = None
    if dropped == 0 and kept_horizon_ms == horizon_ms:
        return Retained(data, 0, False, kept_horizon_ms)
    return Retained(_encode(header, kept, kept_horizon_ms), dropped, True, kept_horizon_ms)


def _retained_marker(data: bytes, header: BatchHeader, state: _Pass) -> Retained:
    """A marker is kept while its transaction has data, then gets a horizon, then goes."""
    discardable = state.txns.on_marker(header, marker_or_none(header, data))
    last = state.producers.get(header.producer_id)
    if (
        last is not None
        and last.last_data_offset is None
        and last.producer_epoch == header.producer_epoch
    ):
        discardable = False  # the producer's epoch lives in this marker alone
    if not discardable:
        return Retained(data, 0, False, None)
    if header.attributes & DELETE_HORIZON_MASK:
        if state.now_ms >= header.base_timestamp:
            return Retained(None, header.records_count, True, None)
        return Retained(data, 0, False, header.base_timestamp)
    horizon_ms = state.new_horizon_ms
    return Retained(_encode(header, decode_records(data), horizon_ms), 0, True, horizon_ms)


def _encode(header: BatchHeader, records: list[Record], horizon_ms: int | None) -> bytes:
    """``records`` as a batch with ``header``'s identity, and the delete horizon if given.

    With a horizon the base timestamp is the horizon and each record's timestamp delta is taken
    from it (Kafka's ``MemoryRecordsBuilder`` with a delete horizon), so record timestamps do
    not change.
    """
    if horizon_ms is None:
        return reencode_batch(header, records)
    return with_delete_horizon(reencode_batch(header, records, base_timestamp=horizon_ms))
