"""A broker's logs across its JBOD ``log.dirs``: placement, checkpoints, failures, upkeep.

Each log directory (one per disk) holds partition directories ``<topic>-<partition>`` and, as in
Kafka, these files of its own (every name is spelled in ``files``)::

    recovery-point-offset-checkpoint   offsets below which each log is known to be on disk
    log-start-offset-checkpoint        each log's start offset (moved by retention, DeleteRecords)
    cleaner-offset-checkpoint          each compacted log's first dirty offset
    replication-offset-checkpoint      each log's high watermark
    .kafka_cleanshutdown               present only between a clean shutdown and the next start

(and, in each partition directory, ``leader-epoch-checkpoint``: ``leader_epoch``).

Rules:
- A new partition goes to the online directory holding the fewest partitions (ties: the first
  listed), as Kafka places them.
- An I/O error in a log takes its whole directory offline: every log in it refuses reads and
  appends with KAFKA_STORAGE_ERROR, the directory gets no more checkpoints, and
  ``offline_partitions`` names them so leadership can move. The other directories keep working.
- At start-up a directory that cannot be used is skipped with a warning; a replica known to
  exist (``is_new=False``) is then refused rather than recreated empty elsewhere.
- A replica moving to another dir (AlterReplicaLogDirs, KIP-113) has, besides its log, a future
  log ``<topic>-<partition>.<id>-future`` in the target dir (``log_dir_move``), outside ``logs``
  (no upkeep, no cleaning); ``replace_current_with_future`` swaps it in, renaming the old log
  ``-delete``; the old log's files go after ``file.delete.delay.ms``. ``load`` resumes future
  logs and completes a swap a stop interrupted (see ``load``).
- ``.kafka_cleanshutdown`` is removed once a directory's logs are loaded, so a crash after that
  makes the next start recover them.
- The high watermark is written every ``replica.high.watermark.checkpoint.interval.ms`` and at a
  clean shutdown, and restored at load (clamped to the log). A log with no entry starts with its
  high watermark at its log start offset: nothing of a restarting follower's log counts as
  committed until its leader says so (a leader alone in its ISR moves it to its LEO itself).

Threading: ``get_log``, ``get_or_create_log`` and ``delete_log`` run on the broker's event loop
and never wait for the disk. ``start()`` runs the upkeep (flushes, retention, checkpoints) on one
background thread and compaction on another; both only use the ``Log`` methods documented as
safe for that (``log``'s module docstring states which thread may run what, and the lock
discipline). The slow file work the loop hands off runs on the manager's ``StorageExecutors``
(``executors``): fsyncs for ``flush.messages``, producer-state snapshots, and the removal of a
deleted partition's files. ``shutdown`` stops everything in order: the cleaner and the upkeep
thread, then the executors after the work already submitted to them has run, then each log is
flushed and closed, the checkpoints written, and only then the clean-shutdown marker.

Its length: placement, the checkpoints, a failed directory's handling and the periodic upkeep
all walk the same map of partitions to log directories under one lock, so they stay together (as
Kafka's ``LogManager``); a log's own life is ``log``, moving one between directories
``log_dir_move``.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.common.clock import wall_clock_ms
from odradek.common.partitions import TopicPartition
from odradek.common.topics import log_directory_name, parse_log_directory_name
from odradek.config.topic import TopicConfig
from odradek.errors import (
    KafkaStorageError,
    LogDirNotFoundError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.checkpoint import CorruptCheckpointError, OffsetCheckpointFile
from odradek.storage.cleaner import LogCleaner
from odradek.storage.executors import StorageExecutors
from odradek.storage.file_ops import OS_FILE_OPS, FileOps, unlink_if_exists
from odradek.storage.files import (
    CLEAN_SHUTDOWN_MARKER,
    CLEANER_OFFSET_CHECKPOINT,
    DELETE_DIR_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    delete_directory_name,
    future_directory_name,
    parse_future_directory_name,
)
from odradek.storage.io_errors import disk_errors
from odradek.storage.log import Log

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """One log of a log dir, as DescribeLogDirs reports it (Kafka's ``ReplicaInfo``)."""

    topic: str
    partition: int
    size_bytes: int  # the bytes of its segments on disk (Kafka's ``log.size``)
    # A future log: how far its LEO is behind the current log's; a current log: 0 (its LEO is
    # never behind its own high watermark).
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One entry of ``log.dirs``: online, or offline with why, and the logs it holds."""

    path: Path
    offline_reason: str | None
    replicas: tuple[ReplicaDescription, ...]


LOG_CLOSE_THREADS = 4  # logs closed at once at shutdown


def _close_reporting(each: Log) -> None:
    """Close one log at shutdown; a failure is logged (its dir is marked by the log itself)."""
    try:
        each.close()
    except (KafkaStorageError, OSError) as e:
        log.error("closing %s failed: %s", each.directory, e)


@dataclass(frozen=True, slots=True)
class ManagerIntervals:
    """How often the upkeep thread does each job (Kafka's broker settings, in ms)."""

    flush_check_ms: int = 1_000  # log.flush.scheduler.interval.ms (checks flush.ms)
    retention_check_ms: int = 300_000  # log.retention.check.interval.ms
    checkpoint_ms: int = 60_000  # log.flush.offset.checkpoint.interval.ms
    high_watermark_checkpoint_ms: int = 5_000  # replica.high.watermark.checkpoint.interval.ms


class LogManager:
    """All partition logs of a broker; see the module docstring."""

    def __init__(
        self,
        log_dirs: Iterable[str | os.PathLike[str]],
        *,
        topic_config: Callable[[str], TopicConfig] = lambda topic: TopicConfig(),
        clock: Callable[[], int] = wall_clock_ms,
        intervals: ManagerIntervals = ManagerIntervals(),
        on_dir_offline: Callable[[Path, list[TopicPartition]], None] | None = None,
        executors: StorageExecutors | None = None,
        max_logs: int | None = None,
        file_ops: FileOps = OS_FILE_OPS,
    ):
        """``max_logs`` is the broker's replica budget (``broker.replica_budget``): logs past it
        are neither loaded nor created (KafkaStorageError for that partition alone); they stay
        on disk, listed in ``unloaded``, and no log dir goes offline for them. ``file_ops``
        makes every change to the log dirs' files, for the manager and each of its logs
        (``storage.file_ops``): tests pass one that injects disk faults."""
        self.max_logs = max_logs
        self.file_ops = file_ops
        self.unloaded: list[TopicPartition] = []
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("log.dirs must name at least one directory")
        self.topic_config = topic_config
        self.clock = clock
        self.intervals = intervals
        self.on_dir_offline = on_dir_offline
        self.offline_dirs: dict[Path, str] = {}
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}  # written by _place/_unplace only
        self._logs_in: collections.Counter[Path] = collections.Counter()  # _log_dir_of's counts
        # Future logs (KIP-113): a replica's copy being made in another dir of this broker.
        self._future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, Path] = {}
        # Where AlterReplicaLogDirs asked a partition this broker does not host yet to go.
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        # Logs replaced by their future logs: (due ms, log, its dir), removed by the upkeep
        # thread after file.delete.delay.ms, so a fetch still sending their files finishes.
        self._replaced: list[tuple[int, Log, Path]] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._upkeep: threading.Thread | None = None
        self.executors = executors or StorageExecutors.threads()
        self.cleaner = LogCleaner(self.logs, clock=clock)

    # -- start-up ------------------------------------------------------------------------

    def load(self) -> None:
        """Open every log in every usable directory, recovering after an unclean shutdown.

        Future logs (``-future``, a move between log dirs that a stop interrupted) are loaded
        as future logs, for the broker to resume their copy once it hosts the partition. A
        future log without a current log is what a stop between the two renames of a swap
        leaves (the current log already renamed ``-delete``: the future log had caught up), so
        it becomes the current log; but not while a dir is offline, where the current log may
        be. A second current log of one partition (a dir that came back after its replicas were
        re-created elsewhere) is left on disk, unused, with an error: the first in ``log.dirs``
        order serves.
        """
        for log_dir in self.log_dirs:
            with self._dir_errors(log_dir, "cannot load"):
                self._load_dir(log_dir)
        for tp in [tp for tp in self._future_logs if tp not in self._logs]:
            if self.offline_dirs:
                log.warning(
                    "future log %s has no current log, which may be on offline dirs %s: kept",
                    self._future_logs[tp].directory,
                    sorted(map(str, self.offline_dirs)),
                )
                continue
            self._promote_future(tp)

    def _promote_future(self, tp: TopicPartition) -> None:
        future, log_dir = self._future_logs.pop(tp), self._future_dir_of.pop(tp)
        log.warning("future log %s completes its interrupted swap", future.directory)
        with self._dir_errors(log_dir, f"cannot rename {future.directory.name}"):
            future.rename_dir(log_dir / log_directory_name(*tp))
            self._logs[tp] = future  # only once renamed
            self._place(tp, log_dir)

    def _load_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        cleaner_offsets = self._read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        entries = sorted(log_dir.iterdir())
        if not clean and any(parse_log_directory_name(e.name) for e in entries):
            log.warning("%s was not shut down cleanly: recovering its logs", log_dir)
        for entry in entries:
            if entry.is_dir() and entry.name.endswith(DELETE_DIR_SUFFIX):
                self.file_ops.rmtree(entry)  # a topic deletion interrupted by a crash
                continue
            future_tp = parse_future_directory_name(entry.name) if entry.is_dir() else None
            tp = parse_log_directory_name(entry.name) if entry.is_dir() else None
            if future_tp is not None:
                if future_tp in self._future_logs:
                    log.error("a second future log of %s-%d: removing %s", *future_tp, entry)
                    self.file_ops.rmtree(entry)
                    continue
                self._future_logs[future_tp] = self._open_log(
                    entry, self.topic_config(future_tp[0]), clean_shutdown=clean
                )
                self._future_dir_of[future_tp] = log_dir
                continue
            if tp is None:
                continue
            if self.max_logs is not None and len(self._logs) >= self.max_logs:
                self.unloaded.append(tp)  # left on disk; the broker logs why, once
                continue
            if tp in self._logs:
                log.error(
                    "%s-%d has a log in %s and in %s: serving the first, leaving the second",
                    *tp,
                    self._log_dir_of[tp],
                    log_dir,
                )
                continue
            self._logs[tp] = self._open_log(
                entry,
                self.topic_config(tp[0]),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                cleaner_checkpoint=cleaner_offsets.get(tp, 0),
                high_watermark=high_watermarks.get(tp),
                clean_shutdown=clean,
            )
            self._place(tp, log_dir)
        unlink_if_exists(self.file_ops, marker)

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except CorruptCheckpointError as e:
            # Without it every log recovers from its first segment: slower, never wrong.
            log.warning("ignoring %s", e)
            return {}

    # -- partitions ----------------------------------------------------------------------

    def logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def get_log(self, topic: str, partition: int) -> Log:
        """The log of a partition on this broker; raises if unknown or offline."""
        tp = (topic, partition)
        with self._lock:
            found = self._logs.get(tp)
            log_dir = self._log_dir_of.get(tp)
        if found is None:
            raise UnknownTopicOrPartitionError(f"this broker has no log for {topic}-{partition}")
        if log_dir in self.offline_dirs:
            raise KafkaStorageError(f"{topic}-{partition} is on offline log dir {log_dir}")
        return found

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config: TopicConfig | None = None,
        *,
        is_new: bool = True,
    ) -> Log:
        """The partition's log, created on the least loaded online directory if new.

        ``is_new=False`` (the controller says the replica existed before, as Kafka's
        LeaderAndIsr ``isNew``) refuses to create a missing log while a directory is offline:
        the log is probably there, and recreating it empty elsewhere would lose its data.
        """
        tp = (topic, partition)
        with self._lock:
            if tp in self._logs:
                return self.get_log(topic, partition)
            if not is_new and self.offline_dirs:
                raise KafkaStorageError(
                    f"{topic}-{partition} is not on any online log dir and may be on an offline "
                    f"one: {', '.join(str(d) for d in self.offline_dirs)}"
                )
            if self.max_logs is not None and len(self._logs) >= self.max_logs:
                raise KafkaStorageError(
                    f"{topic}-{partition}: this broker already hosts {len(self._logs)} replicas, "
                    f"its budget from the open-files limit (max.broker.partitions)"
                )
            log_dir = self._choose_dir(tp)
            created = self._create_log(
                log_dir,
                log_directory_name(topic, partition),
                config or self.topic_config(topic),
                f"{topic}-{partition}",
            )
            self._logs[tp] = created
            self._place(tp, log_dir)
            return created

    def _open_log(self, directory: Path, config: TopicConfig, **state: Any) -> Log:
        """A log of this manager's: its clock, its I/O error handling, its threads."""
        return Log(
            directory,
            config,
            clock=self.clock,
            on_io_error=self._on_io_error,
            executors=self.executors,
            file_ops=self.file_ops,
            **state,
        )

    def _create_log(self, log_dir: Path, name: str, config: TopicConfig, what: str) -> Log:
        """A new, empty log ``name`` in ``log_dir``; failing takes ``log_dir`` offline."""
        with self._dir_errors(
            log_dir,
            f"cannot create {what}",
            raise_as=f"cannot create {what}",
            # Out of descriptors: not the disk's fault.
            counts=lambda e: e.errno not in (errno.EMFILE, errno.ENFILE),
        ):
            return self._open_log(log_dir / name, config)
        raise AssertionError("unreachable: disk_errors raised")

    def _choose_dir(self, tp: TopicPartition | None = None) -> Path:
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise KafkaStorageError("every log directory is offline")
        preferred = self._preferred_dirs.pop(tp, None) if tp is not None else None
        if preferred in online:
            return preferred
        return min(online, key=lambda d: self._logs_in[d])

    def _place(self, tp: TopicPartition, log_dir: Path) -> None:
        """Record that ``tp``'s log is in ``log_dir``, keeping the per-directory counts that
        ``_choose_dir`` reads (a scan of every log per new log made creating N logs cost N^2)."""
        self._unplace(tp)
        self._log_dir_of[tp] = log_dir
        self._logs_in[log_dir] += 1

    def _unplace(self, tp: TopicPartition) -> Path | None:
        log_dir = self._log_dir_of.pop(tp, None)
        if log_dir is not None:
            self._logs_in[log_dir] -= 1
        return log_dir

    def log_dir_of(self, topic: str, partition: int) -> Path:
        return self._log_dir_of[(topic, partition)]

    def delete_log(self, topic: str, partition: int) -> Future[None]:
        """Remove a partition for good; the future completes once its files are gone.

        On the event loop, only the cheap part: the log is detached (appends, reads, flushes
        and cleaning stop using it) and its directory renamed ``<name>.<uuid>-delete``, so it
        is gone from the directory listing and a new log of the same partition can be created
        at once. Closing its files and removing the directory run on the housekeeping thread;
        nothing is flushed. A start-up finds a ``-delete`` directory a crash left and removes
        it. An I/O error takes the log's directory offline, as Kafka does.
        """
        tp = (topic, partition)
        self.abandon_future_log(topic, partition)
        with self._lock:
            doomed = self._logs.pop(tp, None)
            log_dir = self._unplace(tp)
            self._preferred_dirs.pop(tp, None)
        done: Future[None] = Future()
        if doomed is None or log_dir is None:
            done.set_result(None)
            return done
        return self._detach_and_remove(doomed, log_dir)

    def _detach_and_remove(self, doomed: Log, log_dir: Path) -> Future[None]:
        """Rename ``doomed``'s directory to ``<name>.<uuid>-delete`` now (so no later log of
        the partition meets it), and delete its files on the housekeeping thread."""
        renamed = doomed.directory.with_name(delete_directory_name(doomed.directory.name))
        what = f"cannot delete {doomed.directory.name}"
        with self._dir_errors(log_dir, what, raise_as=what):
            doomed.detach(renamed)
        return self.executors.housekeeping.submit(self._remove_detached, doomed, log_dir)

    def _remove_detached(self, doomed: Log, log_dir: Path) -> None:
        """The housekeeping job of ``delete_log``."""
        with self._dir_errors(
            log_dir,
            f"cannot remove {doomed.directory.name}",
            raise_as=f"cannot remove {doomed.directory}",
        ):
            doomed.delete_files()

    # -- moves between log dirs (KIP-113) -------------------------------------------------

    def check_log_dir(self, path: str | os.PathLike[str]) -> Path:
        """``path`` as one of ``log.dirs``; raises ``LogDirNotFoundError`` if it is none of
        them, ``KafkaStorageError`` if it is offline (Kafka's ``isLogDirOnline``)."""
        wanted = Path(path).absolute()
        if wanted not in self.log_dirs:
            raise LogDirNotFoundError(f"{path} is not in log.dirs")
        if wanted in self.offline_dirs:
            raise KafkaStorageError(f"log dir {path} is offline: {self.offline_dirs[wanted]}")
        return wanted

    def prefer_log_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Create the partition's log in ``log_dir`` if it is created here later (Kafka's
        ``maybeUpdatePreferredLogDir``); forgotten once used."""
        with self._lock:
            if (topic, partition) not in self._logs:
                self._preferred_dirs[(topic, partition)] = log_dir

    def future_log(self, topic: str, partition: int) -> Log | None:
        with self._lock:
            return self._future_logs.get((topic, partition))

    def future_log_dir_of(self, topic: str, partition: int) -> Path | None:
        with self._lock:
            return self._future_dir_of.get((topic, partition))

    def future_logs_count(self) -> int:
        with self._lock:
            return len(self._future_logs)

    def create_future_log(self, topic: str, partition: int, log_dir: Path) -> Log | None:
        """The future log of a move of the partition's log to ``log_dir`` (an entry of
        ``check_log_dir``): an existing one there, else a new empty one (a future log headed
        elsewhere is abandoned first); None if the current log already is in ``log_dir``.

        Refused with KAFKA_STORAGE_ERROR while any dir is offline, as Kafka does (a future log
        of the partition may be on it). The event loop: creating a log touches little.
        """
        tp = (topic, partition)
        self.get_log(topic, partition)  # raises if unknown or offline
        with self._lock:
            if self._log_dir_of[tp] == log_dir:
                stale = tp in self._future_logs
            else:
                if self._future_dir_of.get(tp) == log_dir:
                    return self._future_logs[tp]
                stale = tp in self._future_logs
        if stale:
            self.abandon_future_log(topic, partition)
        with self._lock:
            if self._log_dir_of[tp] == log_dir:
                return None
            if self.offline_dirs:
                raise KafkaStorageError(
                    f"not moving {topic}-{partition} while log dirs are offline: "
                    f"{', '.join(str(d) for d in self.offline_dirs)}"
                )
            future = self._create_log(
                log_dir,
                future_directory_name(topic, partition),
                self.topic_config(topic),
                f"a future log of {topic}-{partition}",
            )
            self._future_logs[tp] = future
            self._future_dir_of[tp] = log_dir
        log.info("moving %s-%d to %s: future log %s", topic, partition, log_dir, future.directory)
        return future

    def abandon_future_log(self, topic: str, partition: int) -> Future[None]:
        """Drop the partition's future log (a cancelled or replaced move); the future completes
        once its files are gone (on the housekeeping thread, as ``delete_log``)."""
        tp = (topic, partition)
        with self._lock:
            future = self._future_logs.pop(tp, None)
            log_dir = self._future_dir_of.pop(tp, None)
        done: Future[None] = Future()
        if future is None or log_dir is None:
            done.set_result(None)
            return done
        return self._detach_and_remove(future, log_dir)

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """The swap that ends a move: the future log becomes the partition's log.

        The caller guarantees the two logs are equal and no append runs (it holds the
        partition's append lock; ``adopt_offsets`` done). The current log is renamed
        ``<name>.<id>-delete`` first, then the future log ``<topic>-<partition>`` in its dir:
        a stop between the two leaves a ``-delete`` dir (removed at load) and a lone future log
        (made current at load). The old log's files are closed and removed by the upkeep thread
        after ``file.delete.delay.ms``. The event loop (two renames). Raises
        ``KafkaStorageError`` if a rename fails (that dir goes offline).
        """
        tp = (topic, partition)
        with self._lock:
            current, source_dir = self._logs[tp], self._log_dir_of[tp]
            future, target_dir = self._future_logs[tp], self._future_dir_of[tp]
        renamed = current.directory.with_name(delete_directory_name(current.directory.name))
        with self._dir_errors(
            source_dir,
            f"cannot rename {current.directory.name}",
            raise_as=f"cannot rename {current.directory}",
        ):
            current.detach(renamed)
        with self._lock:
            self._logs[tp] = future
            self._place(tp, target_dir)
            del self._future_logs[tp], self._future_dir_of[tp]
            self._replaced.append(
                (self.clock() + current.config.file_delete_delay_ms, current, source_dir)
            )
        with self._dir_errors(
            target_dir,
            f"cannot rename {future.directory.name}",
            raise_as=f"cannot rename {future.directory}",
        ):
            future.rename_dir(target_dir / log_directory_name(topic, partition))
        log.info("%s-%d now lives in %s", topic, partition, target_dir)
        return future

    def remove_replaced_logs(self, *, force: bool = False) -> None:
        """Close and remove the logs swaps replaced, once their delay passed (upkeep thread)."""
        now = self.clock()
        with self._lock:
            due = [r for r in self._replaced if force or r[0] <= now]
            self._replaced = [r for r in self._replaced if not (force or r[0] <= now)]
        for _, replaced, log_dir in due:
            with contextlib.suppress(KafkaStorageError):  # reported: the dir is offline
                self._remove_detached(replaced, log_dir)

    # -- failures ------------------------------------------------------------------------

    def _on_io_error(self, failed: Log, error: OSError) -> None:
        # Under the lock: this runs on whichever thread hit the error (upkeep flushes too),
        # while the event loop may be adding partitions to these dicts.
        with self._lock:
            log_dir = next(
                (d for tp, d in self._log_dir_of.items() if self._logs.get(tp) is failed), None
            ) or next(
                (d for tp, d in self._future_dir_of.items() if self._future_logs.get(tp) is failed),
                None,
            )
        if log_dir is not None:
            self._mark_offline(log_dir, f"I/O error in {failed.directory.name}: {error}")

    def _dir_errors(
        self,
        log_dir: Path,
        what: str,
        *,
        raise_as: str | None = None,
        counts: Callable[[OSError], bool] | None = None,
    ) -> disk_errors:
        """The ``disk_errors`` block of work on ``log_dir``: an I/O error takes it offline
        with the reason "<what>: <error>" (and raises ``KafkaStorageError`` with ``raise_as``)."""
        return disk_errors(
            lambda e: self._mark_offline(log_dir, f"{what}: {e}"), raise_as=raise_as, counts=counts
        )

    def _mark_offline(self, log_dir: Path, reason: str) -> None:
        with self._lock:
            if log_dir in self.offline_dirs:
                return
            self.offline_dirs[log_dir] = reason
            partitions = [tp for tp, d in self._log_dir_of.items() if d == log_dir]
            for tp in partitions:
                self._logs[tp].offline = True
            for tp, d in self._future_dir_of.items():
                if d == log_dir:
                    self._future_logs[tp].offline = True
        log.error("log dir %s is offline (%s); its partitions: %s", log_dir, reason, partitions)
        if self.on_dir_offline is not None:
            self.on_dir_offline(log_dir, partitions)

    def offline_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return sorted(tp for tp, d in self._log_dir_of.items() if d in self.offline_dirs)

    # -- description ---------------------------------------------------------------------

    def describe_log_dirs(
        self, wanted: Callable[[TopicPartition], bool] | None = None
    ) -> list[LogDirDescription]:
        """Every log dir in ``log.dirs`` order with its logs (those ``wanted`` names, or all).

        Memory only (segment sizes and offsets the logs hold), so any thread may call it; an
        offline dir is listed with its reason and no logs, as Kafka answers DescribeLogDirs.
        """
        with self._lock:
            current = [(tp, each, self._log_dir_of[tp]) for tp, each in self._logs.items()]
            futures = [
                (tp, each, self._future_dir_of[tp]) for tp, each in self._future_logs.items()
            ]
            offline = dict(self.offline_dirs)
        by_dir: dict[Path, list[ReplicaDescription]] = {d: [] for d in self.log_dirs}
        current_ends = {tp: each.log_end_offset for tp, each, _ in current}
        for is_future, entries in ((False, current), (True, futures)):
            for tp, each, log_dir in entries:
                if log_dir in offline or (wanted is not None and not wanted(tp)):
                    continue
                lag = 0
                if is_future and tp in current_ends:
                    lag = max(current_ends[tp] - each.log_end_offset, 0)
                by_dir[log_dir].append(
                    ReplicaDescription(tp[0], tp[1], each.size_in_bytes, lag, is_future)
                )
        return [
            LogDirDescription(
                log_dir,
                offline.get(log_dir),
                tuple(sorted(by_dir[log_dir], key=lambda r: (r.topic, r.partition, r.is_future))),
            )
            for log_dir in self.log_dirs
        ]

    # -- upkeep --------------------------------------------------------------------------

    def flush_due(self) -> None:
        """``flush.ms`` and flushes of rolled segments, for every online log."""
        for each in self.logs():
            if not each.offline:
                # A KafkaStorageError means the log's directory went offline: already reported.
                with contextlib.suppress(KafkaStorageError):
                    each.flush_if_due()

    def enforce_retention(self) -> int:
        """Delete old segments of every online log; returns how many went."""
        deleted = 0
        for each in self.logs():
            if not each.offline:
                try:
                    deleted += each.delete_old_segments()
                    each.delete_expired_files()
                except KafkaStorageError:
                    pass
        return deleted

    def _logs_by_online_dir(self) -> dict[Path, list[tuple[TopicPartition, Log]]]:
        with self._lock:
            by_dir: dict[Path, list[tuple[TopicPartition, Log]]] = {
                d: [] for d in self.log_dirs if d not in self.offline_dirs
            }
            for tp, each in self._logs.items():
                log_dir = self._log_dir_of[tp]
                if log_dir in by_dir:
                    by_dir[log_dir].append((tp, each))
        return by_dir

    def _checkpoint(self, path: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(path, self.file_ops)

    def write_high_watermark_checkpoints(self) -> None:
        """Persist every log's high watermark (``replication-offset-checkpoint``), per online
        dir: Kafka's ``ReplicaManager.checkpointHighWatermarks``."""
        for log_dir, entries in self._logs_by_online_dir().items():
            with self._dir_errors(log_dir, "cannot write checkpoints"):
                self._checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT).write(
                    {tp: each.high_watermark for tp, each in entries}
                )

    def write_checkpoints(self) -> None:
        """Persist recovery points, log start offsets, cleaner offsets and high watermarks,
        per online dir."""
        self.write_high_watermark_checkpoints()
        for log_dir, entries in self._logs_by_online_dir().items():
            with self._dir_errors(log_dir, "cannot write checkpoints"):
                self._checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT).write(
                    {tp: each.recovery_point for tp, each in entries}
                )
                self._checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT).write(
                    {tp: each.log_start_offset for tp, each in entries}
                )
                self._checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT).write(
                    {tp: each.cleaner_checkpoint for tp, each in entries if each.config.compact}
                )

    def start(self, *, cleaner: bool = True) -> None:
        """Run upkeep, and compaction unless ``cleaner`` is off, on background threads.

        ``log.cleaner.enable=false`` turns compaction off, as in Kafka: compacted topics then
        keep every record.
        """
        self._upkeep = threading.Thread(target=self._run_upkeep, name="log-upkeep", daemon=True)
        self._upkeep.start()
        if cleaner:
            self.cleaner.start()
        else:
            log.warning("log.cleaner.enable is false: compacted topics will not be compacted")

    def _run_upkeep(self) -> None:
        due = {"flush": 0, "retention": 0, "checkpoint": 0, "high_watermark": 0, "replaced": 0}
        periods = {
            "replaced": self.intervals.flush_check_ms,
            "flush": self.intervals.flush_check_ms,
            "retention": self.intervals.retention_check_ms,
            "checkpoint": self.intervals.checkpoint_ms,
            "high_watermark": self.intervals.high_watermark_checkpoint_ms,
        }
        jobs = {
            "flush": self.flush_due,
            "retention": self.enforce_retention,
            "checkpoint": self.write_checkpoints,
            "high_watermark": self.write_high_watermark_checkpoints,
            "replaced": self.remove_replaced_logs,
        }
        while not self._stop.is_set():
            now = self.clock()
            for name, job in jobs.items():
                if now >= due[name]:
                    try:
                        job()
                    except Exception:  # keep the thread alive; the next tick retries
                        log.exception("log upkeep job %s failed", name)
                    due[name] = now + periods[name]
            self._stop.wait(max(0.0, (min(due.values()) - now) / 1000))

    def shutdown(self) -> None:
        """Stop the threads, finish submitted work, close every log, then checkpoints, marker."""
        self._stop.set()
        self.cleaner.stop()
        if self._upkeep is not None:
            self._upkeep.join(timeout=30)
        # Snapshots and deletions already submitted run before the logs close, and before the
        # marker says everything on disk is as a clean shutdown leaves it.
        self.executors.shutdown()
        self.remove_replaced_logs(force=True)
        with self._lock:
            futures = list(self._future_logs.values())
        # Several at once: a close is file-system calls (fsyncs, the indexes' trim, the
        # producer snapshot), which release the GIL and overlap. One after another, 3,000 logs
        # took seconds of a controlled shutdown (Kafka closes them on
        # num.recovery.threads.per.data.dir threads a dir).
        with ThreadPoolExecutor(LOG_CLOSE_THREADS, thread_name_prefix="log-close") as pool:
            list(pool.map(_close_reporting, [*self.logs(), *futures]))
        self.write_checkpoints()
        for log_dir in self.log_dirs:
            if log_dir not in self.offline_dirs:
                try:
                    (log_dir / CLEAN_SHUTDOWN_MARKER).touch()
                except OSError as e:
                    log.error("cannot mark %s as cleanly shut down: %s", log_dir, e)
