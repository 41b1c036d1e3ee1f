"""Retention: which of a log's old segments go, and how their files leave (``Log``'s deletions).

``LogRetention`` is a part of ``Log`` (a base class holding its retention methods, so that the
log's module keeps appends and reads): it works on the log's own lock, segments and offsets,
which ``Log`` defines. What it owns: ``delete_old_segments`` (Kafka's ``deleteOldSegments``:
segments wholly below the log start offset, past ``retention.ms``, or beyond
``retention.bytes``), and the delayed deletion every removal of a segment goes through
(retention, truncation, a cleaner's swap): ``_schedule_delete`` renames the segment's files
``.deleted`` at once, and ``delete_expired_files`` closes and removes them after
``file.delete.delay.ms`` (the pending list is its state).

Invariants:

- Never the active segment, never a segment holding data above the high watermark; always the
  oldest first, so the log stays contiguous; the log start offset only moves forward.
- A segment's descriptors are closed only after it left the segment list and its delay passed
  (a ``FileSlice`` handed to the network stays readable), or by ``Log.delete_files`` for a
  detached log (whose paths may by then name a new log's files: never unlinked by path here).
- The rename to ``.deleted`` runs under the log's lock (a page-cache operation); the close and
  unlink run outside it, on the housekeeping or upkeep thread.

Threads: ``delete_old_segments`` on the upkeep thread or the appending thread (DeleteRecords);
``delete_expired_files`` on the housekeeping or upkeep thread, and at ``close``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from odradek.config.topic import TopicConfig
from odradek.storage.executors import StorageExecutors
from odradek.storage.files import DELETED_SUFFIX
from odradek.storage.io_errors import disk_errors
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.log_segments import LogSegments
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.segment import LogSegment

__all__ = ["LogRetention"]


class LogRetention:
    """The retention half of ``Log``; see the module docstring. Uses the log's state below."""

    # Defined by ``Log``:
    directory: Path
    config: TopicConfig
    clock: Callable[[], int]
    executors: StorageExecutors
    deleted: bool
    log_start_offset: int
    high_watermark: int
    producer_state: ProducerStateManager
    leader_epoch_cache: LeaderEpochFileCache
    size_in_bytes: int
    _lock: threading.RLock
    _view: LogSegments
    _disk_errors: Callable[..., disk_errors]
    _write_leader_epoch_checkpoint_in_background: Callable[[], None]
    # Owned here: (when its files go, segment) of each segment renamed ``.deleted``.
    _pending_deletes: list[tuple[int, LogSegment]]

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
                self._view = LogSegments.of(segments[count:])
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
        with self._disk_errors():
            segment.rename_with_suffix(DELETED_SUFFIX)
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
