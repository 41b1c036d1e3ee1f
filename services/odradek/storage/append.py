"""An append being made: offsets assigned, the bytes to write, and what the append did.

Pure values and functions, no I/O: ``assign_offsets`` turns a record set the validator accepted
(``ValidatedRecords``) into a ``PreparedAppend``, the bytes to write past the log's end with
each batch's header rewritten in place; ``LogAppendInfo`` is what ``Log``'s append returns.

The byte format of what is written (Kafka's record batch v2, ``batch``): each batch as it came,
except its first 16 bytes, rewritten: ``base_offset`` int64 | ``batch_length`` int32 |
``partition_leader_epoch`` int32. Those fields lie outside the batch's CRC, so the rest of the
batch (still compressed) goes to disk untouched.

Invariants of a ``PreparedAppend``: base offsets strictly increase from the log end offset (a
client's batches get consecutive ones; a replicated batch keeps its own, which must not be below
the LEO); ``epoch_starts`` lists each batch starting a higher leader epoch than the one before.

Threads: any (values). A ``PreparedAppend`` belongs to the appending thread, lent to one writer
thread between ``Log.prepare_append`` and ``Log.publish_prepared``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.errors import InvalidRecordError
from odradek.storage.batch import BatchHeader
from odradek.storage.control import EndTxnMarker, marker_or_none, read_marker
from odradek.storage.segment import LogSegment
from odradek.storage.validator import AppendOrigin, ValidatedRecords

__all__ = ["LogAppendInfo", "PreparedAppend", "assign_offsets", "marker_of"]

# Rewritten in each appended batch: base_offset, batch_length, partition_leader_epoch.
_LOG_PREFIX = struct.Struct(">qii")


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """What an append did: offsets assigned, timestamps seen, and each batch it wrote."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    records_count: int
    valid_bytes: int
    batches: tuple[tuple[int, BatchHeader], ...] = ()  # (assigned base offset, header)
    duplicate: bool = False  # a producer's retry of a batch already in the log: nothing written
    # flush.messages was reached: the append is acknowledged only once it is fsynced (Kafka
    # flushes in its append path). ``append_validated`` leaves the fsync to the caller.
    flush_before_ack: bool = False


@dataclass(slots=True, eq=False)
class PreparedAppend:
    """An append with its offsets assigned and its place chosen, not yet written or visible.

    ``Log.prepare_append`` makes one; ``Log.write_prepared`` writes its bytes past the end of
    ``segment``'s file (on another thread for a large record set, through a duplicated
    descriptor it owns and closes); ``Log.publish_prepared`` indexes them and moves the LEO.
    """

    valid_bytes: int
    log_append_time_ms: int
    buffers: list[bytes | memoryview] = field(default_factory=list)
    assigned: list[tuple[int, BatchHeader]] = field(default_factory=list)
    markers: list[EndTxnMarker | None] = field(default_factory=list)  # each batch's marker
    # (partition_leader_epoch written, base offset) of each batch starting a higher epoch.
    epoch_starts: list[tuple[int, int]] = field(default_factory=list)
    next_offset: int = -1
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    records_count: int = 0
    segment: LogSegment | None = None
    position: int = 0  # where the bytes go in the segment's file: its published end
    fd: int = -1
    owns_fd: bool = False


def assign_offsets(
    validated: ValidatedRecords, log_end_offset: int, leader_epoch: int | None
) -> PreparedAppend:
    """Each batch's base offset (from ``log_end_offset``, or as replicated) and the bytes to
    write. Pure; the log calls it under its lock, with its LEO."""
    view = validated.records
    next_offset = log_end_offset
    prepared = PreparedAppend(
        valid_bytes=len(view), log_append_time_ms=validated.log_append_time_ms
    )
    for position, header in validated.batches:
        if validated.origin == AppendOrigin.REPLICATION:
            if header.base_offset < next_offset:
                raise InvalidRecordError(
                    f"replicated batch at offset {header.base_offset} does not follow "
                    f"the log end offset {next_offset}"
                )
            base_offset = header.base_offset
        else:
            base_offset = next_offset
        next_offset = base_offset + header.last_offset_delta + 1
        epoch = header.partition_leader_epoch if leader_epoch is None else leader_epoch
        if epoch >= 0 and (not prepared.epoch_starts or epoch > prepared.epoch_starts[-1][0]):
            prepared.epoch_starts.append((epoch, base_offset))
        prepared.buffers.append(_LOG_PREFIX.pack(base_offset, header.batch_length, epoch))
        prepared.buffers.append(view[position + _LOG_PREFIX.size : position + header.size_in_bytes])
        prepared.assigned.append((base_offset, header))
        prepared.records_count += header.records_count
        if header.max_timestamp > prepared.max_timestamp:
            prepared.max_timestamp = header.max_timestamp
            prepared.offset_of_max_timestamp = next_offset - 1
    prepared.next_offset = next_offset
    return prepared


def marker_of(
    origin: str, header: BatchHeader, records: memoryview, position: int
) -> EndTxnMarker | None:
    """A control batch's marker: a coordinator's must be a known marker (else
    ``InvalidRecordError``); a replicated one is copied whatever it holds."""
    if not header.is_control:
        return None
    batch = records[position : position + header.size_in_bytes]
    if origin == AppendOrigin.REPLICATION:
        return marker_or_none(header, batch)
    return read_marker(header, batch)
