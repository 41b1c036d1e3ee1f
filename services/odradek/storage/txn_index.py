"""The aborted-transaction index of a segment: ``<base offset>.txnindex``, Kafka's format.

One entry per transaction whose ABORT marker is in the segment, in marker order; each entry is
34 bytes, big-endian, as Kafka's ``AbortedTxn``::

    version             int16   0
    producer_id         int64
    first_offset        int64   the transaction's first offset in this partition
    last_offset         int64   its ABORT marker's offset
    last_stable_offset  int64   the first offset still unstable once it was aborted

A read_committed fetch of ``[start, end)`` must drop every aborted transaction's records there:
it collects the entries with ``last_offset >= start`` and ``first_offset < end`` from the segment
holding ``start`` onwards, and may stop at the first entry whose ``last_stable_offset >= end``
(every transaction overlapping the range ended by then: ``collect``).

Invariants: ``last_offset`` strictly increases along a file and every entry's marker lies in the
segment. The file exists only once an entry was written (most segments never hold one). It
follows its segment: renamed, truncated and deleted with it. Entries are derived from the log
(the producer state sees each marker), so the log rebuilds the entries of every marker it
replays at load (``truncate_to`` the replay's start, then appends); what lies below the replay's
start was fsynced with its segment (``sync``), since the replay never starts above the recovery
point after an unclean shutdown. A torn tail (a partial entry) is dropped when the file is read.

Descriptors: none held. An append opens the file, writes its entry and closes it (one per
aborted transaction in the partition: rare next to appends); ``handle`` and ``sync`` open it
for an fsync, which covers every write to the file whatever descriptor made it. So a replica's
open files do not count its transactions (``broker.replica_budget``). The ``path`` follows the
segment's renames (``rename``, the segment's ``relocate``), under the log's lock.

Thread contract: as its segment's other files, written under the log's lock; ``collect`` reads
the in-memory entries, which are only replaced whole (a list swapped, never changed in place).
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.file_ops import OS_FILE_OPS, FileOps, unlink_if_exists

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            CURRENT_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


class TransactionIndex:
    """A segment's aborted transactions, in memory and in ``path``; see the module docstring."""

    def __init__(self, path: Path, file_ops: FileOps = OS_FILE_OPS):
        self.path = path
        self._file_ops = file_ops  # its writes, truncations, fsyncs, renames, deletion
        self._dirty = False  # written since the last fsync
        self.entries: tuple[AbortedTxn, ...] = self._read()

    def _read(self) -> tuple[AbortedTxn, ...]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return ()
        entries: list[AbortedTxn] = []
        whole = len(data) - len(data) % ENTRY_SIZE
        for position in range(0, whole, ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, position)
            if version != CURRENT_VERSION:
                log.warning(
                    "%s: entry of unknown version %d, ignoring the rest", self.path, version
                )
                break
            entries.append(AbortedTxn(*fields))
        if len(entries) * ENTRY_SIZE != len(data):
            self._file_ops.truncate(self.path, len(entries) * ENTRY_SIZE)
        return tuple(entries)

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} does not follow the last one "
                f"({self.entries[-1].last_offset}) in {self.path}"
            )
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._file_ops.pwrite(fd, txn.encode(), len(self.entries) * ENTRY_SIZE)
        finally:
            os.close(fd)
        self.entries = (*self.entries, txn)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above ``offset``."""
        keep = tuple(e for e in self.entries if e.last_offset < offset)
        if len(keep) == len(self.entries):
            return
        self._file_ops.truncate(self.path, len(keep) * ENTRY_SIZE)
        self.entries = keep
        self._dirty = True

    def collect(self, start: int, end: int) -> tuple[list[AbortedTxn], bool]:
        """The entries overlapping ``[start, end)``, and whether the search is complete."""
        found: list[AbortedTxn] = []
        for entry in self.entries:
            if entry.last_offset >= start and entry.first_offset < end:
                found.append(entry)
            if entry.last_stable_offset >= end:
                return found, True
        return found, False

    def handle(self) -> int | None:
        """A new descriptor to fsync outside the log's lock, the caller closes it (None:
        nothing written since the last)."""
        if not self._dirty:
            return None
        fd = os.open(self.path, os.O_RDONLY)
        self._dirty = False
        return fd

    def sync(self) -> None:
        """fsync now, on this thread, if written since the last."""
        if self._dirty:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                self._file_ops.fsync(fd)
            finally:
                os.close(fd)
            self._dirty = False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            self._file_ops.replace(self.path, path)
        self.path = path

    def close(self) -> None:
        """Nothing to release (no descriptor is held); kept so its segment closes each file."""

    def delete(self) -> None:
        unlink_if_exists(self._file_ops, self.path)
