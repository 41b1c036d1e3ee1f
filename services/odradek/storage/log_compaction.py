"""What the cleaner may do to a log: read its segments, write a cleaned copy, swap it in.

``LogCompaction`` is a part of ``Log`` (a base class holding the cleaner's side of it, so that
the log's module keeps appends and reads): it works on the log's own lock, segments and files,
which ``Log`` defines. The cleaner (``cleaner``) only ever reaches a log through these methods:
``segments`` and ``segment_reader`` to read, ``active_producers`` to know which batches hold a
producer's state, ``new_cleaned_segment`` / ``discard_cleaned_segment`` for its output, and
``replace_segments`` to swap the output in.

On disk (names in ``files``): the output is written as ``<base>.log.cleaned`` (and its indexes),
invisible to readers and removed by the next load if a crash interrupts it; the swap renames it
``.swap``, the replaced segments ``.deleted``, then the ``.swap`` files to their final names, so
a crash at any point is completed or undone by the loader (``loader``), as in Kafka.

Invariants: a swap replaces contiguous inactive segments only, and only if they are still the
log's (else the cleaner's view was stale and its work is dropped); nothing is created in the
directory of a detached log; the directory is fsynced after a swap, outside the lock.

Threads: the cleaner thread; each method takes the log's lock for what it changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from odradek.config.topic import TopicConfig
from odradek.storage.file_ops import FileOps
from odradek.storage.files import CLEANED_SUFFIX, SWAP_SUFFIX
from odradek.storage.io_errors import disk_errors
from odradek.storage.log_segments import LogSegments
from odradek.storage.producer_state import ActiveProducer, ProducerStateManager
from odradek.storage.segment import LogSegment, SegmentReader

__all__ = ["LogCompaction"]


class LogCompaction:
    """The cleaner's side of ``Log``; see the module docstring. Uses the log's state below."""

    # Defined by ``Log`` (and its flusher and retention parts):
    directory: Path
    config: TopicConfig
    file_ops: FileOps
    deleted: bool
    offline: bool
    producer_state: ProducerStateManager
    _lock: threading.RLock
    _view: LogSegments
    _position_cache: tuple[int, int, int] | None
    _disk_errors: Callable[..., disk_errors]
    _schedule_delete: Callable[[LogSegment], None]
    _delete_due_files_in_background: Callable[[], None]
    _fsync_handles: Callable[..., list[int]]
    _fsync: Callable[[list[int]], None]

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
            with self._disk_errors():
                return segment.reader()
            raise AssertionError("unreachable: disk_errors raised")

    def new_cleaned_segment(self, base_offset: int, created_ms: int) -> LogSegment | None:
        """A private ``.cleaned`` segment for the cleaner's output; None once detached.

        Created under the lock, so no file appears in the directory of a detached log (its
        removal would race with it).
        """
        with self._lock:
            if self.deleted:
                return None
            with self._disk_errors():
                return LogSegment(
                    self.directory,
                    base_offset,
                    index_interval_bytes=self.config.index_interval_bytes,
                    max_index_bytes=self.config.segment_index_bytes,
                    active=True,
                    created_ms=created_ms,
                    suffix=CLEANED_SUFFIX,
                    file_ops=self.file_ops,
                )
            raise AssertionError("unreachable: disk_errors raised")

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
        ``old[0]``. Rename order makes a crash at any point recoverable (see ``loader``): new
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
            with self._disk_errors():
                # ``new`` carries the aborted-transaction entries the cleaner kept (those of
                # the ABORT markers still needed), written before the swap.
                new.txn_index.sync()
                new.rename_with_suffix(SWAP_SUFFIX)
                for segment in old:
                    self._schedule_delete(segment)
                new.rename_with_suffix("")
            self._view = LogSegments.of(segments[:first] + (new,) + segments[first + len(old) :])
            self._position_cache = None
            handles = self._fsync_handles((), directory=True)
        self._fsync(handles)
        self._delete_due_files_in_background()
        return True
