"""Idempotent producers: per-partition sequence checks, duplicate detection, kept across restarts.

An idempotent producer stamps each batch with its ``producer_id``, ``producer_epoch`` and the
``base_sequence`` of its first record; sequences count records per partition and wrap at 2**31.
For each producer the log remembers its epoch and its last ``BATCHES_TO_RETAIN`` batches (as
Kafka: the client keeps at most five requests in flight), and judges a new batch so:

1. Same epoch and the same first and last sequence as a retained batch: a retry of something
   already written. Nothing is appended; the producer gets the original offsets back.
2. An older epoch: ``INVALID_PRODUCER_EPOCH`` (a zombie producer is fenced).
3. A newer epoch must start again at sequence 0; otherwise ``OUT_OF_ORDER_SEQUENCE_NUMBER``.
4. The same epoch must continue at ``last_sequence + 1`` (0 after 2**31 - 1); otherwise
   ``OUT_OF_ORDER_SEQUENCE_NUMBER``, and nothing is appended.
5. A producer the log has never seen may start at any sequence (KIP-360: its state may have been
   removed with old segments).

Transactions (KIP-98): a transactional batch (attribute bit 4) of a producer with no open
transaction in this partition opens one at its base offset
(``ProducerEntry.current_txn_first_offset``); the producer's next control batch (a COMMIT or
ABORT marker, ``control``, written only by the transaction coordinator) closes it, and
``update`` returns the ``CompletedTxn``. Invariants: ``ongoing`` maps exactly the producers
whose ``current_txn_first_offset`` is set to that offset; ``first_unstable_offset`` is the
smallest of them (None when none is open), which bounds the last stable offset. A marker of a
producer with no open transaction closes nothing (a marker for a partition the producer never
wrote to, or written again after a coordinator failover).

The state is a function of the batch headers (and markers' keys) in the log, so it can always be
rebuilt by replaying them. To keep start-up short it is snapshotted to ``<offset>.snapshot`` (the
state after every batch below ``offset``) on each roll and at shutdown; loading takes the newest
snapshot at or below the log end offset and replays the headers after it. A snapshot file is
written atomically and carries a CRC32C; a damaged one is ignored (the replay then starts further
back). Format: a CRC line, then JSON; version 2 adds each producer's
``current_txn_first_offset`` and ``coordinator_epoch``, version 1 files load as having no open
transaction (and a version 1 reader ignores the fields).

Snapshots at a roll are written off the appending thread: ``capture_snapshot`` copies the state
(cheap, on the appending thread) and ``write_snapshot`` encodes and writes it later, on the
storage housekeeping thread. A late write must never bring back a state the log no longer has:
``truncate`` and ``close`` bump a generation, and ``write_snapshot`` renames its file into place
only if the generation it was captured in is still current, checked and renamed under
``_files_lock``, the lock every change to the snapshot files takes. So a snapshot above a
truncation point, or in the directory of a deleted partition, is never published.

Thread contract: the state (``check``, ``update``, ``load``, ``capture_snapshot``, ``truncate``)
belongs to the log's appending thread, called with the log's lock held. ``write_snapshot`` and
``delete_snapshots_below`` may run on any thread; the snapshot files are guarded by
``_files_lock`` (taken after the log's lock, never before it).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from odradek.common.partitions import NO_EPOCH
from odradek.errors import ErrorCode, OdradekError
from odradek.storage.batch import BatchHeader
from odradek.storage.control import ControlType, EndTxnMarker
from odradek.storage.file_ops import OS_FILE_OPS, FileOps, unlink_if_exists, write_all
from odradek.storage.files import SNAPSHOT_SUFFIX, snapshot_file_name

log = logging.getLogger(__name__)

BATCHES_TO_RETAIN = 5
SNAPSHOTS_TO_KEEP = 2
SEQUENCE_WRAP = 1 << 31


class OutOfOrderSequenceError(OdradekError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(OdradekError):
    error_code = ErrorCode.invalid_producer_epoch


class TransactionCoordinatorFencedError(OdradekError):
    error_code = ErrorCode.transaction_coordinator_fenced


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker just ended in this partition.

    ``last_offset`` is the marker's offset; ``last_stable_offset`` the first offset still
    unstable once it ended (the next open transaction's first offset, else ``last_offset + 1``):
    the aborted-transaction index stores it so that a search may stop there.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What a retry must match, and the offsets to answer it with."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int = NO_EPOCH
    last_timestamp: int = -1
    current_txn_first_offset: int = -1  # the open transaction's first offset, -1 when none
    coordinator_epoch: int = -1  # of the last marker: an older coordinator's marker is fenced
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """A copy of one producer's state, for readers off the appending thread (Kafka's
    ``DescribeProducers`` fields, and the last data offset the cleaner must keep)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1 when no transaction is open
    last_data_offset: int | None  # of its last data batch in this epoch (None: none)


@dataclass(frozen=True, slots=True)
class ProducerSnapshot:
    """The state at ``offset``, copied out so it can be written on another thread."""

    offset: int
    generation: int
    # id, epoch, timestamp, retained batches, first offset of the open transaction (-1: none),
    # coordinator epoch of the last marker
    producers: tuple[tuple[int, int, int, tuple[BatchMetadata, ...], int, int], ...]


class ProducerStateManager:
    """The idempotent producers of one partition; see the module docstring."""

    def __init__(self, directory: Path, file_ops: FileOps = OS_FILE_OPS):
        self.directory = directory
        self._file_ops = file_ops  # snapshots' writes, fsyncs, renames and deletions
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.map_end_offset = 0  # the state reflects every batch below this offset
        self._files_lock = threading.Lock()
        self._generation = 0  # bumped by truncate and close: older captures are not written
        self._closed = False

    # -- live appends --------------------------------------------------------------------

    def check(
        self, header: BatchHeader, marker: EndTxnMarker | None = None
    ) -> BatchMetadata | None:
        """Judge a producer's batch before it is written: a duplicate's metadata, or None.

        Raises ``OutOfOrderSequenceError`` or ``InvalidProducerEpochError``; batches without a
        producer id or sequence are not idempotent and always pass. A marker (``marker`` read
        from a control batch) of an older producer epoch is ``InvalidProducerEpochError``, of an
        older coordinator epoch than the last marker's ``TransactionCoordinatorFencedError``.
        """
        if header.is_control and header.has_producer_id:
            entry = self.producers.get(header.producer_id)
            if entry is not None and header.producer_epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"transaction marker of producer {header.producer_id} has epoch "
                    f"{header.producer_epoch}, older than the current {entry.producer_epoch}"
                )
            if (
                entry is not None
                and marker is not None
                and marker.coordinator_epoch < entry.coordinator_epoch
            ):
                raise TransactionCoordinatorFencedError(
                    f"transaction marker of producer {header.producer_id} from coordinator "
                    f"epoch {marker.coordinator_epoch}, older than {entry.coordinator_epoch}"
                )
            return None
        if not header.has_producer_id:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        if header.base_sequence < 0:
            # A coordinator's batch of the producer without a sequence (its transactional
            # offsets): Kafka checks the epoch only, so a fenced producer's offsets never join
            # the transaction of its successor, which has the same producer id.
            if header.producer_epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"producer {header.producer_id} has epoch {header.producer_epoch}, "
                    f"older than the current {entry.producer_epoch}: it was fenced"
                )
            return None
        if header.producer_epoch == entry.producer_epoch:
            for retained in entry.batches:
                if (retained.first_sequence, retained.last_sequence) == (
                    header.base_sequence,
                    header.last_sequence,
                ):
                    return retained
        if header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} has epoch {header.producer_epoch}, "
                f"older than the current {entry.producer_epoch}: it was fenced"
            )
        if header.producer_epoch > entry.producer_epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} starts epoch {header.producer_epoch} at "
                    f"sequence {header.base_sequence}; a new epoch starts at 0"
                )
            return None
        expected = (entry.last_sequence + 1) % SEQUENCE_WRAP
        if entry.batches and header.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} sent sequence {header.base_sequence}, "
                f"expected {expected} (last written: {entry.last_sequence})"
            )
        return None

    def update(
        self, base_offset: int, header: BatchHeader, marker: EndTxnMarker | None = None
    ) -> CompletedTxn | None:
        """Record a batch written at ``base_offset`` (after ``check``, or when replaying).

        ``marker`` is the type of a control batch (``control.control_type``). Returns the
        transaction a marker ended, else None.
        """
        completed = None
        if header.has_producer_id:
            entry = self.producers.get(header.producer_id)
            if entry is None:
                entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id)
            if header.producer_epoch != entry.producer_epoch:
                entry.producer_epoch = header.producer_epoch
                entry.batches.clear()
            if header.base_sequence >= 0:
                entry.batches.append(
                    BatchMetadata(
                        header.base_sequence,
                        header.last_sequence,
                        base_offset,
                        base_offset + header.last_offset_delta,
                    )
                )
            entry.last_timestamp = header.max_timestamp
            if header.is_control:
                if marker is not None:
                    entry.coordinator_epoch = marker.coordinator_epoch
                completed = self._end_transaction(entry, base_offset, marker)
            elif header.is_transactional and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = base_offset
                self.ongoing[entry.producer_id] = base_offset
        self.map_end_offset = base_offset + header.last_offset_delta + 1
        return completed

    def _end_transaction(
        self, entry: ProducerEntry, marker_offset: int, marker: EndTxnMarker | None
    ) -> CompletedTxn | None:
        first_offset = entry.current_txn_first_offset
        if first_offset < 0 or marker is None:
            return None
        entry.current_txn_first_offset = -1
        del self.ongoing[entry.producer_id]
        unstable = self.first_unstable_offset()
        return CompletedTxn(
            entry.producer_id,
            first_offset,
            marker_offset,
            marker.control is ControlType.ABORT,
            marker_offset + 1 if unstable is None else unstable,
        )

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction; None when none is open."""
        return min(self.ongoing.values()) if self.ongoing else None

    def active_producers(self) -> dict[int, ActiveProducer]:
        """A copy of every producer's state (the caller holds the log's lock)."""
        return {
            entry.producer_id: ActiveProducer(
                producer_id=entry.producer_id,
                producer_epoch=entry.producer_epoch,
                last_sequence=entry.last_sequence,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=entry.current_txn_first_offset,
                last_data_offset=entry.batches[-1].last_offset if entry.batches else None,
            )
            for entry in self.producers.values()
        }

    # -- snapshots and loading -----------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        with self._files_lock:
            return self._snapshot_offsets()

    def _snapshot_offsets(self) -> list[int]:
        return sorted(
            int(p.name[: -len(SNAPSHOT_SUFFIX)])
            for p in self.directory.glob(f"*{SNAPSHOT_SUFFIX}")
            if p.name[: -len(SNAPSHOT_SUFFIX)].isdigit()
        )

    def take_snapshot(self, *, durable: bool = True) -> None:
        """Write the state at ``map_end_offset`` now, on this thread (at shutdown)."""
        self.write_snapshot(self.capture_snapshot(), durable=durable)

    def capture_snapshot(self) -> ProducerSnapshot:
        """Copy the state at ``map_end_offset`` for ``write_snapshot``; no I/O."""
        return ProducerSnapshot(
            self.map_end_offset,
            self._generation,
            tuple(
                (
                    e.producer_id,
                    e.producer_epoch,
                    e.last_timestamp,
                    tuple(e.batches),
                    e.current_txn_first_offset,
                    e.coordinator_epoch,
                )
                for e in self.producers.values()
            ),
        )

    def is_current(self, snapshot: ProducerSnapshot) -> bool:
        """Whether neither a truncation nor a close happened since ``snapshot`` was captured."""
        return snapshot.generation == self._generation and not self._closed

    def write_snapshot(self, snapshot: ProducerSnapshot, *, durable: bool = False) -> bool:
        """Write ``snapshot`` atomically unless it went stale; keep only the newest few.

        Any thread. Returns whether it was published. ``durable=False`` (at a roll) skips the
        fsync: a snapshot lost or torn by a power cut fails its CRC or is missing, and loading
        replays from further back. Raises ``OSError`` if the disk fails.
        """
        if not self.is_current(snapshot):
            return False
        payload = json.dumps(
            {
                "version": 2,
                "offset": snapshot.offset,
                "producers": [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "last_timestamp": last_timestamp,
                        "batches": [
                            [b.first_sequence, b.last_sequence, b.first_offset, b.last_offset]
                            for b in batches
                        ],
                        "current_txn_first_offset": txn_first_offset,
                        "coordinator_epoch": coordinator_epoch,
                    }
                    for (
                        producer_id,
                        producer_epoch,
                        last_timestamp,
                        batches,
                        txn_first_offset,
                        coordinator_epoch,
                    ) in snapshot.producers
                ],
            },
            separators=(",", ":"),
        ).encode()
        path = self.directory / snapshot_file_name(snapshot.offset)
        tmp = path.with_name(path.name + ".tmp")
        try:
            # The mode ``open(tmp, "wb")`` gives: the umask decides.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                write_all(self._file_ops, fd, f"{crc32c(payload):08x}\n".encode() + payload)
                if durable:
                    self._file_ops.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            if not self.is_current(snapshot):  # the directory went with a deletion
                return False
            raise
        with self._files_lock:
            if not self.is_current(snapshot):
                unlink_if_exists(self._file_ops, tmp)
                return False
            self._file_ops.replace(tmp, path)
            for offset in self._snapshot_offsets()[:-SNAPSHOTS_TO_KEEP]:
                unlink_if_exists(self._file_ops, self.directory / snapshot_file_name(offset))
        return True

    def load(
        self,
        log_start_offset: int,
        log_end_offset: int,
        replay: Callable[[int], Iterable[tuple[int, BatchHeader, EndTxnMarker | None]]],
        *,
        max_snapshot_offset: int | None = None,
        on_completed: Callable[[CompletedTxn], None] | None = None,
    ) -> int:
        """Rebuild the state at ``log_end_offset``: newest usable snapshot, then a replay.

        ``replay(offset)`` yields ``(base_offset, header, marker type)`` of the log's batches
        from ``offset``. Snapshots above the log end (left by a truncation or a torn tail) are
        deleted; snapshots above ``max_snapshot_offset`` are not used (kept). Each transaction
        the replay sees end goes to ``on_completed``. Returns the offset the replay started at.
        """
        self.producers.clear()
        self.ongoing.clear()
        self.map_end_offset = log_start_offset
        with self._files_lock:
            for offset in reversed(self._snapshot_offsets()):
                path = self.directory / snapshot_file_name(offset)
                if offset > log_end_offset:
                    unlink_if_exists(self._file_ops, path)
                    continue
                if max_snapshot_offset is not None and offset > max_snapshot_offset:
                    continue
                if offset >= log_start_offset and self._read_snapshot(path):
                    break
                self.producers.clear()
                self.ongoing.clear()
                self.map_end_offset = log_start_offset
        replay_start = self.map_end_offset
        for base_offset, header, marker in replay(replay_start):
            if base_offset + header.last_offset_delta >= self.map_end_offset:
                completed = self.update(base_offset, header, marker)
                if completed is not None and on_completed is not None:
                    on_completed(completed)
        self.map_end_offset = log_end_offset
        return replay_start

    def _read_snapshot(self, path: Path) -> bool:
        try:
            crc_line, payload = path.read_bytes().split(b"\n", 1)
            if int(crc_line, 16) != crc32c(payload):
                raise ValueError("CRC mismatch")
            data = json.loads(payload)
            for p in data["producers"]:
                entry = ProducerEntry(p["producer_id"], p["producer_epoch"], p["last_timestamp"])
                entry.batches.extend(BatchMetadata(*b) for b in p["batches"])
                # Version 1 snapshots predate transactions: no producer has one open.
                entry.current_txn_first_offset = p.get("current_txn_first_offset", -1)
                entry.coordinator_epoch = p.get("coordinator_epoch", -1)
                self.producers[entry.producer_id] = entry
                if entry.current_txn_first_offset >= 0:
                    self.ongoing[entry.producer_id] = entry.current_txn_first_offset
            self.map_end_offset = data["offset"]
            return True
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("ignoring producer state snapshot %s: %s", path, e)
            return False

    def delete_snapshots_below(self, offset: int) -> None:
        """Drop snapshots of states before ``offset`` (the log start moved past them)."""
        with self._files_lock:
            for snapshot_offset in self._snapshot_offsets():
                if snapshot_offset < offset:
                    unlink_if_exists(
                        self._file_ops, self.directory / snapshot_file_name(snapshot_offset)
                    )

    def truncate(self, offset: int) -> None:
        """Forget snapshots above ``offset``, and any not yet written; the log reloads after."""
        with self._files_lock:
            self._generation += 1
            for snapshot_offset in self._snapshot_offsets():
                if snapshot_offset > offset:
                    unlink_if_exists(
                        self._file_ops, self.directory / snapshot_file_name(snapshot_offset)
                    )

    def relocate(self, directory: Path) -> None:
        """The log's directory was renamed: later snapshots go there; one captured before (and
        maybe half written under the old name) is dropped, as after a truncation."""
        with self._files_lock:
            self._generation += 1
            self.directory = directory

    def close(self) -> None:
        """No snapshot captured before this is written any more (the partition is deleted)."""
        with self._files_lock:
            self._generation += 1
            self._closed = True
