"""The record walker's specification, in plain Python: what ``_recordwalk.c`` must compute.

``reference_walk`` checks the records section of one magic-2 batch (the bytes after the 61-byte
header, decompressed; the format is in ``records``) as Kafka's ``DefaultRecord`` reader does,
and returns a ``WalkOutcome``: the first error, where it is, and the facts the validator's rules
need. It reads the whole section at once and is slow (about 2 µs per record); the broker runs the
C walker, which reaches the same outcome for the same bytes however they are cut into feeds.
Tests compare the two on random, mutated and real client batches (``tests/unit/storage``).

The rules, in the order the bytes are read (the first broken one is the error):

- exactly ``count`` records, then nothing (``TOO_FEW_RECORDS``, ``TRAILING_BYTES``);
- a record's length varint is not negative, and its fields end exactly where it says
  (``RECORD_LENGTH_NEGATIVE``, ``FIELD_OVERRUN``, ``RECORD_LENGTH_MISMATCH``); data that ends
  inside a record is ``RECORD_TRUNCATED``;
- varints hold an int32 in at most 5 bytes, varlongs an int64 in at most 10
  (``VARINT_TOO_LONG``);
- key and value lengths are -1 (null) or more; a header count is not negative and not more than
  the bytes left in the record; header keys are not null; header values are -1 or more;
- offset deltas are exactly 0..count-1 when ``exact_offsets`` (a producer's batch), else strictly
  increasing from 0 and at most ``last_offset_delta`` (a compacted batch: gaps are allowed).

A record's timestamp is ``base_timestamp + timestamp_delta`` with int64 wrap-around, as Java
computes it; ``-1`` (no timestamp) is left out of the smallest and largest, as Kafka's
``LogValidator`` leaves it out of its timestamp checks.

Pure functions; safe on any thread.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

__all__ = ["WalkError", "WalkOutcome", "reference_walk"]

NO_TIMESTAMP = -1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_NO_LIMIT = 1 << 63
VARINT_MAX_BYTES = 5  # an int32
VARLONG_MAX_BYTES = 10  # an int64


class WalkError(IntEnum):
    """Why a records section is refused; the numbers are ``_recordwalk.c``'s."""

    NONE = 0
    VARINT_TOO_LONG = 1
    RECORD_LENGTH_NEGATIVE = 2
    RECORD_TRUNCATED = 3
    FIELD_OVERRUN = 4
    KEY_LENGTH = 5
    VALUE_LENGTH = 6
    HEADER_COUNT = 7
    HEADER_KEY_NULL = 8
    HEADER_VALUE_LENGTH = 9
    RECORD_LENGTH_MISMATCH = 10
    OFFSET_DELTA = 11
    TRAILING_BYTES = 12
    TOO_FEW_RECORDS = 13


class WalkOutcome(NamedTuple):
    """What a walk found. Positions count bytes from the start of the records section.

    ``error_value`` is, by error: the record's declared length (-1 when not yet read) for
    ``RECORD_TRUNCATED``, ``FIELD_OVERRUN`` and ``RECORD_LENGTH_MISMATCH``; the value read for
    the length, count and delta errors; the records seen for ``TOO_FEW_RECORDS``; else 0.
    """

    records: int
    error: WalkError = WalkError.NONE
    error_record: int = -1
    error_position: int = -1
    error_value: int = 0
    null_key_record: int = -1  # the first record with a null key
    min_timestamp: int = INT64_MAX  # over records whose timestamp is not -1
    max_timestamp: int = INT64_MIN
    min_timestamp_record: int = -1
    max_timestamp_record: int = -1


class _Refused(Exception):
    def __init__(self, error: WalkError, position: int, value: int):
        super().__init__(error, position, value)
        self.error, self.position, self.value = error, position, value


def _varint(
    data: bytes,
    position: int,
    end: int,
    limit: int,
    max_bytes: int,
    record_start: int,
    record_length: int,
) -> tuple[int, int]:
    """One zigzag varint at ``position``; the record's end (``limit``) is checked first."""
    field = position
    result = shift = read = 0
    while True:
        if position >= limit:
            raise _Refused(WalkError.FIELD_OVERRUN, field, record_length)
        if position >= end:
            raise _Refused(WalkError.RECORD_TRUNCATED, record_start, record_length)
        byte = data[position]
        position += 1
        bits = byte & 0x7F
        if shift == 63 and bits > 1:
            raise _Refused(WalkError.VARINT_TOO_LONG, field, 0)
        result |= bits << shift
        if byte < 0x80:
            break
        shift += 7
        read += 1
        if read >= max_bytes:
            raise _Refused(WalkError.VARINT_TOO_LONG, field, 0)
    if max_bytes == VARINT_MAX_BYTES and result >> 32:
        raise _Refused(WalkError.VARINT_TOO_LONG, field, 0)
    return (result >> 1) ^ -(result & 1), position


def _wrap64(value: int) -> int:
    return ((value - INT64_MIN) % (1 << 64)) + INT64_MIN


def reference_walk(
    data: bytes | bytearray | memoryview,
    count: int,
    last_offset_delta: int,
    base_timestamp: int,
    exact_offsets: bool,
) -> WalkOutcome:
    """Walk a whole records section; see the module docstring for the rules."""
    data = bytes(data)
    end = len(data)
    facts = {
        "null_key_record": -1,
        "min_timestamp": INT64_MAX,
        "max_timestamp": INT64_MIN,
        "min_timestamp_record": -1,
        "max_timestamp_record": -1,
    }
    records = 0
    position = 0
    try:
        previous_delta = -1
        while records < count:
            if position >= end:
                raise _Refused(WalkError.TOO_FEW_RECORDS, position, records)
            start = position
            length, position = _varint(data, position, end, _NO_LIMIT, 5, start, -1)
            if length < 0:
                raise _Refused(WalkError.RECORD_LENGTH_NEGATIVE, start, length)
            body_end = position + length

            def varint(at: int, max_bytes: int = VARINT_MAX_BYTES) -> tuple[int, int]:
                return _varint(data, at, end, body_end, max_bytes, start, length)  # noqa: B023

            def skip(at: int, size: int) -> int:
                if at + size > end:
                    raise _Refused(WalkError.RECORD_TRUNCATED, start, length)  # noqa: B023
                return at + size

            if position >= body_end:
                raise _Refused(WalkError.FIELD_OVERRUN, position, length)
            if position >= end:
                raise _Refused(WalkError.RECORD_TRUNCATED, start, length)
            position += 1  # attributes

            timestamp_delta, position = varint(position, VARLONG_MAX_BYTES)
            timestamp = _wrap64(base_timestamp + timestamp_delta)
            if timestamp != NO_TIMESTAMP:
                if timestamp < facts["min_timestamp"]:
                    facts["min_timestamp"], facts["min_timestamp_record"] = timestamp, records
                if timestamp > facts["max_timestamp"]:
                    facts["max_timestamp"], facts["max_timestamp_record"] = timestamp, records

            field = position
            offset_delta, position = varint(position)
            if exact_offsets:
                bad = offset_delta != records
            else:
                bad = offset_delta <= previous_delta or offset_delta > last_offset_delta
            if bad:
                raise _Refused(WalkError.OFFSET_DELTA, field, offset_delta)
            previous_delta = offset_delta

            for error in (WalkError.KEY_LENGTH, WalkError.VALUE_LENGTH):
                field = position
                size, position = varint(position)
                if size < -1:
                    raise _Refused(error, field, size)
                if size == -1 and error is WalkError.KEY_LENGTH and facts["null_key_record"] < 0:
                    facts["null_key_record"] = records
                if size > body_end - position:
                    raise _Refused(WalkError.FIELD_OVERRUN, field, length)
                position = skip(position, max(size, 0))

            field = position
            headers, position = varint(position)
            if headers < 0 or headers > body_end - position:
                raise _Refused(WalkError.HEADER_COUNT, field, headers)
            for _ in range(headers):
                field = position
                size, position = varint(position)
                if size < 0:
                    raise _Refused(WalkError.HEADER_KEY_NULL, field, size)
                if size > body_end - position:
                    raise _Refused(WalkError.FIELD_OVERRUN, field, length)
                position = skip(position, size)
                field = position
                size, position = varint(position)
                if size < -1:
                    raise _Refused(WalkError.HEADER_VALUE_LENGTH, field, size)
                if size > body_end - position:
                    raise _Refused(WalkError.FIELD_OVERRUN, field, length)
                position = skip(position, max(size, 0))

            if position != body_end:
                raise _Refused(WalkError.RECORD_LENGTH_MISMATCH, start, length)
            records += 1
        if position < end:
            raise _Refused(WalkError.TRAILING_BYTES, position, 0)
    except _Refused as refused:
        return WalkOutcome(
            records, refused.error, records, refused.position, refused.value, **facts
        )
    return WalkOutcome(records, **facts)
