"""Making a log durable: its fsyncs, and the recovery point they move (``Log``'s flush half).

``LogFlusher`` is a part of ``Log`` (a base class holding its durability methods, so that the
log's module keeps appends and reads): it works on the log's own lock, segments and offsets,
which ``Log`` defines. What it owns: ``flush`` (fsync every segment below an offset, then move
the recovery point), ``flush_in_background`` (the same on a storage flush thread, for an append
that ``flush.messages`` says must be durable before it is acknowledged), ``flush_if_due`` (the
log manager's ``flush.ms`` tick), and the state those share: the queued flush and
``last_flush_ms``. ``open_fsync_handles`` and ``fsync_and_close`` are the two steps of any fsync
here, shared with the loader (which fsyncs what it recovered before a ``Log`` exists).

Invariants (rules 2 and 4 of ``log``'s module docstring):

- An fsync never runs under the log's lock: its descriptors are taken under it
  (``LogSegment.fsync_handles``, which first writes the indexes' new entries to the page cache),
  then fsynced and closed without it. So a segment closed meanwhile (retention, truncation,
  deletion) leaves the fsync's descriptors valid, and an append never waits for the disk.
- At most ``FSYNC_BATCH_SEGMENTS`` segments' descriptors are open at a time for one flush.
- The recovery point only moves forward, after the fsync covering it returned, and not at all if
  the log was truncated while the fsync ran (``_truncations`` changed).
- The directory is fsynced too when segments were created since the last flush, as Kafka does.
- An I/O error takes the log offline (``Log.report_io_error``) and raises ``KafkaStorageError``.

Threads: ``flush`` and ``flush_if_due`` on the log manager's upkeep thread or a storage flush
thread (``executors``), never the appending thread; ``flush_in_background`` on the appending
thread. Several flushes may run at once: each takes the lock only to read and to move offsets.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from pathlib import Path

from odradek.config.topic import TopicConfig
from odradek.errors import KafkaStorageError
from odradek.storage.executors import StorageExecutors
from odradek.storage.file_ops import FileOps
from odradek.storage.io_errors import disk_errors
from odradek.storage.log_segments import LogSegments
from odradek.storage.segment import LogSegment, close_all

__all__ = ["FSYNC_BATCH_SEGMENTS", "LogFlusher", "fsync_and_close", "open_fsync_handles"]

# Segments whose descriptors a flush holds at a time (up to four each: a duplicate of the .log,
# fresh ones of the .index, the .timeindex and a written .txnindex): bounds the files a flush
# of a long unflushed range holds open (``broker.replica_budget``'s reserve covers them).
FSYNC_BATCH_SEGMENTS = 64

# ``disk(cleanup=...)``: the ``disk_errors`` block of the log being flushed or loaded.
DiskErrors = Callable[..., disk_errors]


def open_fsync_handles(
    segments: Sequence[LogSegment], directory: Path | None, disk: DiskErrors
) -> list[int]:
    """Duplicated descriptors of ``segments`` (and of ``directory``) to fsync; on an I/O error
    those opened are closed first. Under the log's lock once the log exists."""
    handles: list[int] = []
    with disk(cleanup=lambda: close_all(handles)):
        for segment in segments:
            handles += segment.fsync_handles()
        if directory is not None:
            handles.append(os.open(directory, os.O_RDONLY | os.O_DIRECTORY))
    return handles


def fsync_and_close(handles: list[int], disk: DiskErrors, file_ops: FileOps) -> None:
    """fsync (through ``file_ops``) and close ``handles``, without the lock; an error takes the
    log offline."""
    try:
        with disk():
            for fd in handles:
                file_ops.fsync(fd)
    finally:
        close_all(handles)


class LogFlusher:
    """The durability half of ``Log``; see the module docstring. Uses the log's state below."""

    # Defined by ``Log``:
    directory: Path
    config: TopicConfig
    clock: Callable[[], int]
    executors: StorageExecutors
    file_ops: FileOps
    deleted: bool
    log_end_offset: int
    recovery_point: int
    _lock: threading.RLock
    _view: LogSegments
    _truncations: int
    _check_online: Callable[[], None]
    _disk_errors: DiskErrors
    # Owned here, set by ``_start_flusher``:
    last_flush_ms: int
    # The callers waiting for the flush queued and not yet started; later appends join it.
    _queued_flush_waiters: list[Future[None]] | None

    def _start_flusher(self) -> None:
        self._queued_flush_waiters = None
        self.last_flush_ms = self.clock()

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: the LEO).

        Blocks on the disk, so never on the appending thread (``flush_in_background``). The
        descriptors are taken under the lock and fsynced outside it (module docstring);
        the directory too when segments were created since the last flush, as Kafka does.
        Raises ``KafkaStorageError`` if the log is offline or the disk fails.
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
        """Duplicated descriptors to fsync; the caller holds the lock (module docstring)."""
        return open_fsync_handles(
            segments, self.directory if directory else None, self._disk_errors
        )

    def _fsync(self, handles: list[int]) -> None:
        """fsync and close ``handles``, without the lock; an error takes the log offline."""
        fsync_and_close(handles, self._disk_errors, self.file_ops)

    def flush_if_due(self) -> None:
        """The flush scheduler's tick: ``flush.ms``, and segments rolled since the last flush."""
        if self.clock() - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
        elif self.recovery_point < self._view.active.base_offset:
            self.flush(self._view.active.base_offset)


def _settle(waiters: list[Future[None]], outcome: BaseException | None) -> None:
    """Complete every waiter not cancelled meanwhile, with ``outcome`` (an error, or None)."""
    for waiter in waiters:
        with contextlib.suppress(InvalidStateError):  # cancelled by its caller
            if outcome is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(outcome)
