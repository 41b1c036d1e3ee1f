"""Transaction markers: the control batches that end a producer's transaction in a partition.

A marker is a batch with the control and transactional attribute bits set, the producer's id
and epoch, no sequence (-1), uncompressed, holding exactly one record (Kafka's
``EndTransactionMarker``):

    key   = version int16 (0), type int16 (0 ABORT, 1 COMMIT)
    value = version int16 (0), coordinator_epoch int32

Only the transaction coordinator writes markers (``AppendOrigin.COORDINATOR``); followers copy
them as they are. Readers skip control batches; the log reads the key to learn how the producer's
transaction in this partition ended.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from odradek.errors import InvalidRecordError
from odradek.storage.batch import BatchHeader
from odradek.storage.records import Record, decode_records, encode_batch

__all__ = ["ControlType", "EndTxnMarker", "encode_marker", "marker_or_none", "read_marker"]

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CURRENT_VERSION = 0


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class EndTxnMarker(NamedTuple):
    """What a marker says: how the transaction ended, and the coordinator's epoch."""

    control: ControlType
    coordinator_epoch: int


def encode_marker(
    control: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One marker batch, as the coordinator hands it to a partition leader."""
    record = Record(
        offset=base_offset,
        timestamp=timestamp_ms,
        key=_KEY.pack(CURRENT_VERSION, int(control)),
        value=_VALUE.pack(CURRENT_VERSION, coordinator_epoch),
    )
    return encode_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


def read_marker(header: BatchHeader, batch: bytes | bytearray | memoryview) -> EndTxnMarker | None:
    """The marker a control batch holds (None for a data batch).

    Raises ``InvalidRecordError`` for a control batch whose key is not a known marker (Kafka
    ignores unknown control types of newer versions; this log refuses them from a coordinator
    and treats them as no marker when replaying, see ``marker_or_none``).
    """
    if not header.is_control:
        return None
    records = decode_records(batch)
    if len(records) != 1 or records[0].key is None or len(records[0].key) < _KEY.size:
        raise InvalidRecordError("a control batch must hold exactly one record with a key")
    _, kind = _KEY.unpack_from(records[0].key)
    try:
        control = ControlType(kind)
    except ValueError:
        raise InvalidRecordError(f"unknown control record type {kind}") from None
    value = records[0].value
    if value is None or len(value) < _VALUE.size:
        raise InvalidRecordError("a transaction marker needs its value (the coordinator epoch)")
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return EndTxnMarker(control, coordinator_epoch)


def marker_or_none(
    header: BatchHeader, batch: bytes | bytearray | memoryview
) -> EndTxnMarker | None:
    """``read_marker`` that never raises: what replay uses on batches already in the log."""
    try:
        return read_marker(header, batch)
    except (InvalidRecordError, ValueError):
        return None
