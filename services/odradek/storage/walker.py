"""Walk the records inside a batch, compressed or not, without holding them: the append path.

``walk_batch`` runs the C record walker (``_recordwalk.c``; its specification is
``walker_reference``) over the records section of one batch and returns the walker, whose
attributes are the facts the validator's rules need (``null_key_record``, ``min_timestamp``,
``max_timestamp`` and the records they belong to). A batch that breaks the record format raises
``InvalidRecordError`` (INVALID_RECORD), as Kafka's ``DefaultRecord`` reader raises
``InvalidRecordException``; the message names the rule, the record and the byte.

A compressed section is decompressed in pieces of ``DECOMPRESSION_CHUNK_BYTES`` and each piece is
fed to the walker, which skips key, value and header bytes without keeping them. Only a varint
cut by a piece's end (at most 10 bytes) is carried to the next piece, so a walk holds one piece
and a few bytes, whatever the size of the records; it stops at the first error, and a section
that expands past ``MAX_DECOMPRESSED_BYTES`` is refused (``CorruptRecordError``) when it gets
there. An uncompressed section is walked in place, in one call.

Pure functions of their arguments; safe on any thread. The C walker releases the GIL on large
buffers, as the codecs do.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.errors import InvalidRecordError
from odradek.storage import _recordwalk
from odradek.storage.batch import HEADER_SIZE, BatchHeader
from odradek.storage.compression import (
    MAX_DECOMPRESSED_BYTES,
    Compression,
    decompress_chunks,
)
from odradek.storage.walker_reference import WalkError

__all__ = ["RecordWalker", "walk_batch", "describe_error"]

# The interface this module was written against; a stale build of the extension (one compiled
# from an older _recordwalk.c) must fail here, loudly, rather than misjudge batches.
_WALKER_ABI = 1
if _recordwalk.ABI != _WALKER_ABI:
    raise ImportError(
        f"odradek.storage._recordwalk is built from another version (ABI {_recordwalk.ABI}, "
        f"expected {_WALKER_ABI}): rebuild it with scripts/setup.sh"
    )
RecordWalker = _recordwalk.RecordWalker

# Bytes of a new piece handed to the walker together with the few carried over, so that a varint
# cut between two pieces is completed (a varint has at most 10 bytes) without copying a piece.
_SPLICE_BYTES = 16

_MESSAGES = {
    WalkError.VARINT_TOO_LONG: "varint longer than its type allows (5 bytes; 10 for a varlong)",
    WalkError.RECORD_LENGTH_NEGATIVE: "the record's length is negative ({value})",
    WalkError.RECORD_TRUNCATED: (
        "the records end inside this record (declared length {value}): "
        "the batch holds fewer bytes than its records need"
    ),
    WalkError.FIELD_OVERRUN: "a field runs past the record's declared length ({value})",
    WalkError.KEY_LENGTH: "key length {value} (only -1, for null, may be negative)",
    WalkError.VALUE_LENGTH: "value length {value} (only -1, for null, may be negative)",
    WalkError.HEADER_COUNT: "header count {value} is negative or more than the record's bytes",
    WalkError.HEADER_KEY_NULL: "header key length {value}: header keys are not nullable",
    WalkError.HEADER_VALUE_LENGTH: "header value length {value} (only -1 may be negative)",
    WalkError.RECORD_LENGTH_MISMATCH: (
        "the record's fields end before its declared length ({value})"
    ),
    WalkError.OFFSET_DELTA: "unexpected offset delta {value}",
    WalkError.TRAILING_BYTES: "bytes follow the last record the batch declares",
    WalkError.TOO_FEW_RECORDS: "the records end after {value} records",
}


def walk_batch(
    records: memoryview,
    position: int,
    header: BatchHeader,
    *,
    exact_offsets: bool,
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
) -> RecordWalker:
    """Walk the records of the batch at ``position`` in ``records`` (its header already checked).

    ``exact_offsets``: offset deltas must be 0..n-1 (a producer's batch); otherwise strictly
    increasing up to ``last_offset_delta`` (a compacted batch may have gaps). Raises
    ``InvalidRecordError`` for a record-format error and ``CorruptRecordError`` for a codec
    error or a section that decompresses past ``max_decompressed_bytes``.
    """
    walker = RecordWalker(
        header.records_count, header.last_offset_delta, header.base_timestamp, exact_offsets
    )
    section = records[position + HEADER_SIZE : position + header.size_in_bytes]
    if header.compression == Compression.NONE:
        walker.feed(section, True)
    elif section or header.records_count:
        # Kafka does not decompress the section of a batch that declares no records; the walker
        # refuses any byte such a section decompresses to.
        _feed_pieces(
            walker,
            decompress_chunks(header.compression, section, max_size=max_decompressed_bytes),
        )
    if walker.error:
        raise InvalidRecordError(describe_error(walker, position, header, exact_offsets))
    return walker


def _feed_pieces(walker: RecordWalker, pieces: Iterable[bytes | memoryview]) -> None:
    carried = b""  # the start of a varint cut by the end of the previous piece
    for piece in pieces:
        view = memoryview(piece)
        if carried:
            head = carried + bytes(view[:_SPLICE_BYTES])
            used = walker.feed(head)
            if walker.error:
                return
            if used < len(carried):  # the piece was too short to complete the varint
                carried = head[used:]
                continue
            view = view[used - len(carried) :]
        used = walker.feed(view)
        if walker.error:
            return  # stop decompressing: the rest cannot change the verdict
        carried = bytes(view[used:])
    walker.feed(carried, True)


def describe_error(
    walker: RecordWalker, position: int, header: BatchHeader, exact_offsets: bool
) -> str:
    """What the walker found wrong, and where, in words for a produce response."""
    error = WalkError(walker.error)
    what = _MESSAGES[error].format(value=walker.error_value)
    if error is WalkError.RECORD_TRUNCATED and walker.error_value < 0:
        what = "the records end inside a record's length varint"
    if error is WalkError.OFFSET_DELTA:
        if exact_offsets:
            what += f" (a producer numbers records 0..n-1: expected {walker.error_record})"
        else:
            what += f" (deltas must increase, up to last_offset_delta {header.last_offset_delta})"
    if header.compression == Compression.NONE:
        section = "records section"
    else:
        section = f"decompressed {Compression(header.compression).name.lower()} records section"
    return (
        f"invalid record {walker.error_record} of {header.records_count} in the batch at "
        f"position {position}: {what}, at byte {walker.error_position} of its {section}"
    )
