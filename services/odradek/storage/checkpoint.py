"""Kafka's offset checkpoint files: one offset per topic-partition, kept per log directory.

A log directory holds ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
(with replication) ``replication-offset-checkpoint``, all in this text format, byte for byte as
Kafka writes it, so a log directory can move between Kafka and Odradek::

    0                   <- format version, always 0
    2                   <- number of entries
    orders 0 1234       <- <topic> <partition> <offset>, one line per entry
    orders 1 987

Topic names only use ``[a-zA-Z0-9._-]``, so a space separates the fields safely.

A write is atomic and durable: the whole file goes to ``<path>.tmp``, which is flushed and
fsynced, then ``os.replace`` moves it onto ``<path>`` and the directory is fsynced so the rename
itself survives a power loss. A reader therefore sees either the old file or the new one, never
a mix; a ``.tmp`` left by a crash is ignored and overwritten by the next write. The writes,
fsyncs, rename and clean-up go through the ``FileOps`` given (``file_ops``), the open and the
reads do not.

Reading is strict: a file that does not follow the format raises ``CorruptCheckpointError`` with
the path and line number; the caller decides whether to recover without it. A missing file is
an empty checkpoint (a new log directory). An ``OffsetCheckpointFile`` may be shared by threads:
a lock serialises its reads and writes.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path

from odradek.common.limits import INT32_MAX, INT64_MAX, INT64_MIN
from odradek.common.topics import is_legal_topic
from odradek.errors import ErrorCode, OdradekError
from odradek.storage.file_ops import OS_FILE_OPS, FileOps, unlink_if_exists, write_all

__all__ = [
    "CorruptCheckpointError",
    "OffsetCheckpointFile",
    "parse_header",
    "replace_file_in",
]

VERSION = 0
_INTEGER = re.compile(r"-?[0-9]+")
_PARTITION_MAX = INT32_MAX
_OFFSET_MIN, _OFFSET_MAX = INT64_MIN, INT64_MAX


class CorruptCheckpointError(OdradekError):
    """A checkpoint file does not follow the format; ``line`` is 1-based, 0 for the whole file."""

    error_code = ErrorCode.kafka_storage_error

    def __init__(self, path: Path, line: int, message: str) -> None:
        where = f"{path}, line {line}" if line else str(path)
        super().__init__(f"Corrupt checkpoint file {where}: {message}")
        self.path = path
        self.line = line


class OffsetCheckpointFile:
    """One checkpoint file mapping ``(topic, partition)`` to an offset."""

    def __init__(self, path: str | os.PathLike[str], file_ops: FileOps = OS_FILE_OPS) -> None:
        self.path = Path(path)
        self._file_ops = file_ops  # the write, fsyncs and rename of ``write``
        self._tmp_path = self.path.with_name(self.path.name + ".tmp")
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OffsetCheckpointFile({str(self.path)!r})"

    def read(self) -> dict[tuple[str, int], int]:
        """The entries in the file; ``{}`` if there is no file."""
        with self._lock:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return {}
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(self.path, 0, "not UTF-8 text") from e
        return self._parse(text.splitlines())

    def write(self, entries: Mapping[tuple[str, int], int]) -> None:
        """Replace the file with ``entries``, atomically and durably."""
        content = self._format(entries)  # raises ValueError before anything is touched
        with self._lock:
            try:
                # The mode ``open(path, "wb")`` gives: the umask decides.
                fd = os.open(self._tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
                try:
                    write_all(self._file_ops, fd, content)
                    self._file_ops.fsync(fd)
                finally:
                    os.close(fd)
                self._file_ops.replace(self._tmp_path, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    unlink_if_exists(self._file_ops, self._tmp_path)
                raise
            _fsync_directory(self.path.parent, self._file_ops)

    def _parse(self, lines: list[str]) -> dict[tuple[str, int], int]:
        parse_header(self.path, lines)
        entries: dict[tuple[str, int], int] = {}
        for number, line in enumerate(lines[2:], start=3):
            fields = line.split()
            if (
                len(fields) != 3
                or not is_legal_topic(fields[0])
                or not _INTEGER.fullmatch(fields[1])
                or not _INTEGER.fullmatch(fields[2])
            ):
                raise CorruptCheckpointError(
                    self.path, number, f"expected '<topic> <partition> <offset>', got {line!r}"
                )
            topic, partition, offset = fields[0], int(fields[1]), int(fields[2])
            if not (0 <= partition <= _PARTITION_MAX and _OFFSET_MIN <= offset <= _OFFSET_MAX):
                raise CorruptCheckpointError(self.path, number, f"out of range: {line!r}")
            if (topic, partition) in entries:
                raise CorruptCheckpointError(self.path, number, f"duplicate {topic}-{partition}")
            entries[topic, partition] = offset
        return entries

    @staticmethod
    def _format(entries: Mapping[tuple[str, int], int]) -> bytes:
        lines = [str(VERSION), str(len(entries))]
        for (topic, partition), offset in entries.items():
            if not is_legal_topic(topic):
                raise ValueError(f"illegal topic name for a checkpoint: {topic!r}")
            if not _is_int(partition) or not 0 <= partition <= _PARTITION_MAX:
                raise ValueError(f"illegal partition for a checkpoint: {partition!r}")
            if not _is_int(offset) or not _OFFSET_MIN <= offset <= _OFFSET_MAX:
                raise ValueError(f"illegal offset for a checkpoint: {offset!r}")
            lines.append(f"{topic} {partition} {offset}")
        return ("\n".join(lines) + "\n").encode("ascii")


def parse_header(path: Path, lines: list[str]) -> None:
    """Check a checkpoint's version line and entry count (any file of Kafka's ``CheckpointFile``
    format: version 0, the number of entries, one entry a line)."""
    if not lines:
        raise CorruptCheckpointError(path, 0, "empty file")
    if lines[0].strip() != str(VERSION):
        raise CorruptCheckpointError(path, 1, f"unknown version {lines[0]!r}")
    if len(lines) < 2 or not _INTEGER.fullmatch(lines[1].strip()):
        raise CorruptCheckpointError(path, 2, "missing number of entries")
    expected = int(lines[1])
    if expected != len(lines) - 2:
        raise CorruptCheckpointError(
            path, 2, f"expected {expected} entries but found {len(lines) - 2}"
        )


def replace_file_in(
    directory_fd: int, name: str, content: bytes, file_ops: FileOps = OS_FILE_OPS
) -> None:
    """Replace ``name`` in the directory open as ``directory_fd`` with ``content``, atomically
    but not durably: ``<name>.tmp`` written and renamed onto ``name`` (every change through
    ``file_ops``), no fsync. Every reader sees the old file or the new one, but a power loss may
    leave the old file, or none: for a file its reader can rebuild (the leader-epoch
    checkpoint, ``leader_epoch``, its one user).

    Through the directory's descriptor rather than its path, so a write racing with the
    directory's rename (a partition's deletion) lands in the renamed directory, never in a new
    one that took the old name.
    """
    tmp_name = name + ".tmp"
    try:
        fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=directory_fd)
        try:
            write_all(file_ops, fd, content)
        finally:
            os.close(fd)
        file_ops.replace(tmp_name, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            file_ops.unlink(tmp_name, dir_fd=directory_fd)
        raise


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fsync_directory(directory: Path, file_ops: FileOps) -> None:
    """Make a rename inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        file_ops.fsync(fd)
    finally:
        os.close(fd)
