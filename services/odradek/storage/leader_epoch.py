"""The leader-epoch cache of one partition: where each leader epoch starts in the log.

Kafka's ``LeaderEpochFileCache``. Each entry ``(epoch, start_offset)`` says that the batches from
``start_offset`` (up to the next entry's start) were written by the leader of ``epoch``. Entries
strictly increase in both fields. A follower asks the leader for the end offset of its latest
epoch (OffsetForLeaderEpoch, or Fetch's diverging epoch) and truncates to where the two logs
diverge; ``end_offset_for`` answers that, as Kafka's ``endOffsetFor`` does.

How the entries change (the log calls these, with its lock held):

- ``assign(epoch, start_offset)``: an epoch newer than the latest is appended. One not newer is
  ignored: the cache never moves back to an older epoch. A newer epoch starting below the latest
  entry's start drops the entries at or above its start first (Kafka's
  ``maybeTruncateNonMonotonicEntries``). Kafka also lets an older or equal epoch rewrite the
  tail; nothing here asks for that (the log assigns only epochs above the latest, a new leader
  its new epoch), so it is refused rather than kept as a path nothing tests.
- ``truncate_from_end(end_offset)``: the log was truncated; entries starting at or above
  ``end_offset`` go.
- ``truncate_from_start(start_offset)``: the log start moved; entries starting at or below it go,
  except that the last of them stays, its start moved up to ``start_offset``.

The file ``leader-epoch-checkpoint`` in the partition directory, byte for byte as Kafka writes
it (so a log directory can move between Kafka and Odradek)::

    0            <- format version, always 0
    2            <- number of entries
    3 0          <- <epoch> <start_offset>, oldest first
    5 1200

A write replaces the file atomically (``checkpoint.replace_file_in``: ``.tmp``, then a
rename) but does not fsync it. The file is a cache of what the log's batches say (each carries
its ``partition_leader_epoch``), and loading a log checks every entry against the batches and
finds newer epochs in the log itself (``loader``), so a file that a power loss left old, torn or
missing is rebuilt, never trusted. Kafka (KAFKA-15046) stopped fsyncing it on truncations but
still does on a new epoch, because its loader trusts the file to miss no entry; this one does
not. Two fsyncs per partition at every leader change were, with 3,000 partitions per broker,
most of a CreateTopics and of the first produce to each partition (``bench/scale_bench.py``).
Descriptors: none held between writes. A read or a write opens the partition directory
(``O_DIRECTORY``) and works through that descriptor (``replace_file_in`` needs one), then
closes it; writes are rare (a new epoch, a truncation, a moved log start). A write racing with
a rename of the directory must land in the log's directory, never in a new directory that took
the old name (a partition deleted and created again). So the file knows its directory by
identity, ``(st_dev, st_ino)`` read at construction, which a rename keeps, and by path, which
the log moves with every rename it makes (``relocate``, from ``Log.detach`` and
``Log.rename_dir``, under the log's lock). A write opens the path, checks the identity on the
descriptor, and writes through it: once the check passed, later renames cannot redirect it.
If the path no longer names the directory and the log has not moved it meanwhile (it would
then be tried again at the new path), the write raises ``FileNotFoundError`` and writes
nothing; ``Log.write_leader_epoch_checkpoint`` counts that as a disk error only if the log was
not deleted.
Reading is strict: a file that is not exactly this format, or whose
entries do not strictly increase, raises ``CorruptCheckpointError``; the log then rebuilds the
cache from its batches' ``partition_leader_epoch``.

Thread contract. The entries are guarded by ``_lock``, held only for in-memory work: the log's
appending thread changes them (under the log's lock: lock order ``Log._lock``, then ``_lock``),
any thread reads them (``latest_entry`` without the lock: see there). ``flush`` (write the file
if the entries changed since the last write) blocks on the disk, so it runs on the storage
threads, never on the appending thread and never under the log's lock; ``_write_lock``
serialises writes, and a write skips a version older than the one already written, so the file
never moves back.
``close`` waits for a write in progress, then refuses later ones.
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.common.limits import INT32_MAX, INT64_MAX
from odradek.storage.checkpoint import (
    VERSION,
    CorruptCheckpointError,
    parse_header,
    replace_file_in,
)
from odradek.storage.file_ops import OS_FILE_OPS, FileOps
from odradek.storage.files import LEADER_EPOCH_CHECKPOINT

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "LeaderEpochFileCache",
]

log = logging.getLogger(__name__)

# OffsetForLeaderEpoch's answers when there is no epoch, as Kafka's OffsetsForLeaderEpochResponse.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_EPOCH_MAX = INT32_MAX  # partition_leader_epoch is an int32 in a batch header
_OFFSET_MAX = INT64_MAX
_NUMBER = re.compile(r"[0-9]+")
# Attempts of a write whose directory the log renamed under it (at most one rename at a time
# is expected: a deletion, or a future log made current).
RELOCATE_RETRIES_MAX = 3


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """The leader of ``epoch`` wrote the batches from ``start_offset`` on."""

    epoch: int
    start_offset: int


def _check_entry(entry: EpochEntry) -> None:
    if not (0 <= entry.epoch <= _EPOCH_MAX and 0 <= entry.start_offset <= _OFFSET_MAX):
        raise ValueError(f"invalid leader epoch entry {entry}")


def _is_increasing(entries: Sequence[EpochEntry]) -> bool:
    return all(
        a.epoch < b.epoch and a.start_offset < b.start_offset
        for a, b in zip(entries, entries[1:], strict=False)
    )


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint`` of one partition directory; see the module docstring.

    ``relocate`` may run on the log's appending thread while ``write`` runs on a storage
    thread: ``write`` reads the path once per attempt and retries when it changed."""

    def __init__(self, directory: str | os.PathLike[str], file_ops: FileOps = OS_FILE_OPS):
        self.directory = Path(directory)
        self._file_ops = file_ops  # the writes, fsyncs and rename of ``write``
        found = os.stat(self.directory)
        self._identity = (found.st_dev, found.st_ino)  # a rename keeps them

    @property
    def path(self) -> Path:
        return self.directory / LEADER_EPOCH_CHECKPOINT

    def __repr__(self) -> str:
        return f"LeaderEpochCheckpointFile({str(self.path)!r})"

    def relocate(self, directory: Path) -> None:
        """The log renamed its directory to ``directory``: later reads and writes go there."""
        self.directory = directory

    def _open_directory(self) -> int:
        """A descriptor of the log's directory (the caller closes it), found at its current
        path; raises ``FileNotFoundError`` if that path no longer names it."""
        for _ in range(RELOCATE_RETRIES_MAX):
            directory = self.directory
            try:
                fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                fd = -1
            if fd >= 0:
                found = os.fstat(fd)
                if (found.st_dev, found.st_ino) == self._identity:
                    return fd
                os.close(fd)
            if self.directory == directory:  # not moved by the log meanwhile: gone
                break
        raise FileNotFoundError(
            errno.ENOENT, "the partition's directory is no longer there", str(self.directory)
        )

    def read(self) -> list[EpochEntry] | None:
        """The entries in the file; None if there is no file."""
        directory_fd = self._open_directory()
        try:
            try:
                fd = os.open(LEADER_EPOCH_CHECKPOINT, os.O_RDONLY, dir_fd=directory_fd)
            except FileNotFoundError:
                return None
        finally:
            os.close(directory_fd)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(self.path, 0, "not ASCII text") from e
        if not text.endswith("\n"):
            raise CorruptCheckpointError(self.path, 0, "the last line is cut short")
        return parse_entries(self.path, text.split("\n")[:-1])

    def write(self, entries: Sequence[EpochEntry]) -> None:
        """Replace the file with ``entries``, atomically, without an fsync (see the module
        docstring)."""
        content = format_entries(entries)
        directory_fd = self._open_directory()
        try:
            replace_file_in(directory_fd, LEADER_EPOCH_CHECKPOINT, content, self._file_ops)
        finally:
            os.close(directory_fd)

    def close(self) -> None:
        """Nothing to release (no descriptor is held between writes)."""


def format_entries(entries: Sequence[EpochEntry]) -> bytes:
    """The file's bytes; raises ``ValueError`` for entries the cache could never hold."""
    for entry in entries:
        _check_entry(entry)
    if not _is_increasing(entries):
        raise ValueError(f"leader epoch entries do not strictly increase: {list(entries)}")
    lines = [str(VERSION), str(len(entries))]
    lines += [f"{e.epoch} {e.start_offset}" for e in entries]
    return ("\n".join(lines) + "\n").encode("ascii")


def parse_entries(path: Path, lines: list[str]) -> list[EpochEntry]:
    """Strictly parse the file's lines (without line ends); raises ``CorruptCheckpointError``."""
    parse_header(path, lines)
    entries: list[EpochEntry] = []
    for number, line in enumerate(lines[2:], start=3):
        fields = line.split(" ")
        if len(fields) != 2 or not all(_NUMBER.fullmatch(f) for f in fields):
            raise CorruptCheckpointError(
                path, number, f"expected '<epoch> <start_offset>', got {line!r}"
            )
        entry = EpochEntry(int(fields[0]), int(fields[1]))
        if entry.epoch > _EPOCH_MAX or entry.start_offset > _OFFSET_MAX:
            raise CorruptCheckpointError(path, number, f"out of range: {line!r}")
        if entries and not _is_increasing([entries[-1], entry]):
            raise CorruptCheckpointError(
                path, number, f"{line!r} does not follow {entries[-1]}: entries must increase"
            )
        entries.append(entry)
    return entries


class LeaderEpochFileCache:
    """A partition's ``(epoch, start_offset)`` entries and their checkpoint file."""

    def __init__(
        self,
        checkpoint: LeaderEpochCheckpointFile | None = None,
        entries: Iterable[EpochEntry] = (),
        *,
        written: bool = True,
    ):
        """``written``: whether the file already holds ``entries`` (False: write them)."""
        self.checkpoint = checkpoint
        self._entries = list(entries)
        for entry in self._entries:
            _check_entry(entry)
        if not _is_increasing(self._entries):
            raise ValueError(f"leader epoch entries do not strictly increase: {self._entries}")
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._version = 0  # bumped by every change
        self._written_version = 0 if written else -1  # the version the file holds
        self._closed = False

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.entries()})"

    # -- reading -------------------------------------------------------------------------

    def entries(self) -> tuple[EpochEntry, ...]:
        with self._lock:
            return tuple(self._entries)

    def latest_entry(self) -> EpochEntry | None:
        """The newest entry, read without ``_lock``: every follower fetch round asks it for
        each partition on both ends (a tenth of a broker's time with 3,000 partitions, most
        of it the lock). One slice of the list is one step under the GIL, so the answer is the
        last entry before or after a concurrent change, never a torn one."""
        tail = self._entries[-1:]
        return tail[0] if tail else None

    def latest_epoch(self) -> int | None:
        """The newest epoch that has an entry; None when the cache is empty."""
        latest = self.latest_entry()
        return None if latest is None else latest.epoch

    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose leader wrote ``offset``: the entry with the largest start at or
        below it; None if ``offset`` lies before the first entry."""
        with self._lock:
            starts = [e.start_offset for e in self._entries]
            index = bisect.bisect_right(starts, offset) - 1
            return self._entries[index].epoch if index >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: ``(epoch, end_offset)`` for OffsetForLeaderEpoch.

        ``epoch`` is the largest epoch at or below ``requested_epoch``, ``end_offset`` the start
        of the next higher epoch, or ``log_end_offset`` when the latest epoch is requested.
        ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`` when the cache is empty or
        ``requested_epoch`` is undefined or above the latest epoch. When it is below the first
        epoch the answer is ``(requested_epoch, first entry's start)``, as Kafka: the data of
        older epochs was deleted, and the follower must truncate to where this log's known
        history starts, never trust its own older data beyond it.
        """
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        with self._lock:
            entries = self._entries
            if requested_epoch < 0 or not entries:
                return undefined
            if entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            epochs = [e.epoch for e in entries]
            higher = bisect.bisect_right(epochs, requested_epoch)
            if higher == len(entries):
                return undefined
            if higher == 0:
                return requested_epoch, entries[0].start_offset
            return entries[higher - 1].epoch, entries[higher].start_offset

    # -- changes (the log's appending thread, under the log's lock) ------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the entries changed.

        Ignored unless ``epoch`` is newer than the latest; raises ``ValueError`` for a negative
        epoch or offset (as Kafka's ``IllegalArgumentException``).
        """
        entry = EpochEntry(epoch, start_offset)
        _check_entry(entry)
        with self._lock:
            entries = self._entries
            if entries and epoch <= entries[-1].epoch:
                return False
            removed = []
            while entries and entries[-1].start_offset >= start_offset:
                removed.append(entries.pop())
            if removed and (len(removed) > 1 or removed[0].start_offset != start_offset):
                # Data of those epochs was still counted in the log: worth a look.
                log.warning("epoch entry %s replaced conflicting entries %s", entry, removed)
            entries.append(entry)
            self._version += 1
            return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove every entry starting at or above ``end_offset``; True if any went."""
        with self._lock:
            entries = self._entries
            if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
                return False
            while entries and entries[-1].start_offset >= end_offset:
                entries.pop()
            self._version += 1
            return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at ``start_offset``: entries starting at or below it go, but the
        last of them is kept with its start moved up to ``start_offset`` (it still holds the
        first batches). True if the entries changed."""
        with self._lock:
            entries = self._entries
            keep_from = 0
            while keep_from < len(entries) and entries[keep_from].start_offset <= start_offset:
                keep_from += 1
            if keep_from == 0:
                return False
            first = EpochEntry(entries[keep_from - 1].epoch, start_offset)
            if keep_from == 1 and entries[0] == first:
                return False
            self._entries = [first, *entries[keep_from:]]
            self._version += 1
            return True

    def clear(self) -> None:
        """Forget every entry (before a rebuild from the batches)."""
        with self._lock:
            if self._entries:
                self._entries = []
                self._version += 1

    # -- the file (storage threads, never under the log's lock) ----------------------------

    @property
    def dirty(self) -> bool:
        """Whether the entries changed since the file was last written (or read)."""
        with self._lock:
            return self._version != self._written_version

    def flush(self) -> bool:
        """Write the entries to the file if they changed since it was last written.

        Returns whether it wrote. Blocks on the disk: never on the appending thread, never
        under the log's lock. Raises ``OSError`` if the disk fails; a closed cache (a deleted
        or closed partition) writes nothing.
        """
        with self._write_lock:
            if self._closed or self.checkpoint is None:
                return False
            with self._lock:
                version, entries = self._version, tuple(self._entries)
            if version == self._written_version:
                return False
            self.checkpoint.write(entries)
            self._written_version = version
            return True

    def relocate(self, directory: Path) -> None:
        """The log renamed its directory (under the log's lock): the file follows it."""
        if self.checkpoint is not None:
            self.checkpoint.relocate(directory)

    def close(self) -> None:
        """Wait for a write in progress, then write nothing more."""
        with self._write_lock:
            self._closed = True
            if self.checkpoint is not None:
                self.checkpoint.close()
