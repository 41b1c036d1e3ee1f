"""Records inside a magic-2 batch: decode them all, or encode a whole batch from them.

After the 61-byte header (see ``batch``) come ``records_count`` records, the whole section
compressed as one block when the batch's codec is not 0. One record::

    length               varint   bytes that follow, up to the end of the headers
    attributes           int8     unused by Kafka (0)
    timestamp_delta      varlong  from the batch's base_timestamp
    offset_delta         varint   from the batch's base_offset
    key_length, key      varint, bytes   -1 means a null key
    value_length, value  varint, bytes   -1 means a null value (a tombstone)
    headers_count        varint
    headers              per header: key_length varint, key (UTF-8, not null),
                                     value_length varint (-1 null), value

Varints are zigzag base-128, low group first: a varint holds an int32 in at most 5 bytes, a
varlong an int64 in at most 10. When the batch has the LogAppendTime bit, every record's
timestamp is the batch's ``max_timestamp``, whatever its delta says (Kafka's rule).

Only the paths that need the records themselves come here: compaction, lookups by timestamp,
recompression for ``compression.type``. Appends check every record without decoding it
(``walker``).

Why hand-written: kio 0.6.5 has record batch readers and writers, but they truncate record
timestamps to whole seconds, do not decompress, and cannot write the gappy offsets and kept
``last_offset_delta`` of a compacted batch. Offsets in a batch built here may have gaps (the
cleaner removed records between them); an empty batch is allowed when ``last_offset_delta`` is
given, as Kafka's cleaner keeps one to preserve a producer's state.

Header keys decode as UTF-8 with ``surrogateescape``: Java replaces invalid bytes with U+FFFD
instead of failing, and escaping keeps the original bytes through a decode/encode round trip.

Everything here is a pure function of its arguments; safe to call from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.common.limits import INT32_MAX, INT64_MAX, INT64_MIN
from odradek.errors import CorruptRecordError
from odradek.storage.batch import (
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    compute_crc,
)
from odradek.storage.compression import MAX_DECOMPRESSED_BYTES, Compression, compress, decompress

__all__ = [
    "Record",
    "decode_records",
    "encode_batch",
    "reencode_batch",
    "read_varint",
    "write_varint",
]

NO_PRODUCER_EPOCH = -1
NO_PARTITION_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class Record:
    """One record with its absolute offset and timestamp (ms)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


def read_varint(data: bytes, position: int, bits: int = 64) -> tuple[int, int]:
    """Read one zigzag varint of at most ``bits`` bits; return ``(value, next_position)``.

    ``bits`` is 32 for Kafka's varint (5 bytes at most) and 64 for its varlong (10 bytes).
    Raises ``IndexError`` when ``data`` ends inside the varint; callers turn it into
    ``CorruptRecordError`` once for a whole batch.
    """
    byte = data[position]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), position + 1
    result = byte & 0x7F
    shift = 7
    while True:
        position += 1
        byte = data[position]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift >= bits:
            raise CorruptRecordError(f"varint longer than {(bits + 6) // 7} bytes")
    if result >> bits:
        raise CorruptRecordError(f"varint does not fit in {bits} bits")
    return (result >> 1) ^ -(result & 1), position + 1


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (an int64; int32 values encode the same) as a zigzag varint."""
    value = (value << 1) ^ (value >> 63)
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def decode_records(
    batch: bytes | bytearray | memoryview, *, max_size: int = MAX_DECOMPRESSED_BYTES
) -> list[Record]:
    """Every record of one whole batch (header included), decompressed, offsets made absolute.

    The CRC is not checked here (``batch.validate_batch`` does that). ``max_size`` bounds the
    decompressed records section. Raises ``CorruptRecordError`` for any malformed input.
    """
    header = BatchHeader.parse(batch)
    if header.magic != MAGIC:
        raise CorruptRecordError(f"record batch magic {header.magic}, expected {MAGIC}")
    if header.size_in_bytes != len(batch):
        raise CorruptRecordError(
            f"record batch length says {header.size_in_bytes} bytes, {len(batch)} given"
        )
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(f"negative records_count {count}")
    if header.compression > Compression.ZSTD:
        raise CorruptRecordError(f"unknown compression codec id {header.compression}")
    if count == 0 and len(batch) == HEADER_SIZE:
        return []
    if header.compression == Compression.NONE:
        data = batch if type(batch) is bytes else bytes(batch)
        position = HEADER_SIZE
    else:
        records_section = memoryview(batch)[HEADER_SIZE:]
        data = decompress(header.compression, records_section, max_size=max_size)
        position = 0
    try:
        records, position = _decode(data, position, count, header)
    except IndexError as exc:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} ends inside a record"
        ) from exc
    if position != len(data):
        raise CorruptRecordError(
            f"{len(data) - position} bytes after the {count} records of the batch at offset "
            f"{header.base_offset}"
        )
    return records


def _decode(
    data: bytes, position: int, count: int, header: BatchHeader
) -> tuple[list[Record], int]:
    # The hot loop of compaction: names are local and single-byte varints (most lengths and
    # deltas) are decoded inline rather than through a call.
    read = read_varint
    new_record = Record
    end = len(data)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.is_log_append_time else None
    records: list[Record] = []
    append = records.append
    for _ in range(count):
        length, position = read(data, position, 32)
        record_end = position + length
        if length < 0 or record_end > end:
            raise CorruptRecordError(
                f"record of {length} bytes at position {position}, {end - position} remain"
            )
        attributes = data[position]
        if attributes > 0x7F:
            attributes -= 0x100
        byte = data[position + 1]
        if byte < 0x80:
            timestamp_delta = (byte >> 1) ^ -(byte & 1)
            position += 2
        else:
            timestamp_delta, position = read(data, position + 1, 64)
        byte = data[position]
        if byte < 0x80:
            offset_delta = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            offset_delta, position = read(data, position, 32)

        size, position = read(data, position, 32)
        if size >= 0:
            key = data[position : position + size]
            position += size
        elif size == -1:
            key = None
        else:
            raise CorruptRecordError(f"negative key length {size}")
        size, position = read(data, position, 32)
        if size >= 0:
            value = data[position : position + size]
            position += size
        elif size == -1:
            value = None
        else:
            raise CorruptRecordError(f"negative value length {size}")

        byte = data[position]
        if byte == 0:
            headers = ()
            position += 1
        else:
            headers, position = _decode_headers(data, position, record_end)

        if position != record_end:
            raise CorruptRecordError(
                f"record at offset {base_offset + offset_delta} declares {length} bytes "
                f"but its fields span {length + position - record_end}"
            )
        append(
            new_record(
                base_offset + offset_delta,
                base_timestamp + timestamp_delta if append_time is None else append_time,
                key,
                value,
                headers,
                attributes,
            )
        )
    return records, position


def _decode_headers(
    data: bytes, position: int, record_end: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    read = read_varint
    count, position = read(data, position, 32)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    headers = []
    for _ in range(count):
        if position >= record_end:
            raise CorruptRecordError(f"{count} headers do not fit in their record")
        size, position = read(data, position, 32)
        if size < 0:
            raise CorruptRecordError(f"header key length {size} (header keys are not nullable)")
        key = data[position : position + size].decode("utf-8", "surrogateescape")
        position += size
        size, position = read(data, position, 32)
        if size >= 0:
            value = data[position : position + size]
            position += size
        elif size == -1:
            value = None
        else:
            raise CorruptRecordError(f"negative header value length {size}")
        headers.append((key, value))
    return tuple(headers), position


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int,
    compression: Compression = Compression.NONE,
    log_append_time: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """A complete magic-2 batch holding ``records``, with its CRC.

    Records keep their own offsets, which must increase but may have gaps. ``last_offset_delta``
    defaults to the last record's; a compacted batch passes the original one. ``base_timestamp``
    defaults to the first record's timestamp and ``max_timestamp`` to the largest. An empty
    batch needs ``last_offset_delta`` and is written uncompressed, as Kafka's cleaner writes it.
    Raises ``ValueError`` when the arguments cannot make a valid batch.
    """
    compression = Compression(compression)
    if records:
        if base_timestamp is None:
            base_timestamp = records[0].timestamp
        if max_timestamp is None:
            max_timestamp = max(record.timestamp for record in records)
        section = _encode_records(records, base_offset, base_timestamp)
        records_last_delta = records[-1].offset - base_offset
        if last_offset_delta is None:
            last_offset_delta = records_last_delta
        elif last_offset_delta < records_last_delta:
            raise ValueError(
                f"last_offset_delta {last_offset_delta} is before the last record's offset "
                f"delta {records_last_delta}"
            )
        if compression is not Compression.NONE:
            section = compress(compression, section)
    else:
        if last_offset_delta is None:
            raise ValueError("an empty batch needs last_offset_delta: the offsets it stands for")
        compression = Compression.NONE
        section = b""
        if base_timestamp is None:
            base_timestamp = NO_TIMESTAMP if max_timestamp is None else max_timestamp
        if max_timestamp is None:
            max_timestamp = base_timestamp
    if not 0 <= last_offset_delta <= INT32_MAX:
        raise ValueError(f"last_offset_delta {last_offset_delta} is outside 0..{INT32_MAX}")

    attributes = int(compression)
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    buffer = bytearray(HEADER_SIZE)
    buffer += section
    try:
        HEADER_STRUCT.pack_into(
            buffer,
            0,
            base_offset,
            len(buffer) - LOG_OVERHEAD,
            partition_leader_epoch,
            MAGIC,
            0,  # the CRC, computed below over the finished bytes
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    except struct.error as exc:
        raise ValueError(f"a batch header field is out of range: {exc}") from exc
    buffer[CRC_OFFSET : CRC_OFFSET + 4] = compute_crc(buffer).to_bytes(4, "big")
    return bytes(buffer)


def reencode_batch(
    header: BatchHeader,
    records: Sequence[Record],
    compression: Compression | None = None,
    *,
    base_timestamp: int | None = None,
) -> bytes:
    """``records`` as a new batch that keeps ``header``'s identity.

    Kept: base and last offset (so a producer's sequence numbers still line up), producer id,
    epoch and base sequence, partition leader epoch, transactional and control flags, timestamp
    type (and the broker's timestamp for ``LogAppendTime``). The codec is the header's unless
    ``compression`` names another. Used by the cleaner (fewer records; ``base_timestamp`` for a
    delete horizon) and by ``compression.type`` (new codec).
    """
    return encode_batch(
        records,
        base_offset=header.base_offset,
        compression=header.compression if compression is None else compression,
        log_append_time=header.is_log_append_time,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=header.max_timestamp if header.is_log_append_time else None,
    )


def _encode_records(records: Sequence[Record], base_offset: int, base_timestamp: int) -> bytearray:
    write = write_varint
    out = bytearray()
    previous = base_offset - 1
    for record in records:
        offset_delta = record.offset - base_offset
        if record.offset <= previous or offset_delta > INT32_MAX:
            raise ValueError(
                f"record offset {record.offset} must be above {previous} and within "
                f"{INT32_MAX} of base_offset {base_offset}"
            )
        previous = record.offset
        timestamp_delta = record.timestamp - base_timestamp
        if not INT64_MIN <= timestamp_delta <= INT64_MAX:
            raise ValueError(f"record timestamp {record.timestamp} is out of range")
        if not -0x80 <= record.attributes <= 0x7F:
            raise ValueError(f"record attributes {record.attributes} do not fit in an int8")
        body = bytearray((record.attributes & 0xFF,))
        write(body, timestamp_delta)
        write(body, offset_delta)
        _write_nullable_bytes(body, record.key)
        _write_nullable_bytes(body, record.value)
        write(body, len(record.headers))
        for key, value in record.headers:
            encoded_key = key.encode("utf-8", "surrogateescape")
            write(body, len(encoded_key))
            body += encoded_key
            _write_nullable_bytes(body, value)
        write(out, len(body))
        out += body
    return out


def _write_nullable_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        write_varint(out, len(data))
        out += data
