"""The sparse ``.index`` and ``.timeindex`` files of a segment, as Kafka lays them out.

Both are arrays of fixed-size big-endian entries, sorted::

    .index      8 bytes an entry:  relative_offset int32 | position int32
    .timeindex 12 bytes an entry:  timestamp int64       | relative_offset int32

``relative_offset`` is an offset minus the segment's base offset, so entries stay 4 bytes wide
and a segment can hold at most 2**31 - 1 offsets past its base. An ``.index`` entry maps the
last offset of a batch to the file position where that batch starts; a ``.timeindex`` entry says
"no batch before this offset has a timestamp above this one".

Invariants, enforced by ``append``: offsets, positions and timestamps strictly increase from one
entry to the next. Entries are only ever written at positions greater than zero (a segment's
first batch is never indexed), so an all-zero entry means "never written".

Descriptors, as Kafka's ``LazyIndex``: no index holds a descriptor of its own, so a replica's
open files do not grow with its indexes (``broker.replica_budget`` counts on it). The active
segment's index keeps its entries in a ``bytearray`` and ``sync`` writes the new ones, once per
``index.interval.bytes`` appended, through a descriptor kept by ``_WRITE_DESCRIPTORS``: a pool
shared by every log, at most ``WRITE_DESCRIPTORS_MAX`` descriptors, the least recently used
closed first, so the partitions being written keep theirs and thousands of idle ones hold none.
Opening and closing the file at each ``sync`` instead cost ~3.3 us a write, 17% of the append
throughput of 16 KiB batches (``bench/log_bench.py``, 466 -> 386 MB/s); the pool costs ~0.8 us.
Rarer changes (a roll's ``trim``, ``make_writable``, ``truncate_to_entries``, ``reset``) open
the file and close it, and ``handle()`` opens a fresh descriptor for a flush. A read-only index
(every older segment) reads its size with a ``stat`` at load and its entries at its first
lookup, through a descriptor closed at once. (Not an mmap: Python's ``mmap`` keeps a duplicate
of the descriptor.) The entries read are cached, all indexes together up to
``READ_ONLY_INDEX_CACHE_BYTES``, least recently loaded evicted first. A file is opened by its
``path``, which follows every rename of the file (``rename``) or of its directory (the
segment's ``relocate``), always under the log's lock; a pooled descriptor follows the file
itself, and an index gives its up when it rolls, closes or goes.

Life cycle: the index of the active segment is preallocated to ``segment.index.bytes`` (rounded
down to whole entries) so appends never grow the file; when the segment rolls, the file is
trimmed to its entries, as Kafka does, and a trimmed file is what a clean shutdown leaves. A file
left at full size by a crash is rebuilt from the log by the segment's recovery.

Not thread-safe: every call that touches the entries (``append``, ``sync``, ``trim``, ``reset``,
lookups) comes from the log's appending thread or with the log's lock held (see ``log``); a
flush on another thread fsyncs a descriptor from ``handle()`` taken under that lock, never the
buffer.
"""

from __future__ import annotations

import os
import struct
import threading
from collections import OrderedDict
from pathlib import Path

from odradek.common.limits import INT32_MAX
from odradek.errors import CorruptRecordError
from odradek.storage.file_ops import OS_FILE_OPS, FileOps, unlink_if_exists

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


READ_ONLY_INDEX_CACHE_BYTES = 64 * 1024 * 1024  # read-only indexes' entries kept in memory
# Descriptors of active indexes kept open between their writes, all logs together (module
# docstring); ``broker.replica_budget``'s reserve covers them.
WRITE_DESCRIPTORS_MAX = 128


class _ReadOnlyCache:
    """The read-only indexes whose entries are in memory, least recently loaded first.

    Past ``capacity_bytes`` the oldest are evicted (they read their file again when next
    looked up). Shared by every log's threads, so it has its own lock; an index evicted while a
    lookup holds its bytes finishes that lookup with them.
    """

    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = capacity_bytes
        self._lock = threading.Lock()
        self._sizes: OrderedDict[int, tuple[_EntryFile, int]] = OrderedDict()
        self.bytes = 0

    def loaded(self, index: _EntryFile, size: int) -> None:
        evicted = []
        with self._lock:
            previous = self._sizes.pop(id(index), None)
            if previous is not None:
                self.bytes -= previous[1]
            self._sizes[id(index)] = (index, size)
            self.bytes += size
            while self.bytes > self.capacity_bytes and len(self._sizes) > 1:
                _, (oldest, oldest_size) = self._sizes.popitem(last=False)
                self.bytes -= oldest_size
                evicted.append(oldest)
        for each in evicted:
            each._evict()

    def forget(self, index: _EntryFile) -> None:
        with self._lock:
            previous = self._sizes.pop(id(index), None)
            if previous is not None:
                self.bytes -= previous[1]


class _WriteDescriptors:
    """Descriptors of active index files kept open between writes, least recently used closed
    first past ``capacity``, shared by every log's threads (its own lock).

    ``acquire`` pins an index's descriptor (opening it if it has none here) and ``release``
    unpins it: a pinned descriptor is never closed, so an eviction on one thread cannot close
    a descriptor another thread is writing through (and let the number be reused for another
    file). Only the thread holding an index's log lock acquires it, so an index is pinned by
    at most that one thread; past ``capacity`` with every descriptor pinned the pool holds one
    more per such thread until they release. ``forget`` closes an index's descriptor (it rolled,
    closed or went); the pool keys indexes by identity and keeps each alive while it holds its
    descriptor, so a new index never inherits another's.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._lock = threading.Lock()
        self._open: OrderedDict[_EntryFile, list[int]] = OrderedDict()  # index -> [fd, pins]

    def __len__(self) -> int:
        return len(self._open)

    def acquire(self, index: _EntryFile) -> int:
        with self._lock:
            held = self._open.get(index)
            if held is not None:
                self._open.move_to_end(index)
                held[1] += 1
                return held[0]
        fd = index._open()  # outside the lock: an open may wait on the disk
        with self._lock:
            held = self._open.get(index)
            if held is None:
                self._open[index] = [fd, 1]
                evicted = self._evict()
            else:  # opened meanwhile by a caller breaking the contract: keep one
                held[1] += 1
                fd, evicted = held[0], [fd]
        _close_all(evicted)
        return fd

    def release(self, index: _EntryFile, fd: int) -> None:
        with self._lock:
            held = self._open.get(index)
            if held is not None and held[0] == fd:
                held[1] -= 1
                if len(self._open) <= self.capacity:
                    return
                evicted = self._evict()
            else:  # forgotten while pinned: closed by its last user
                evicted = [fd]
        _close_all(evicted)

    def forget(self, index: _EntryFile) -> None:
        with self._lock:
            held = self._open.pop(index, None)
        if held is not None and held[1] == 0:
            os.close(held[0])

    def _evict(self) -> list[int]:
        """Unpinned descriptors to close, least recently used first (the lock is held)."""
        evicted = []
        if len(self._open) > self.capacity:
            for index, (fd, pins) in list(self._open.items()):
                if len(self._open) <= self.capacity:
                    break
                if pins == 0:
                    del self._open[index]
                    evicted.append(fd)
        return evicted


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


class IndexFullError(Exception):
    """Raised by ``append`` on a full index; the log rolls before this can happen."""


class CorruptIndexError(CorruptRecordError):
    """An index file's entries break the ordering invariant; the segment rebuilds it."""


class _EntryFile:
    """A file of fixed-size entries; subclasses define the entry layout.

    While writable (active segment) the entries live in a ``bytearray``; ``sync`` writes the new
    ones to the preallocated file with one ``pwrite`` (the segment calls it once per append; it
    writes only when an entry was added). Writing through an mmap instead would make the first
    touch of each page of a fresh, sparse file allocate blocks inside a page fault, which on
    ext4 was measured at ~3 ms against ~8 us for a ``pwrite``: paid twice at every roll.
    No descriptor of its own (module docstring): ``sync`` writes through the pool's, other
    changes open the file and close it. Once trimmed (inactive segment) the entries are read at
    the first lookup, so memory follows use.
    """

    entry = _OFFSET_ENTRY

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_bytes: int,
        *,
        writable: bool,
        file_ops: FileOps = OS_FILE_OPS,
    ):
        self.path = path
        self._file_ops = file_ops  # its writes, truncations, fsyncs, renames, deletion
        self.base_offset = base_offset
        self.max_entries = max(max_index_bytes // self.entry.size, 1)
        self._buffer: bytearray | None = None  # the entries while writable
        self._cached: bytes | None = None  # while read-only: None until loaded, or evicted
        self.writable = False
        # A file found longer than its entries (at its preallocated size: the segment was
        # active when the broker died) is rebuilt by the segment's recovery: sanity_check
        # refuses it until ``reset``.
        self.left_untrimmed = False
        if writable:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                slots = os.fstat(fd).st_size // self.entry.size
                self.entries = self._written_entries(fd, slots)
                self.left_untrimmed = self.entries < slots
                self._synced = self.entries  # entries already in the file
                self._make_writable(fd)
            finally:
                os.close(fd)
        else:
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
                size = 0
            self.entries = size // self.entry.size
            self._synced = self.entries

    # -- file handling -------------------------------------------------------------------

    def _written_entries(self, fd: int, slots: int) -> int:
        """How many of the file's ``slots`` entries were written: a binary search for the
        first all-zero one (written entries are a prefix and never all zero: see the module
        docstring). A crashed active segment leaves a preallocated file of ~10 MB; reading or
        zeroing all of it at recovery, twice per partition, was most of an unclean restart."""
        size = self.entry.size
        zero = bytes(size)
        low, high = 0, slots  # entries [0, low) are written, [high, slots) are not
        while low < high:
            middle = (low + high) // 2
            if os.pread(fd, size, middle * size) == zero:
                high = middle
            else:
                low = middle + 1
        return low

    def _open(self) -> int:
        """A descriptor of the file for one change; the caller closes it. Not ``O_CREAT``: the
        file exists from the constructor on, and one missing later is an I/O error to report,
        not a file to make again."""
        return os.open(self.path, os.O_RDWR)

    def _loaded(self) -> bytes:
        """Read the entries through a descriptor closed at once; cached in ``_READ_ONLY``."""
        size = self.entries * self.entry.size
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, size, 0)
        finally:
            os.close(fd)
        if len(data) != size:
            raise CorruptIndexError(f"{self.path} is shorter than its {self.entries} entries")
        self._cached = data
        _READ_ONLY.loaded(self, size)
        return data

    def _evict(self) -> None:
        """Called by ``_READ_ONLY`` (any thread) to drop the cached entries, read again at the
        next lookup; it never touches ``_buffer``, so a writable index is never affected."""
        self._cached = None

    def _release_buffer(self) -> None:
        if self._cached is not None:
            _READ_ONLY.forget(self)
        self._cached = None
        self._buffer = None

    def trim(self) -> None:
        """Shrink the file to its entries (the segment is no longer active)."""
        if self.writable:
            fd = self._open()
            try:
                self._sync(fd)
                self._file_ops.ftruncate(fd, self.entries * self.entry.size)
            finally:
                os.close(fd)
            self._release_buffer()
            self.writable = False
        _WRITE_DESCRIPTORS.forget(self)

    def make_writable(self) -> None:
        """Load the entries and preallocate the file again (the segment is active again)."""
        if self.writable:
            return
        fd = self._open()
        try:
            self._make_writable(fd)
        finally:
            os.close(fd)

    def _make_writable(self, fd: int) -> None:
        size = self.entries * self.entry.size
        entries = bytearray(os.pread(fd, size, 0)) if size else bytearray()
        self._release_buffer()
        self._buffer = entries
        self._file_ops.ftruncate(fd, self.max_entries * self.entry.size)
        self.writable = True

    def sync(self) -> None:
        """Write the entries added since the last call to the file (page cache, no fsync),
        through the descriptor ``_WRITE_DESCRIPTORS`` keeps for it."""
        if self.entries > self._synced:
            fd = _WRITE_DESCRIPTORS.acquire(self)
            try:
                self._sync(fd)
            finally:
                _WRITE_DESCRIPTORS.release(self, fd)

    def _sync(self, fd: int) -> None:
        if self.entries > self._synced:
            start = self._synced * self.entry.size
            self._file_ops.pwrite(fd, self._buffer[start : self.entries * self.entry.size], start)
            self._synced = self.entries

    def flush(self) -> None:
        self.sync()
        handle = self.handle()
        try:
            self._file_ops.fsync(handle)
        finally:
            os.close(handle)

    def handle(self) -> int:
        """A new descriptor of the file, for an fsync on another thread (the caller closes it).

        An fsync through any descriptor of the file makes every write to it durable, so this
        one covers what ``sync`` wrote through its own, closed since."""
        return os.open(self.path, os.O_RDONLY)

    def close(self) -> None:
        self.trim()
        self._release_buffer()

    def release(self) -> None:
        """Close without trimming or writing anything (the file is being deleted)."""
        self._release_buffer()
        _WRITE_DESCRIPTORS.forget(self)

    def rename(self, path: Path) -> None:
        self._file_ops.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self._release_buffer()
        _WRITE_DESCRIPTORS.forget(self)
        unlink_if_exists(self._file_ops, self.path)

    # -- entries -------------------------------------------------------------------------

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry.size

    def _entry(self, n: int) -> tuple[int, int]:
        if self.writable:
            return self.entry.unpack_from(self._buffer, n * self.entry.size)
        buffer = self._cached
        if buffer is None:  # first lookup since the roll, the load or an eviction
            buffer = self._loaded()
        return self.entry.unpack_from(buffer, n * self.entry.size)

    def _write(self, first: int, second: int) -> None:
        if self.is_full:
            raise IndexFullError(f"{self.path} holds {self.entries} entries, its maximum")
        self.make_writable()
        self._buffer += self.entry.pack(first, second)
        self.entries += 1

    def _search(self, target: int, key: int) -> int:
        """Index of the last entry whose field ``key`` is <= target, or -1 (binary search)."""
        low, high = 0, self.entries - 1
        found = -1
        while low <= high:
            middle = (low + high) // 2
            if self._entry(middle)[key] <= target:
                found = middle
                low = middle + 1
            else:
                high = middle - 1
        return found

    def truncate_to_entries(self, entries: int) -> None:
        """Forget every entry from ``entries`` on (zeroing them, so a crash leaves no ghost)."""
        entries = max(0, min(entries, self.entries))
        if entries < self.entries:
            self.make_writable()
            start = entries * self.entry.size
            if self._synced > entries:
                zeros = bytes(self._synced * self.entry.size - start)
                fd = self._open()
                try:
                    self._file_ops.pwrite(fd, zeros, start)
                finally:
                    os.close(fd)
                self._synced = entries
            del self._buffer[start:]
        self.entries = entries

    def reset(self) -> None:
        """Drop all entries; used before rebuilding the index from the log.

        The file is cut to nothing and preallocated again rather than zeroed: whatever a crash
        left in it goes (``_written_entries`` may have counted short), at the cost of two
        ``ftruncate`` calls instead of writing up to ``segment.index.bytes`` of zeros."""
        fd = self._open()
        try:
            if not self.writable:
                self._make_writable(fd)
            self._file_ops.ftruncate(fd, 0)
            self._file_ops.ftruncate(fd, self.max_entries * self.entry.size)
        finally:
            os.close(fd)
        del self._buffer[:]
        self.entries = self._synced = 0
        self.left_untrimmed = False

    def _refuse_untrimmed(self) -> None:
        if self.left_untrimmed:
            raise CorruptIndexError(
                f"{self.path} was left at its preallocated size (not closed cleanly)"
            )


class OffsetIndex(_EntryFile):
    """Maps the last offset of a batch to the file position where the batch starts."""

    entry = _OFFSET_ENTRY

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(offset, position)`` of the last entry, or ``(base_offset, 0)`` when empty."""
        if self.entries == 0:
            return self.base_offset, 0
        relative, position = self._entry(self.entries - 1)
        return self.base_offset + relative, position

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise ValueError(f"offset {offset} is outside segment {self.base_offset}")
        if self.entries:
            last_relative, last_position = self._entry(self.entries - 1)
            if relative <= last_relative or position <= last_position:
                raise ValueError(
                    f"index entry ({offset}, {position}) does not follow "
                    f"({self.base_offset + last_relative}, {last_position}) in {self.path}"
                )
        self._write(relative, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry with offset <= target, else the start."""
        found = self._search(offset - self.base_offset, key=0)
        if found < 0:
            return self.base_offset, 0
        relative, position = self._entry(found)
        return self.base_offset + relative, position

    def lookup_by_position(self, position: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry starting at or before ``position``."""
        found = self._search(position, key=1)
        if found < 0:
            return self.base_offset, 0
        relative, entry_position = self._entry(found)
        return self.base_offset + relative, entry_position

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self.truncate_to_entries(self._search(offset - self.base_offset - 1, key=0) + 1)

    def sanity_check(self, log_size: int) -> None:
        """Raise ``CorruptIndexError`` if the last entries are out of order or past the log.

        Checks only the tail, as Kafka does: a file left unwritten past its entries (all zeros
        after a crash) fails here, and the segment rebuilds the index from the log.
        """
        self._refuse_untrimmed()
        for n in range(max(self.entries - 2, 0), self.entries):
            relative, position = self._entry(n)
            previous = self._entry(n - 1) if n else (-1, 0)
            if relative <= previous[0] or position <= previous[1] or position >= log_size:
                raise CorruptIndexError(
                    f"{self.path}: entry {n} ({relative}, {position}) breaks the index order"
                )


class TimeIndex(_EntryFile):
    """Maps a timestamp to the offset of the first batch that reached it."""

    entry = _TIME_ENTRY

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, or ``(-1, base_offset)`` when empty."""
        if self.entries == 0:
            return -1, self.base_offset
        timestamp, relative = self._entry(self.entries - 1)
        return timestamp, self.base_offset + relative

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add ``(timestamp, offset)`` if the timestamp is newer than the last entry's."""
        last_timestamp, last_offset = self.last_entry
        if timestamp <= last_timestamp:
            return
        if self.entries and offset < last_offset:
            raise ValueError(
                f"time index entry ({timestamp}, {offset}) goes back before offset "
                f"{last_offset} in {self.path}"
            )
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise ValueError(f"offset {offset} is outside segment {self.base_offset}")
        self._write(timestamp, relative)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry with timestamp <= target, else the start."""
        found = self._search(timestamp, key=0)
        if found < 0:
            return -1, self.base_offset
        entry_timestamp, relative = self._entry(found)
        return entry_timestamp, self.base_offset + relative

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset`` (offsets are non-decreasing)."""
        keep = self.entries
        while keep > 0 and self.base_offset + self._entry(keep - 1)[1] >= offset:
            keep -= 1
        self.truncate_to_entries(keep)

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` if the last entries are out of order (see OffsetIndex)."""
        self._refuse_untrimmed()
        for n in range(max(self.entries - 2, 0), self.entries):
            timestamp, relative = self._entry(n)
            previous = self._entry(n - 1) if n else (-1, -1)
            if timestamp <= previous[0] or relative < previous[1]:
                raise CorruptIndexError(
                    f"{self.path}: entry {n} ({timestamp}, {relative}) breaks the index order"
                )


_READ_ONLY = _ReadOnlyCache(READ_ONLY_INDEX_CACHE_BYTES)
_WRITE_DESCRIPTORS = _WriteDescriptors(WRITE_DESCRIPTORS_MAX)
