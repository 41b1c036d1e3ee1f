"""One segment of a partition log: a ``.log`` file of record batches and its two indexes.

Files are named by the segment's base offset, zero-padded to 20 digits, as in Kafka::

    00000000000000001234.log        record batches, byte for byte as produced, offsets assigned
    00000000000000001234.index      sparse offset -> position (see ``index``)
    00000000000000001234.timeindex  sparse timestamp -> offset
    00000000000000001234.txnindex   aborted transactions whose marker is here (``txn_index``),
                                    only once there is one

Invariants (enforced by ``append`` and restored by ``recover``):
- the ``.log`` file is a sequence of whole, valid batches whose offsets strictly increase and are
  all at or above ``base_offset``; ``size`` is the byte length of that sequence;
- an index entry is added whenever more than ``index_interval_bytes`` were appended since the
  last one, so a lookup scans at most that many bytes of batch headers;
- ``max_timestamp`` / ``offset_of_max_timestamp`` are those of the batch that first reached the
  largest timestamp seen, which is what the time index records.

A segment is written by one thread at a time (its log's, holding the log's lock); reads
(``read``, ``translate_offset``) use ``pread`` and may run alongside an append because they never
look past a size they were given. Bytes are never read into Python on the fetch path: ``read``
returns a ``FileSlice`` for the server to ``sendfile``.

Descriptors: the segment holds one, its ``.log``'s; the indexes hold none of their own
(``index``: the active ones write through a small pool shared by all logs, other changes open
the file and close it; ``txn_index``: opened for each write). Other threads never read or fsync
through the segment's own descriptor, which may be closed under them (the log closes a segment
when it is deleted). Under the log's lock they take descriptors of their own instead:
``fsync_handles`` for a flush (the fsync then runs outside the lock), ``reader`` for the cleaner.
Such a descriptor keeps the file open, even unlinked, until its holder closes it.

Every write, truncation, fsync, rename and deletion of its files goes through the segment's
``file_ops`` (``file_ops``, its log's); reads and opens call ``os`` directly.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from odradek.common.limits import INT32_MAX
from odradek.errors import CorruptRecordError, InvalidRecordError
from odradek.storage.batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
)
from odradek.storage.file_ops import OS_FILE_OPS, FileOps, unlink_if_exists
from odradek.storage.files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
)
from odradek.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from odradek.storage.txn_index import TransactionIndex

NO_TIMESTAMP = -1
IOV_MAX = 1024  # Linux's limit on buffers in one pwritev call
# Recovery checksums a batch this many bytes at a time, so a huge batch (or a corrupt length
# field that claims one) costs no more memory than this.
RECOVERY_READ_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class FileSlice:
    """A byte range of a segment file: what a fetch sends with ``sendfile``.

    ``file`` stays open until the segment is deleted, and deletion is delayed by
    ``file.delete.delay.ms``, so a slice handed to the network outlives retention.
    """

    file: io.FileIO
    position: int
    size: int
    next_offset: int = -1  # the offset after the slice's last batch: where the next read starts

    def read_bytes(self) -> bytes:
        """Copy the range into memory (for replication checks and tests, not for fetches)."""
        return os.pread(self.file.fileno(), self.size, self.position)


class LogSegment:
    """A ``.log`` file with its ``.index`` and ``.timeindex``; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        active: bool,
        created_ms: int,
        suffix: str = "",
        file_ops: FileOps = OS_FILE_OPS,
    ):
        self.directory = directory
        self.file_ops = file_ops  # every write, truncation, fsync, rename and deletion
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = directory / (offset_file_name(base_offset, LOG_SUFFIX) + suffix)
        # Not O_APPEND: Linux ignores pwrite's position on such files, and appends use pwritev.
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.file = io.FileIO(self.fd, "r+b")
        self.size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(
            directory / (offset_file_name(base_offset, INDEX_SUFFIX) + suffix),
            base_offset,
            max_index_bytes,
            writable=active,
            file_ops=file_ops,
        )
        self.time_index = TimeIndex(
            directory / (offset_file_name(base_offset, TIME_INDEX_SUFFIX) + suffix),
            base_offset,
            max_index_bytes,
            writable=active,
            file_ops=file_ops,
        )
        self.txn_index = TransactionIndex(
            directory / (offset_file_name(base_offset, TXN_INDEX_SUFFIX) + suffix), file_ops
        )
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None
        self.bytes_since_last_index_entry = 0
        self.created_ms = created_ms
        self.suffix = suffix

    # -- writing -------------------------------------------------------------------------

    def append(
        self, buffers: Sequence[bytes | memoryview], headers: Sequence[tuple[int, BatchHeader]]
    ) -> None:
        """Write whole batches at the end of the file and index them.

        ``buffers`` are the batch bytes (offsets already assigned), in order; ``headers`` gives
        each batch's base offset as written with its header. On an I/O error the file is cut
        back to its old size before the error propagates, so the log never holds half a batch.
        """
        start = self.size
        write_past_end(self.file_ops, self.fd, buffers, start)
        self.publish(headers, start, sum(len(b) for b in buffers))

    def publish(
        self, headers: Sequence[tuple[int, BatchHeader]], start: int, total_bytes: int
    ) -> None:
        """Index batches already written at ``start`` (the end of the file) and take them in.

        The second half of ``append``, for bytes written by ``write_past_end``, maybe on another
        thread: until this runs, readers never look past ``size``.
        """
        if start != self.size:
            raise RuntimeError(
                f"{self.log_path}: publishing at {start}, but the end is {self.size}"
            )
        position = start
        for base_offset, header in headers:
            self._index_batch(base_offset, header, position)
            position += header.size_in_bytes
        self.offset_index.sync()
        self.time_index.sync()
        self.size = start + total_bytes

    def _index_batch(self, base_offset: int, header: BatchHeader, position: int) -> None:
        last_offset = base_offset + header.last_offset_delta
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        # A full index takes no entry: one append of several batches may fill it midway, and
        # raising there would leave written bytes past ``size``. The log rolls before the next.
        if self.bytes_since_last_index_entry > self.index_interval_bytes and not self.indexes_full:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += header.size_in_bytes
        self.next_offset = last_offset + 1

    def can_hold(self, last_offset: int) -> bool:
        """Whether ``last_offset`` still fits the 32-bit relative offsets of the indexes."""
        return last_offset - self.base_offset <= INT32_MAX

    @property
    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def flush(self) -> None:
        """Make the log and its indexes durable (fsync), on this thread (a private segment)."""
        self.file_ops.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.sync()

    def fsync_handles(self) -> list[int]:
        """Descriptors of its files, for a flush outside the log's lock: a duplicate of the
        ``.log``'s, fresh ones of the indexes (the txn index's only if it was written since
        the last).

        Call with the log's lock held: the indexes' new entries are written to the page cache
        first. The caller fsyncs and closes the descriptors; they stay valid if the segment is
        closed or deleted meanwhile.
        """
        self.offset_index.sync()
        self.time_index.sync()
        handles: list[int] = []
        try:
            handles.append(os.dup(self.fd))
            handles.append(self.offset_index.handle())
            handles.append(self.time_index.handle())
            txn_handle = self.txn_index.handle()
            if txn_handle is not None:
                handles.append(txn_handle)
        except OSError:
            close_all(handles)
            raise
        return handles

    def reader(self) -> SegmentReader:
        """Batches of this segment through a duplicated descriptor (close it when done)."""
        return SegmentReader(os.dup(self.fd), self.size)

    def on_roll(self) -> None:
        """The segment stops being active: record its final time entry, trim the indexes."""
        self._append_final_time_entry()
        self.offset_index.trim()
        self.time_index.trim()

    def _append_final_time_entry(self) -> None:
        """Record the segment's max timestamp, so retention and lookups see it after a restart."""
        if not self.time_index.is_full:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # -- reading -------------------------------------------------------------------------

    def read_header(self, position: int) -> BatchHeader | None:
        """The header of the batch at ``position``, or None at the end of the segment."""
        return _read_header(self.fd, position, self.size)

    def batches_from(
        self, position: int, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the batches from ``position`` up to ``end`` (default: the segment end)."""
        return _batches_in(self.fd, position, self.size if end is None else end, self.size)

    def translate_offset(
        self, offset: int, start_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        _, position = self.offset_index.lookup(offset)
        for batch_position, header in self.batches_from(max(position, start_position)):
            if header.last_offset >= offset:
                return batch_position, header
        return None

    def read(
        self, offset: int, max_bytes: int, max_position: int, min_one_batch: bool
    ) -> FileSlice | None:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` and ``max_position``.

        With ``min_one_batch`` the first batch is returned whole even if larger than
        ``max_bytes`` (KIP-74), so a consumer can always make progress.
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        start, first = found
        if start >= max_position:
            return None
        if first.size_in_bytes > max_bytes:
            if not min_one_batch or start + first.size_in_bytes > max_position:
                return None
            return FileSlice(self.file, start, first.size_in_bytes, first.next_offset)
        limit = min(start + max_bytes, max_position)
        end, next_offset = self._last_batch_end_within(start, limit)
        return FileSlice(self.file, start, end - start, next_offset) if end > start else None

    def _last_batch_end_within(self, start: int, limit: int) -> tuple[int, int]:
        """End position and next offset of the last whole batch ending by ``limit``."""
        # Batches are contiguous: the batch before an indexed one ends where it starts, so the
        # scan can begin at the last index entry at or before the limit.
        _, indexed = self.offset_index.lookup_by_position(limit)
        end = max(indexed, start)
        next_offset = -1
        for position, header in self.batches_from(end, limit):
            if position + header.size_in_bytes > limit:
                if next_offset < 0:
                    next_offset = header.base_offset  # the batch that ends at ``end`` is before
                break
            end = position + header.size_in_bytes
            next_offset = header.next_offset
        if next_offset < 0:
            following = self.read_header(end)
            next_offset = following.base_offset if following is not None else self.next_offset
        return end, next_offset

    def position_of(self, offset: int) -> int:
        """File position where the batch holding ``offset`` starts, or the segment size."""
        found = self.translate_offset(offset)
        return self.size if found is None else found[0]

    def read_batch_bytes(self, position: int, header: BatchHeader) -> bytes:
        return os.pread(self.fd, header.size_in_bytes, position)

    def batches_from_timestamp(
        self, timestamp: int, start_offset: int
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Batches that may hold the first record at/after ``timestamp``, in order.

        Starts at the time index's hint: no batch before it reached ``timestamp``.
        """
        _, hinted_offset = self.time_index.lookup(timestamp)
        found = self.translate_offset(max(hinted_offset, start_offset, self.base_offset))
        if found is None:
            return
        yield from self.batches_from(found[0])

    # -- recovery and truncation ---------------------------------------------------------

    def recover(self) -> int:
        """Re-validate every batch, rebuild both indexes, cut off the torn tail.

        Returns the number of bytes truncated (0 when the whole file was valid). The first batch
        that is torn (see ``_validated_batch_at``) and everything after it are removed; a whole
        batch with a matching CRC is kept whatever its size, since the configuration that
        limits sizes (``max.message.bytes``) may have changed since it was written.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp = None
        self.bytes_since_last_index_entry = 0
        file_size = os.fstat(self.fd).st_size
        position = 0
        while position < file_size:
            try:
                header = self._validated_batch_at(position, file_size)
            except CorruptRecordError:
                break
            self._index_batch(header.base_offset, header, position)
            position += header.size_in_bytes
        self.size = position
        if position < file_size:
            self.file_ops.ftruncate(self.fd, position)
        # As Kafka's recover: trimmed indexes ending with the max timestamp (the log makes the
        # active segment's indexes writable again).
        self.on_roll()
        return file_size - position

    def _validated_batch_at(self, position: int, file_size: int) -> BatchHeader:
        """The header of the whole, intact batch at ``position``; raises if the batch is torn.

        Torn means exactly one of: the header is cut short or is not a batch header (magic,
        a length below the smallest batch), the batch runs past the end of the file, its CRC
        does not match, or its offsets do not follow the previous batch's. Nothing else, so
        a batch the broker once accepted is never cut for a rule that changed since.
        """
        if position + HEADER_SIZE > file_size:
            raise CorruptRecordError(f"{self.log_path}: torn header at {position}")
        header = BatchHeader.parse(os.pread(self.fd, HEADER_SIZE, position))
        if header.magic != MAGIC or header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"{self.log_path}: no batch header at {position}")
        end = position + header.size_in_bytes
        if end > file_size:
            raise CorruptRecordError(
                f"{self.log_path}: the batch at {position} needs {header.size_in_bytes} bytes, "
                f"{file_size - position} remain"
            )
        if self._crc_of(position + ATTRIBUTES_OFFSET, end) != header.crc:
            raise CorruptRecordError(f"{self.log_path}: CRC mismatch in the batch at {position}")
        if (
            header.base_offset < self.next_offset
            or header.last_offset_delta < 0
            or not self.can_hold(header.last_offset)
        ):
            raise CorruptRecordError(f"{self.log_path}: offset {header.base_offset} out of order")
        return header

    def _crc_of(self, start: int, end: int) -> int:
        """CRC32C of the file's bytes [start, end), read ``RECOVERY_READ_BYTES`` at a time."""
        crc = 0
        while start < end:
            chunk = os.pread(self.fd, min(RECOVERY_READ_BYTES, end - start), start)
            if not chunk:  # the file shrank under us: cannot be a whole batch
                raise CorruptRecordError(f"{self.log_path}: unexpected end of file at {start}")
            crc = crc32c(chunk, crc)
            start += len(chunk)
        return crc

    def load_from_indexes(self) -> None:
        """Restore in-memory state of a segment trusted after a clean shutdown.

        The indexes are sanity-checked; the batches after the last index entry are scanned to
        find ``next_offset``. Raises ``CorruptIndexError`` if an index cannot be trusted.
        """
        self.offset_index.sanity_check(self.size)
        self.time_index.sanity_check()
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        _, position = self.offset_index.last_entry
        self.next_offset = self.base_offset
        self.bytes_since_last_index_entry = 0
        for _, header in self.batches_from(position):
            self.bytes_since_last_index_entry += header.size_in_bytes
            self.next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        first = self.read_header(0)
        self.first_batch_timestamp = first.max_timestamp if first else None
        if self.size and self.next_offset == self.base_offset:
            raise CorruptIndexError(f"{self.log_path}: no batch found after the last index entry")

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding offsets >= ``offset``; returns the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, header = found
        if header.base_offset < offset:
            raise InvalidRecordError(
                f"cannot truncate to {offset}: it falls inside a batch at {header.base_offset}"
            )
        removed = self.size - position
        self.file_ops.ftruncate(self.fd, position)
        self.size = position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # Re-derive the running state from the surviving tail.
        self.offset_index.make_writable()
        self.time_index.make_writable()
        self.load_from_indexes()
        return removed

    # -- life cycle ----------------------------------------------------------------------

    @property
    def last_modified_ms(self) -> int:
        return int(os.fstat(self.fd).st_mtime * 1000)

    @property
    def largest_timestamp(self) -> int:
        """What retention judges: the newest record timestamp, else the file's mtime."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    def rename_with_suffix(self, suffix: str) -> None:
        """Rename its files, e.g. to ``.deleted`` or back to no suffix; handles stay open."""

        def path(file_suffix: str) -> Path:
            return self.directory / (offset_file_name(self.base_offset, file_suffix) + suffix)

        self.offset_index.rename(path(INDEX_SUFFIX))
        self.time_index.rename(path(TIME_INDEX_SUFFIX))
        self.txn_index.rename(path(TXN_INDEX_SUFFIX))
        self.file_ops.replace(self.log_path, path(LOG_SUFFIX))
        self.log_path = path(LOG_SUFFIX)
        self.suffix = suffix

    def relocate(self, directory: Path) -> None:
        """Its directory was renamed (the log moved between log dirs): the paths follow."""
        self.directory = directory
        self.log_path = directory / self.log_path.name
        self.offset_index.path = directory / self.offset_index.path.name
        self.time_index.path = directory / self.time_index.path.name
        self.txn_index.path = directory / self.txn_index.path.name

    def close(self) -> None:
        self._append_final_time_entry()
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self.file.close()

    def close_handles(self) -> None:
        """Close its files, writing and removing nothing (their directory is going)."""
        self.offset_index.release()
        self.time_index.release()
        self.txn_index.close()
        self.file.close()

    def delete(self) -> None:
        """Close and remove its files."""
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.file.close()
        unlink_if_exists(self.file_ops, self.log_path)

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, size={self.size}, "
            f"next_offset={self.next_offset})"
        )


class SegmentReader:
    """A segment's batches read through a descriptor of its own (see ``LogSegment.reader``).

    For a thread other than the log's (the cleaner): closing or deleting the segment does not
    affect it. A context manager; ``close`` releases the descriptor.
    """

    def __init__(self, fd: int, size: int):
        self.fd = fd
        self.size = size

    def batches_from(self, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        return _batches_in(self.fd, position, self.size, self.size)

    def read_batch_bytes(self, position: int, header: BatchHeader) -> bytes:
        return os.pread(self.fd, header.size_in_bytes, position)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def close_all(fds: Sequence[int]) -> None:
    """Close every descriptor, even if closing one fails (the first error is raised)."""
    error: OSError | None = None
    for fd in fds:
        try:
            os.close(fd)
        except OSError as e:
            error = error or e
    if error is not None:
        raise error


def _read_header(fd: int, position: int, size: int) -> BatchHeader | None:
    if position + HEADER_SIZE > size:
        return None
    return BatchHeader.parse(os.pread(fd, HEADER_SIZE, position))


def _batches_in(fd: int, position: int, end: int, size: int) -> Iterator[tuple[int, BatchHeader]]:
    """Headers from ``position`` while it is below ``end``; a header must lie within ``size``."""
    while position < end:
        header = _read_header(fd, position, size)
        if header is None:
            return
        yield position, header
        position += header.size_in_bytes


def write_past_end(
    file_ops: FileOps, fd: int, buffers: Sequence[bytes | memoryview], position: int
) -> None:
    """Write ``buffers`` at ``position``, the end of a segment's file, through ``file_ops`` (the
    segment's); any thread.

    On an I/O error the file is cut back to ``position`` before the error propagates, so it
    never holds half a batch.
    """
    try:
        _pwritev_all(file_ops, fd, buffers, position)
    except OSError:
        try:
            file_ops.ftruncate(fd, position)
        finally:
            raise


def _pwritev_all(
    file_ops: FileOps, fd: int, buffers: Sequence[bytes | memoryview], position: int
) -> None:
    """``pwritev`` every byte, in groups of at most ``IOV_MAX`` buffers.

    The kernel may write less than asked (a signal, a full disk about to fail); the rest is
    then written with plain ``pwrite`` calls until done or an ``OSError`` says why not.
    """
    for first in range(0, len(buffers), IOV_MAX):
        group = buffers[first : first + IOV_MAX]
        expected = sum(len(b) for b in group)
        written = file_ops.pwritev(fd, group, position)
        if written < expected:
            rest = memoryview(b"".join(group))[written:]
            cursor = position + written
            while rest:
                n = file_ops.pwrite(fd, rest, cursor)
                rest = rest[n:]
                cursor += n
        position += expected
