"""Record batch v2 (magic 2) headers: parse, validate, and assign offsets in place.

A record batch as Kafka writes it on the wire and on disk::

    offset  size  field
         0     8  base_offset              \\  outside the CRC: the broker rewrites
         8     4  batch_length             |  base_offset (and partition_leader_epoch)
        12     4  partition_leader_epoch   /  without recomputing the checksum
        16     1  magic (= 2)
        17     4  crc (CRC32C of bytes 21 .. end)
        21     2  attributes   bits 0-2 codec, 3 timestamp type, 4 transactional,
                                5 control, 6 delete horizon set
        23     4  last_offset_delta
        27     8  base_timestamp
        35     8  max_timestamp
        43     8  producer_id
        51     2  producer_epoch
        53     4  base_sequence
        57     4  records_count
        61     -  records (compressed as one block when the codec is not 0)

``batch_length`` counts the bytes after itself, so a batch occupies ``batch_length + 12`` bytes.

This module only looks at headers: it never decompresses. Checking a header costs one
``struct.unpack_from`` and one hardware CRC32C pass. The records inside are checked by
``walker`` (on append) and decoded by ``records`` (compaction, timestamp lookups).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from odradek.errors import CorruptRecordError, InvalidRecordError

MAGIC = 2
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes not counted by batch_length
HEADER_SIZE = 61
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers from here to the end of the batch
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12
# Kafka's smallest legal batch_length: the header after batch_length, with no records.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")  # the 13 fields of the table above
_PREFIX = struct.Struct(">qi")  # base_offset, batch_length
_BASE_OFFSET = struct.Struct(">q")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of one record batch, as parsed (no validation implied).

    A named tuple, not a frozen dataclass: it is built once per batch on the append path, and
    a tuple is built five times faster.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buffer: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
        if len(buffer) - position < HEADER_SIZE:
            raise CorruptRecordError(
                f"record batch header needs {HEADER_SIZE} bytes, "
                f"{len(buffer) - position} remain at position {position}"
            )
        return cls(*HEADER_STRUCT.unpack_from(buffer, position))

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record; sequences wrap at 2**31 as in Kafka."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def read_prefix(buffer: bytes | bytearray | memoryview, position: int = 0) -> tuple[int, int]:
    """Return ``(base_offset, size_in_bytes)`` of the batch starting at ``position``."""
    base_offset, batch_length = _PREFIX.unpack_from(buffer, position)
    return base_offset, batch_length + LOG_OVERHEAD


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    """CRC32C over the span Kafka checksums: from the attributes to the end of the batch."""
    return crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])


def validate_batch(
    buffer: bytes | bytearray | memoryview, position: int, available: int
) -> BatchHeader:
    """Check the batch at ``position`` is whole and intact; return its header.

    ``available`` is how many bytes from ``position`` belong to the record set. Raises
    ``CorruptRecordError`` for anything that means the bytes are damaged (short, bad length,
    wrong magic, CRC mismatch) and ``InvalidRecordError`` for a batch whose header contradicts
    itself. It does not judge producer rules (counts versus deltas): see ``check_producer_batch``.
    """
    if available < HEADER_SIZE:
        raise CorruptRecordError(
            f"truncated record batch: {available} bytes where a header needs {HEADER_SIZE}"
        )
    header = BatchHeader.parse(buffer, position)
    if header.magic != MAGIC:
        raise CorruptRecordError(
            f"unsupported record batch magic {header.magic} at position {position} "
            f"(only magic {MAGIC} is accepted)"
        )
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch length {header.batch_length} is below the minimum {MIN_BATCH_LENGTH}"
        )
    if header.size_in_bytes > available:
        raise CorruptRecordError(
            f"truncated record batch: header says {header.size_in_bytes} bytes, {available} remain"
        )
    end = position + header.size_in_bytes
    actual_crc = crc32c(memoryview(buffer)[position + ATTRIBUTES_OFFSET : end])
    if actual_crc != header.crc:
        raise CorruptRecordError(
            f"record batch CRC mismatch at position {position}: "
            f"stored {header.crc:#010x}, computed {actual_crc:#010x}"
        )
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise InvalidRecordError(
            f"record batch has records_count {header.records_count} and "
            f"last_offset_delta {header.last_offset_delta}"
        )
    if header.compression > 4:
        raise InvalidRecordError(f"unknown compression codec id {header.compression}")
    return header


def check_producer_batch(header: BatchHeader, *, from_coordinator: bool = False) -> None:
    """Rules a batch fresh from a producer must follow (compacted logs may break them later).

    A producer numbers the records of a batch 0..n-1, so the count and the last offset delta
    agree, and a batch always holds at least one record. A batch with a producer id (an
    idempotent or transactional producer's) carries a sequence number: Kafka's LogValidator
    refuses a negative one ("Invalid sequence number"), except in a transaction marker (a
    control batch, which only the coordinator writes, without a sequence), and as Kafka only
    from clients: a coordinator writes a producer's transactional offsets without a sequence
    too (``from_coordinator``).
    """
    if header.records_count <= 0:
        raise InvalidRecordError("a produced record batch must hold at least one record")
    if (
        header.has_producer_id
        and header.base_sequence < 0
        and not header.is_control
        and not from_coordinator
    ):
        raise InvalidRecordError(
            f"invalid sequence number {header.base_sequence} in a record batch with producer "
            f"id {header.producer_id}"
        )
    if header.last_offset_delta != header.records_count - 1:
        raise InvalidRecordError(
            f"record batch has {header.records_count} records but last_offset_delta "
            f"{header.last_offset_delta}; offsets inside a produced batch must be 0..n-1"
        )


def iter_batches(
    buffer: bytes | bytearray | memoryview,
) -> Iterator[tuple[int, BatchHeader]]:
    """Validate every batch of a record set, yielding ``(position, header)`` in order.

    Raises on the first bad batch; a record set must be whole batches, nothing trailing.
    """
    position = 0
    end = len(buffer)
    while position < end:
        header = validate_batch(buffer, position, end - position)
        yield position, header
        position += header.size_in_bytes


def set_base_offset(buffer: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Write ``base_offset`` into the batch header at ``position``; the CRC stays valid."""
    _BASE_OFFSET.pack_into(buffer, position, base_offset)


def encode_base_offset(base_offset: int) -> bytes:
    return _BASE_OFFSET.pack(base_offset)


def set_log_append_time(buffer: bytearray | memoryview, position: int, timestamp_ms: int) -> None:
    """Stamp a batch with the broker's time (``message.timestamp.type=LogAppendTime``).

    The timestamp type bit and ``max_timestamp`` sit inside the CRC, so the checksum is
    recomputed: this is the one case where the broker rewrites checksummed bytes, as Kafka does.
    """
    (attributes,) = _ATTRIBUTES.unpack_from(buffer, position + ATTRIBUTES_OFFSET)
    _ATTRIBUTES.pack_into(buffer, position + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _MAX_TIMESTAMP.pack_into(buffer, position + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    (_, size) = read_prefix(buffer, position)
    crc = crc32c(memoryview(buffer)[position + ATTRIBUTES_OFFSET : position + size])
    _CRC.pack_into(buffer, position + CRC_OFFSET, crc)


def set_max_timestamp(buffer: bytearray | memoryview, position: int, timestamp_ms: int) -> None:
    """Correct a batch's ``max_timestamp`` to its records' (as Kafka's validator does).

    A producer's header may claim any maximum; retention and the time index judge a segment by
    it, so the broker stores the true one. The field is inside the CRC, which is recomputed.
    """
    _MAX_TIMESTAMP.pack_into(buffer, position + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    (_, size) = read_prefix(buffer, position)
    crc = crc32c(memoryview(buffer)[position + ATTRIBUTES_OFFSET : position + size])
    _CRC.pack_into(buffer, position + CRC_OFFSET, crc)


def with_delete_horizon(batch: bytes) -> bytes:
    """The batch with the delete-horizon attribute bit set (KIP-534) and its CRC recomputed.

    The bit says ``base_timestamp`` is the batch's delete horizon: the time after which the
    cleaner may drop its tombstones. The caller wrote the records' timestamp deltas from it.
    """
    buffer = bytearray(batch)
    (attributes,) = _ATTRIBUTES.unpack_from(buffer, ATTRIBUTES_OFFSET)
    _ATTRIBUTES.pack_into(buffer, ATTRIBUTES_OFFSET, attributes | DELETE_HORIZON_MASK)
    _CRC.pack_into(buffer, CRC_OFFSET, crc32c(memoryview(buffer)[ATTRIBUTES_OFFSET:]))
    return bytes(buffer)
