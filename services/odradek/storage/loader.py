"""Loading one partition's log from its directory, recovering what a crash tore: a value out.

``load_log`` is Kafka's ``LogLoader``: it reads a partition directory and returns a
``LoadedLogOffsets`` (the segments, the log start offset, the log end offset, the recovery
point, the high watermark, the producer state and the leader-epoch cache), from which ``Log``
is built. It needs no ``Log``, so it is tested alone (``tests/unit/storage/test_loader.py``).

What it does to the directory (file names in ``files``), in this order:

1. Leftovers of interrupted work are settled: ``.deleted`` and ``.cleaned`` files go, and a
   ``.swap`` segment (a cleaner's finished output) replaces the segments it covers, as Kafka
   does; index files without their ``.log`` go.
2. The segments are opened. After a clean shutdown every segment trusts its indexes; else every
   segment from the one holding the recovery point on is re-validated batch by batch (and any
   segment whose indexes are corrupt is rebuilt). The first torn or invalid batch truncates its
   segment there and deletes every later segment. An empty segment before the last stays (as
   in Kafka: compaction leaves one, and dropping it would move the log start forward).
3. What was re-validated (and the renames and truncations that did it) is fsynced, with the
   directory; the recovery point is then the log end offset.
4. The producer state is rebuilt from its newest usable ``.snapshot`` and a replay of the log
   after it (after an unclean shutdown from at or below the recovery point, so that every
   aborted-transaction entry that may not have reached the disk is written again).
5. The leader-epoch cache is read from ``leader-epoch-checkpoint`` and checked against the
   batches: every entry must match the batch holding its start offset, else it is rebuilt from
   every batch header (as with a missing or corrupt file); then newer epochs are found by
   bisecting the log after the latest entry (epochs never decrease along a log). The file is
   written at once if it had to change.

Invariants of the value: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset``,
``recovery_point`` <= ``log_end_offset``, at least one segment, the last one writable.

An I/O error on the way goes to ``report_io_error`` and raises ``KafkaStorageError``
(``io_errors``). Threads: one loading thread, before any other thread knows the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.config.topic import TopicConfig
from odradek.storage.checkpoint import CorruptCheckpointError
from odradek.storage.file_ops import OS_FILE_OPS, FileOps, unlink_if_exists
from odradek.storage.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_FILE_SUFFIXES,
    SEGMENT_INDEX_SUFFIXES,
    SWAP_SUFFIX,
    offset_file_name,
)
from odradek.storage.flusher import FSYNC_BATCH_SEGMENTS, fsync_and_close, open_fsync_handles
from odradek.storage.index import CorruptIndexError
from odradek.storage.io_errors import disk_errors
from odradek.storage.leader_epoch import LeaderEpochCheckpointFile, LeaderEpochFileCache
from odradek.storage.log_segments import LogSegments
from odradek.storage.producer_state import CompletedTxn, ProducerStateManager
from odradek.storage.segment import LogSegment
from odradek.storage.txn_index import AbortedTxn

__all__ = ["LoadedLogOffsets", "load_log", "rebuild_producer_state"]

# The loader's warnings are the log's: operators grep one logger for recovery.
log = logging.getLogger("odradek.storage.log")


@dataclass(frozen=True, slots=True)
class LoadedLogOffsets:
    """What ``load_log`` found and recovered; see the module docstring for its invariants."""

    segments: LogSegments
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    high_watermark: int
    producer_state: ProducerStateManager
    # Transactions ended by a marker at or above the high watermark (``Log`` keeps them).
    unreplicated_txns: tuple[CompletedTxn, ...]
    leader_epoch_cache: LeaderEpochFileCache
    recovered: bool  # whether any segment was re-validated


def load_log(
    directory: Path,
    config: TopicConfig,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    high_watermark: int | None = None,
    clean_shutdown: bool = False,
    clock: Callable[[], int],
    report_io_error: Callable[[OSError], object],
    file_ops: FileOps = OS_FILE_OPS,
) -> LoadedLogOffsets:
    """Open the log in ``directory`` (which exists); see the module docstring.

    ``recovery_point``, ``log_start_offset`` and ``high_watermark`` are the log manager's
    checkpointed values, clamped here to what the directory holds. Every change to the
    directory goes through ``file_ops``, and so do those of the segments, producer state and
    leader-epoch checkpoint it returns.
    """

    def disk(cleanup: Callable[[], object] | None = None) -> disk_errors:
        return disk_errors(
            report_io_error, raise_as=lambda: f"I/O error in {directory}", cleanup=cleanup
        )

    def new_segment(base_offset: int, *, active: bool, suffix: str = "") -> LogSegment:
        return LogSegment(
            directory,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            active=active,
            created_ms=clock(),
            suffix=suffix,
            file_ops=file_ops,
        )

    segments, recovered = _load_segments(
        directory, new_segment, recovery_point, clean_shutdown, file_ops
    )
    view = LogSegments.of(segments)
    log_end_offset = view.active.next_offset
    log_start_offset = min(max(log_start_offset, view.segments[0].base_offset), log_end_offset)
    if recovered:
        # What was re-validated (and the renames and truncations that did it) is now durable.
        _fsync_all(view.segments, directory, disk, file_ops)
        recovery_point = log_end_offset
    else:
        recovery_point = min(max(recovery_point, 0), log_end_offset)
    # Restored from replication-offset-checkpoint; without it nothing is known to be
    # committed (a follower must not claim its whole log). A leader alone in its ISR moves
    # it to its LEO itself.
    loaded_high_watermark = log_start_offset
    if high_watermark is not None:
        loaded_high_watermark = min(max(high_watermark, log_start_offset), log_end_offset)
    producer_state = ProducerStateManager(directory, file_ops)
    # After an unclean shutdown the replay starts at or below the recovery point, so that it
    # rebuilds every aborted-transaction entry that may not have reached the disk.
    unreplicated_txns = rebuild_producer_state(
        producer_state,
        view,
        log_start_offset,
        log_end_offset,
        loaded_high_watermark,
        max_snapshot_offset=None if clean_shutdown else recovery_point,
    )
    cache = _load_leader_epoch_cache(
        directory, view, log_start_offset, log_end_offset, disk, file_ops
    )
    return LoadedLogOffsets(
        segments=view,
        log_start_offset=log_start_offset,
        log_end_offset=log_end_offset,
        recovery_point=recovery_point,
        high_watermark=loaded_high_watermark,
        producer_state=producer_state,
        unreplicated_txns=unreplicated_txns,
        leader_epoch_cache=cache,
        recovered=recovered,
    )


def rebuild_producer_state(
    producer_state: ProducerStateManager,
    view: LogSegments,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    *,
    max_snapshot_offset: int | None = None,
) -> tuple[CompletedTxn, ...]:
    """Rebuild the producer state, and the aborted-transaction entries of what it replays:
    those of markers at or above the replay's start are dropped and written again. Returns the
    transactions whose marker is at or above the high watermark (they hold the LSO).

    At load, and at a truncation under the log's lock (``Log.truncate_to``)."""
    completed: list[CompletedTxn] = []
    start = producer_state.load(
        log_start_offset,
        log_end_offset,
        view.replay_from,
        max_snapshot_offset=max_snapshot_offset,
        on_completed=completed.append,
    )
    for segment in view.segments[view.floor_index(start) :]:
        segment.txn_index.truncate_to(start)
    unreplicated = tuple(
        t for t in completed if t.last_offset >= min(high_watermark, log_end_offset)
    )
    for txn in completed:
        if txn.is_aborted:
            view.segments[view.floor_index(txn.last_offset)].txn_index.append(
                AbortedTxn(
                    txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
                )
            )
    return unreplicated


# -- segments ---------------------------------------------------------------------------

NewSegment = Callable[..., LogSegment]


def _load_segments(
    directory: Path,
    new_segment: NewSegment,
    recovery_point: int,
    clean_shutdown: bool,
    file_ops: FileOps,
) -> tuple[list[LogSegment], bool]:
    """Open the segments on disk, recovering what an unclean shutdown may have torn.

    Returns the segments and whether any were re-validated (steps 1 and 2 of the module
    docstring).
    """
    for path in directory.iterdir():
        if path.name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
            file_ops.unlink(path)
    _complete_swaps(directory, new_segment, file_ops)
    bases = sorted(
        int(p.name[: -len(LOG_SUFFIX)])
        for p in directory.iterdir()
        if p.name.endswith(LOG_SUFFIX) and p.name[: -len(LOG_SUFFIX)].isdigit()
    )
    _remove_orphan_indexes(directory, set(bases), file_ops)
    if not bases:
        return [new_segment(0, active=True)], False
    segments = [new_segment(b, active=(b == bases[-1])) for b in bases]
    recover_from = (
        len(segments) if clean_shutdown else LogSegments.of(segments).floor_index(recovery_point)
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


def _complete_swaps(directory: Path, new_segment: NewSegment, file_ops: FileOps) -> None:
    for path in sorted(directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
        base = int(path.name[:20])
        swapped = new_segment(base, active=False, suffix=SWAP_SUFFIX)
        swapped.recover()
        for other in directory.glob(f"*{LOG_SUFFIX}"):
            other_base = int(other.name[:20])
            if base <= other_base < swapped.next_offset:
                for suffix in SEGMENT_FILE_SUFFIXES:
                    unlink_if_exists(file_ops, directory / offset_file_name(other_base, suffix))
        swapped.rename_with_suffix("")
        swapped.close()


def _remove_orphan_indexes(directory: Path, bases: set[int], file_ops: FileOps) -> None:
    for path in directory.iterdir():
        stem = path.name.split(".", 1)[0]
        if path.suffix in SEGMENT_INDEX_SUFFIXES and stem.isdigit() and int(stem) not in bases:
            file_ops.unlink(path)


def _fsync_all(
    segments: tuple[LogSegment, ...],
    directory: Path,
    disk: Callable[..., disk_errors],
    file_ops: FileOps,
) -> None:
    """fsync every segment and then the directory, ``FSYNC_BATCH_SEGMENTS`` at a time."""
    for first in range(0, len(segments), FSYNC_BATCH_SEGMENTS):
        chunk = segments[first : first + FSYNC_BATCH_SEGMENTS]
        last = first + FSYNC_BATCH_SEGMENTS >= len(segments)
        handles = open_fsync_handles(chunk, directory if last else None, disk)
        fsync_and_close(handles, disk, file_ops)


# -- leader epochs -----------------------------------------------------------------------


def _load_leader_epoch_cache(
    directory: Path,
    view: LogSegments,
    log_start_offset: int,
    log_end_offset: int,
    disk: Callable[..., disk_errors],
    file_ops: FileOps,
) -> LeaderEpochFileCache:
    """The leader-epoch cache, from ``leader-epoch-checkpoint`` checked against the batches.

    The file is written off the appending thread, so a crash can leave it behind the log:
    entries past the LEO (truncated away by recovery, or by a replica's truncation the file
    had not seen), or epochs appended since. So each entry must match the batch holding its
    start offset, else the cache is rebuilt from every batch header; then the log after the
    latest entry is searched for newer epochs. A missing or corrupt file means a rebuild.
    Writes the file at once (on the loading thread) if it had to change.
    """
    checkpoint = LeaderEpochCheckpointFile(directory, file_ops)
    try:
        entries = checkpoint.read()
        corrupt = False
    except CorruptCheckpointError as e:
        log.warning("rebuilding the leader epoch cache from the log: %s", e)
        entries, corrupt = None, True
    # A missing file with no epoch in the log stays missing: a new log writes nothing.
    cache = LeaderEpochFileCache(checkpoint, entries or (), written=not corrupt)
    cache.truncate_from_end(log_end_offset)
    cache.truncate_from_start(log_start_offset)
    if entries is not None and not all(
        _epoch_starts_at(view, e.epoch, e.start_offset) for e in cache.entries()
    ):
        log.warning(
            "%s: leader-epoch-checkpoint disagrees with the log's batches: rebuilding it",
            directory.name,
        )
        entries = None
    if entries is None:
        cache.clear()
        for base_offset, header in view.headers_from(log_start_offset):
            _assign_epoch(cache, header.partition_leader_epoch, base_offset)
    else:
        _find_newer_epochs(view, cache, log_start_offset, log_end_offset)
    with disk(cleanup=checkpoint.close):
        cache.flush()
    return cache


def _epoch_starts_at(view: LogSegments, epoch: int, start_offset: int) -> bool:
    """Whether the batch holding ``start_offset`` was written in ``epoch``."""
    holding = view.batch_holding(start_offset)
    return holding is not None and holding.partition_leader_epoch == epoch


def _find_newer_epochs(
    view: LogSegments, cache: LeaderEpochFileCache, log_start_offset: int, log_end_offset: int
) -> None:
    """Assign the epochs after the cache's latest entry, found by bisecting the log.

    Batches' epochs never decrease along a log (each leader stamps its own, newer, epoch;
    followers copy them), so where the next higher epoch starts is a binary search over
    offsets: a few index lookups per epoch, not a scan of every header since the latest
    entry (an epoch may have lasted the whole log).
    """
    latest = cache.latest_entry()
    low = log_start_offset if latest is None else latest.start_offset
    epoch = -1 if latest is None else latest.epoch
    while low < log_end_offset:
        # The smallest offset whose batch is newer than ``epoch`` lies in [low, high].
        high = log_end_offset
        while low < high:
            middle = (low + high) // 2
            holding = view.batch_holding(middle)
            if holding is None:
                high = middle
            elif holding.partition_leader_epoch > epoch:
                high = min(middle, holding.base_offset)
            else:
                low = holding.last_offset + 1
        first = view.batch_holding(low)
        if first is None or first.partition_leader_epoch <= epoch:
            return
        _assign_epoch(cache, first.partition_leader_epoch, first.base_offset)
        epoch, low = first.partition_leader_epoch, first.last_offset + 1


def _assign_epoch(cache: LeaderEpochFileCache, epoch: int, start_offset: int) -> None:
    """A batch written in ``epoch`` starts at ``start_offset``: a new epoch if it is newer
    (batches without an epoch, -1, as written before leader epochs, count for none)."""
    if epoch >= 0:
        cache.assign(epoch, start_offset)
